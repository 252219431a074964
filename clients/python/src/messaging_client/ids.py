"""Time-ordered command ids (UUID version 7, RFC 9562): what the outbox and `http_command` mint.

An id that starts with the time lands beside the ids minted just before it
in the server's unique indexes of command ids, so a few index pages take
the inserts instead of any page (the server's `messaging/ids.py` says why,
with the figures). Nothing reads the time back: the server takes any id of
the protocol's rules, and these are only as unique as their 74 random bits
(per millisecond). Python 3.14's `uuid.uuid7` is the same layout.

The server's app mints its own ids with the same code (`messaging.ids`), and
this module is a copy of it, not an import of it: this package is installed
on its own by programs that have no server, and importing anything of the
app would bring Django, Channels and Redis with it. A copy is safe where a
shared module would be a third distribution to release and keep in step:
the two never need to agree on anything, since the server accepts any id of
the protocol's rules and the layout is fixed by the RFC.
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
