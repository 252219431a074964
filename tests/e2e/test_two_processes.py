"""Two daphne processes sharing PostgreSQL and Redis behave as one server."""

from __future__ import annotations

import asyncio
import uuid

import pytest
from asgiref.sync import sync_to_async

from messaging.models import CommandRecord, Message
from messaging.testing import SocketClient
from messaging_client import sign_in

pytestmark = [pytest.mark.e2e]


async def test_concurrent_duplicates_across_two_processes_apply_once(start_daphne):
    a, b = start_daphne(), start_daphne()
    session = await sync_to_async(sign_in)(a.url, "ana")
    sockets = [await SocketClient(server.url, session).connect() for server in (a, b, a, b, a, b)]
    try:
        for ws in sockets:
            assert (await ws.call("room.join", {"room": "lobby"}))["ok"]
        ids = [uuid.uuid4().hex for _ in range(20)]
        for n, id in enumerate(ids):
            await asyncio.gather(*(ws.send("room.post", {"room": "lobby", "body": f"m{n}"}, id=id) for ws in sockets))
        for id in ids:
            acks = await asyncio.gather(*(ws.ack(id) for ws in sockets))
            assert all(ack["ok"] for ack in acks), acks
            assert sorted(ack["dup"] for ack in acks) == [False] + [True] * 5
            assert len({str(ack["d"]) for ack in acks}) == 1
    finally:
        for ws in sockets:
            await ws.close()

    stored = await sync_to_async(lambda: list(Message.objects.order_by("seq").values_list("seq", "client_msg_id")))()
    assert [seq for seq, _ in stored] == list(range(1, 21))
    assert sorted(cid for _, cid in stored) == sorted(ids)
    assert await sync_to_async(CommandRecord.objects.count)() == 20


async def test_a_post_on_one_process_reaches_a_socket_on_the_other(start_daphne):
    a, b = start_daphne(), start_daphne()
    ana = await SocketClient(a.url, await sync_to_async(sign_in)(a.url, "ana")).connect()
    bob = await SocketClient(b.url, await sync_to_async(sign_in)(b.url, "bob")).connect()
    ana_elsewhere = await SocketClient(b.url, ana.session).connect()
    try:
        for ws in (ana, bob, ana_elsewhere):
            assert (await ws.call("room.join", {"room": "lobby"}))["ok"]
        ack = await ana.call("room.post", {"room": "lobby", "body": "hello bob"})
        assert ack["ok"] and ack["d"]["seq"] == 1
        for ws in (bob, ana_elsewhere, ana):
            msg = (await ws.messages_until("lobby", 1))[1]["d"]
            assert msg["body"] == "hello bob" and msg["sender"]["name"] == "ana" and msg["at"] == ack["d"]["at"]
    finally:
        for ws in (ana, bob, ana_elsewhere):
            await ws.close()


async def test_frames_of_every_length_reach_sockets_on_both_processes_intact(start_daphne):
    # Frame headers differ under 126 bytes, to 65,535 and beyond; daphne's
    # connections are written to directly (messaging/transport/servers/daphne.py).
    a, b = start_daphne(), start_daphne()
    ana = await SocketClient(a.url, await sync_to_async(sign_in)(a.url, "ana")).connect()
    bob = await SocketClient(b.url, await sync_to_async(sign_in)(b.url, "bob")).connect()
    bodies = ["hi", "é" * 60, "😀" * 4000, 'a\nb "quoted" \\ </script>']
    try:
        for ws in (ana, bob):
            assert (await ws.call("room.join", {"room": "lobby"}))["ok"]
        for body in bodies:
            assert (await ana.call("room.post", {"room": "lobby", "body": body}))["ok"]
        for ws in (ana, bob):
            live = await ws.messages_until("lobby", len(bodies))
            assert [live[seq]["d"]["body"] for seq in range(1, len(bodies) + 1)] == bodies
        late = await SocketClient(b.url, bob.session).connect()
        try:
            assert (await late.call("room.join", {"room": "lobby", "since": 0}))["ok"]
            backlog = await late.messages_until("lobby", len(bodies))
            assert [backlog[seq]["d"]["body"] for seq in range(1, len(bodies) + 1)] == bodies
        finally:
            await late.close()
    finally:
        for ws in (ana, bob):
            await ws.close()
