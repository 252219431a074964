"""What one socket may make the server hold or send, against a real daphne process.

The inbox (frames received and not yet answered) is bounded by `INBOX_LIMIT`:
a command past it is refused at once with `rate_limited`, so a client cannot
queue work without end behind a slow command. What a command sends back
(a join's backlog) costs the socket's token bucket in proportion to its size
(`REPLY_BYTES_PER_TOKEN`), so a burst of large joins is refused long before
it costs memory or bandwidth, while a reconnect rejoining its rooms is not.
"""

from __future__ import annotations

import asyncio
import time

import pytest
from asgiref.sync import sync_to_async

from messaging.models import Room
from messaging.testing import SocketClient
from messaging_client import sign_in

from ..faults.conftest import raw_db
from .conftest import seed_room

pytestmark = [pytest.mark.e2e]

INBOX_LIMIT = 200  # the default
RATE_BURST = 100


async def test_a_command_past_the_inbox_is_refused_at_once_and_those_before_it_are_answered(daphne):
    server = daphne()
    ws = await SocketClient(server.url, sign_in(server.url, "flooder")).connect()
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
        for id in posts[INBOX_LIMIT - 1 :]:
            ack = await ws.ack(id)
            assert ack["ok"] is False and ack["error"]["code"] == "rate_limited", ack
            assert ack["error"]["retry"] is True and ack["error"]["retry_after"] > 0
        assert not any(frame.get("t") == "ack" for frame in ws.inbox)
    finally:
        lock.rollback()
        lock.close()
    assert (await ws.ack(join))["ok"]
    answers = [await ws.ack(id) for id in posts[: INBOX_LIMIT - 1]]
    assert all(ack["ok"] for ack in answers[: RATE_BURST - 1])
    assert {ack["error"]["code"] for ack in answers if not ack["ok"]} <= {"rate_limited"}
    await ws.close()


async def test_a_burst_of_large_backlogs_is_refused_for_their_size(daphne):
    """The issue's joins (500 messages of 4,000 characters, `since: 0`), from a client that reads them."""
    server = daphne()
    ws = await SocketClient(server.url, sign_in(server.url, "reader")).connect()
    await sync_to_async(seed_room)("big", 500, 4000)
    ids = [await ws.send("room.join", {"room": "big", "since": 0}) for _ in range(100)]
    acks = [await ws.ack(id, timeout=60) for id in ids]
    ok = [ack for ack in acks if ack["ok"]]
    # Each backlog (2 MB) costs some 63 tokens of the 100 the burst holds.
    assert 1 < len(ok) < 4, [ack.get("error") for ack in acks]
    refused = acks[len(ok) :]
    assert all(not ack["ok"] and ack["error"]["code"] == "rate_limited" for ack in refused)
    retry_after = refused[0]["error"]["retry_after"]
    print(f"{len(ok)} joins ran, {len(refused)} refused, the first with retry_after {retry_after} s")
    assert retry_after > 1, "the debt of a backlog, not the one token of a command"
    # The hint is right: after it, the same join runs afresh.
    await asyncio.sleep(retry_after)
    assert (await ws.call("room.join", {"room": "big", "since": 499}))["ok"]
    await ws.close()


async def test_a_reconnect_rejoining_its_rooms_and_resending_its_outbox_fits_the_burst(daphne):
    server = daphne()
    ws = await SocketClient(server.url, sign_in(server.url, "returning")).connect()
    rooms = [f"room-{n}" for n in range(10)]
    for room in rooms:
        await sync_to_async(seed_room)(room, 50, 200)
    started = time.monotonic()
    joins = [await ws.send("room.join", {"room": room, "since": 0}) for room in rooms]
    posts = [await ws.send("room.post", {"room": rooms[n % 10], "body": f"queued {n}"}) for n in range(80)]
    acks = [await ws.ack(id) for id in joins + posts]
    assert all(ack["ok"] for ack in acks), [ack.get("error") for ack in acks if not ack["ok"]]
    print(f"10 joins and 80 posts in {time.monotonic() - started:.2f} s")
    await ws.close()
