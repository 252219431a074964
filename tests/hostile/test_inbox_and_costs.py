"""What one socket may make the server hold, against a real daphne process.

The inbox (frames received and not yet answered) is bounded by `INBOX_LIMIT`:
a command past it is refused at once with `rate_limited`, so a client cannot
queue work without end behind a slow command.
"""
from __future__ import annotations

import pytest
from asgiref.sync import sync_to_async

from messaging.models import Room

from ..faults.conftest import raw_db
from ..support.wsclient import WsClient, sign_in

pytestmark = [pytest.mark.e2e]

INBOX_LIMIT = 200  # the default
RATE_BURST = 100


async def test_a_command_past_the_inbox_is_refused_at_once_and_those_before_it_are_answered(daphne):
    server = daphne()
    ws = await WsClient(server.url, sign_in(server.url, "flooder")).connect()
    await sync_to_async(Room.objects.create)(slug="held")
    lock = raw_db()
    try:
        with lock.cursor() as cursor:
            # The socket's first command, a first join of the room, waits for
            # this row lock, and every frame behind it waits in the inbox.
            cursor.execute(f"SELECT id FROM {Room._meta.db_table} WHERE slug = 'held' FOR UPDATE")
        join = await ws.send("room.join", {"room": "held"})
        posts = [await ws.send("room.post", {"room": "held", "body": f"p{n}"}) for n in range(INBOX_LIMIT + 29)]
        # The inbox holds the join and the next 199 frames (a reconnecting
        # outbox of RATE_BURST fits); the last 30 are refused while the join still waits.
        for id in posts[INBOX_LIMIT - 1:]:
            ack = await ws.ack(id)
            assert ack["ok"] is False and ack["error"]["code"] == "rate_limited", ack
            assert ack["error"]["retry"] is True and ack["error"]["retry_after"] > 0
        assert not any(frame.get("t") == "ack" for frame in ws.inbox)
    finally:
        lock.rollback()
        lock.close()
    assert (await ws.ack(join))["ok"]
    answers = [await ws.ack(id) for id in posts[:INBOX_LIMIT - 1]]
    assert all(ack["ok"] for ack in answers[:RATE_BURST - 1])
    assert {ack["error"]["code"] for ack in answers if not ack["ok"]} <= {"rate_limited"}
    await ws.close()
