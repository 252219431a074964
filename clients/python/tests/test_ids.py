"""The client's own time-ordered ids (messaging_client/ids.py): UUID version 7, as the server's app mints them."""
from __future__ import annotations

import time
import uuid

from messaging_client import MemoryStore, Outbox
from messaging_client.ids import time_ordered_id, uuid7


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


def test_the_outbox_mints_time_ordered_ids_unless_given_one():
    outbox = Outbox(MemoryStore())
    assert uuid.UUID(hex=outbox.add("room.post", {"room": "lobby", "body": "hi"}).id).version == 7
    assert outbox.add("room.post", {"room": "lobby", "body": "hi"}, id="bot-1").id == "bot-1"
