"""The client's outbox mints time-ordered ids (messaging_client/ids.py, a copy of the app's:
tests/unit/test_ids.py runs one contract against both)."""

from __future__ import annotations

import uuid

from messaging_client import MemoryStore, Outbox


def test_the_outbox_mints_time_ordered_ids_unless_given_one():
    outbox = Outbox(MemoryStore())
    assert uuid.UUID(hex=outbox.add("room.post", {"room": "lobby", "body": "hi"}).id).version == 7
    assert outbox.add("room.post", {"room": "lobby", "body": "hi"}, id="bot-1").id == "bot-1"
