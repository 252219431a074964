"""Time-ordered ids (messaging/ids.py): UUID version 7 as RFC 9562 lays it out,
what the app mints for events and its test clients for commands. The Python
client, installed on its own, has a copy (messaging_client/ids.py): one
contract, run against both."""

from __future__ import annotations

import time
import uuid

import pytest

import messaging.ids
import messaging_client.ids


@pytest.fixture(params=[messaging.ids, messaging_client.ids], ids=["app", "client"])
def ids(request):
    return request.param


def test_a_uuid7_starts_with_the_time_in_milliseconds_and_carries_version_7(ids):
    before = time.time_ns() // 1_000_000
    value = ids.uuid7()
    after = time.time_ns() // 1_000_000
    assert value.version == 7 and value.variant == uuid.RFC_4122
    assert before <= value.int >> 80 <= after


def test_ids_minted_a_millisecond_apart_sort_in_the_order_they_were_minted(ids):
    minted = []
    for _ in range(5):
        minted.append(ids.time_ordered_id())
        time.sleep(0.002)
    assert minted == sorted(minted)


def test_ids_are_command_ids_of_the_protocol_and_do_not_repeat(ids):
    minted = {ids.time_ordered_id() for _ in range(20000)}
    assert len(minted) == 20000
    assert all(len(i) == 32 and int(i, 16) >= 0 and uuid.UUID(hex=i).version == 7 for i in minted)
