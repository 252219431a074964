"""Time-ordered ids (UUID version 7, RFC 9562) for what the app mints (the Python client,
which imports nothing of the app, has a copy: `messaging_client/ids.py`).

A command's id and an event's id end in unique B-tree indexes that grow with
the messages (the record's `(user, command id)`, the message's `(sender,
client id)`, the event's `event_id`). Random ids (version 4) land on any
page of those indexes, so once an index outgrows PostgreSQL's buffers every
insert touches a page of its own, and the first touch of a page after each
checkpoint writes the whole page to the WAL. An id that starts with the time
lands beside the ids minted just before it: a few pages take all the
inserts. Measured on a table of 3,000,000 rows (docs/PERFORMANCE.md): 326
bytes of WAL per insert against 1,920-2,007, and 18-21 against 26-30 us.

Nothing reads the time back: the server takes any id of the protocol's
rules, and these are only as unique as their 74 random bits (per
millisecond). Python 3.14's `uuid.uuid7` is the same layout.
"""

from __future__ import annotations

import os
import time
import uuid

_VERSION = 0x7 << 76
_VARIANT = 0x2 << 62
# The version's four bits and the variant's two, cleared before they are set.
_FIXED = ~((0xF << 76) | (0x3 << 62))


def uuid7() -> uuid.UUID:
    """A UUID whose first 48 bits are the Unix time in milliseconds, the rest random."""
    milliseconds = time.time_ns() // 1_000_000
    value = (milliseconds << 80) | int.from_bytes(os.urandom(10), "big")
    return uuid.UUID(int=(value & _FIXED) | _VERSION | _VARIANT)


def time_ordered_id() -> str:
    """A command id: `uuid7()`'s 32 hex digits (the protocol's id rules)."""
    return uuid7().hex
