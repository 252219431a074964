"""Time-ordered ids (messaging/ids.py): UUID version 7 as RFC 9562 lays it out,
what the app mints for events and its test clients for commands (the Python
client has its own copy, tested in clients/python/tests/test_ids.py)."""
from __future__ import annotations

import time
import uuid

from messaging.ids import time_ordered_id, uuid7


def test_a_uuid7_starts_with_the_time_in_milliseconds_and_carries_version_7():
    before = time.time_ns() // 1_000_000
    value = uuid7()
    after = time.time_ns() // 1_000_000
    assert value.version == 7 and value.variant == uuid.RFC_4122
    assert before <= value.int >> 80 <= after


def test_ids_minted_a_millisecond_apart_sort_in_the_order_they_were_minted():
    minted = []
    for _ in range(5):
        minted.append(time_ordered_id())
        time.sleep(0.002)
    assert minted == sorted(minted)


def test_ids_are_command_ids_of_the_protocol_and_do_not_repeat():
    ids = {time_ordered_id() for _ in range(20000)}
    assert len(ids) == 20000
    assert all(len(i) == 32 and int(i, 16) >= 0 and uuid.UUID(hex=i).version == 7 for i in ids)

