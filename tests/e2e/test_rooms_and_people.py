"""Rooms and people across two daphne processes: invitations, typing and
presence reach every process; a process killed takes its users offline."""
from __future__ import annotations

import asyncio
import time

import pytest
from asgiref.sync import sync_to_async

from messaging_client import sign_in
from messaging.testing import SocketClient as WsClient

pytestmark = [pytest.mark.e2e]


async def user_id(ws: WsClient, name: str) -> int:
    """The user of `ws`, from its own entry in a join ack of a room of its own."""
    ack = await ws.call("room.join", {"room": f"own-{name}"})
    return ack["d"]["members"][0]["user"]


async def frame(ws: WsClient, kind: str, timeout: float = 15) -> dict:
    """The next frame of type `kind` (from the inbox first)."""
    for n, f in enumerate(ws.inbox):
        if f["t"] == kind:
            return ws.inbox.pop(n)
    deadline = time.monotonic() + timeout
    while True:
        f = await ws.receive(max(0.1, deadline - time.monotonic()))
        if f["t"] == kind:
            return f
        ws.inbox.append(f)


async def test_an_invitation_reaches_the_users_sockets_on_both_processes(start_daphne):
    a, b = start_daphne(), start_daphne()
    ana = await WsClient(a.url, await sync_to_async(sign_in)(a.url, "ana")).connect()
    bob_session = await sync_to_async(sign_in)(b.url, "bob")
    bobs = [await WsClient(server.url, bob_session).connect() for server in (a, b)]
    try:
        bob = await user_id(bobs[1], "bob")
        assert (await ana.call("room.create", {"room": "secret", "private": True}))["ok"]
        assert (await bobs[1].call("room.join", {"room": "secret"}))["error"]["code"] == "forbidden"
        assert (await ana.call("room.invite", {"room": "secret", "user": bob}))["ok"]
        for ws in bobs:
            invited = await frame(ws, "invited")
            assert invited["d"]["room"] == "secret" and invited["d"]["by"]["name"] == "ana"
        for ws in (ana, bobs[1]):
            assert (await ws.call("room.join", {"room": "secret"}))["ok"]
        assert (await bobs[1].call("room.post", {"room": "secret", "body": "hi from b"}))["ok"]
        assert (await ana.messages_until("secret", 1))[1]["d"]["body"] == "hi from b"
        # Typing crosses processes too, and not back to the typist.
        assert (await ana.call("typing", {"room": "secret", "typing": True}))["ok"]
        typing = await frame(bobs[1], "typing")
        assert typing["d"]["typing"] is True and typing["d"]["name"] == "ana"
        # Removal on one process unsubscribes the member's socket on the other.
        assert (await ana.call("room.remove", {"room": "secret", "user": bob}))["ok"]
        left = await frame(bobs[1], "room.left")
        assert left["d"]["by"]["name"] == "ana"
        assert (await ana.call("room.post", {"room": "secret", "body": "gone"}))["ok"]
        await ana.messages_until("secret", 2)
        with pytest.raises(asyncio.TimeoutError):
            while True:
                f = await bobs[1].receive(timeout=1)
                assert f["t"] != "msg", f
    finally:
        for ws in (ana, *bobs):
            await ws.close()


async def test_a_killed_process_takes_its_users_offline_within_30_seconds(start_daphne):
    a, b = start_daphne(), start_daphne()
    bob = await WsClient(b.url, await sync_to_async(sign_in)(b.url, "bob")).connect()
    ana = await WsClient(a.url, await sync_to_async(sign_in)(a.url, "ana")).connect()
    try:
        assert (await bob.call("room.join", {"room": "lobby"}))["ok"]
        ack = await ana.call("room.join", {"room": "lobby"})
        ana_id = next(m["user"] for m in ack["d"]["members"] if m["name"] == "ana")
        members = (await bob.call("room.members", {"room": "lobby"}))["d"]["members"]
        assert {m["user"]: m["online"] for m in members}[ana_id] is True
        bob.inbox.clear()
        a.kill()
        killed = time.monotonic()
        offline = await frame(bob, "presence", timeout=30)
        assert offline["d"] == {"room": "lobby", "user": ana_id, "online": False}
        assert time.monotonic() - killed <= 30
        members = (await bob.call("room.members", {"room": "lobby"}))["d"]["members"]
        assert {m["user"]: m["online"] for m in members}[ana_id] is False
    finally:
        await bob.close()
