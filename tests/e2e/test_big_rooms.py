"""Rooms of thousands of members through real daphne processes, two where it matters."""

from __future__ import annotations

import pytest
from asgiref.sync import sync_to_async

from messaging.testing import SocketClient
from messaging_client import sign_in

from ..support.crowds import catch_up, crowd

pytestmark = [pytest.mark.e2e]


async def test_a_room_of_8000_members_is_joined_over_daphne(start_daphne):
    # Before, the ack listed all of them: 1.7 MB, over autobahn's 1 MiB
    # server-frame limit, and every join closed with 1011.
    await sync_to_async(crowd)("crowd", 8000)
    server = start_daphne()
    ana = await SocketClient(server.url, await sync_to_async(sign_in)(server.url, "ana")).connect()
    try:
        ack = await ana.call("room.join", {"room": "crowd"})
        assert ack["ok"] and ack["d"]["members_total"] == 8001 and len(ack["d"]["members"]) == 100
        page = await ana.call("room.members", {"room": "crowd", "after": ack["d"]["members"][98]["user"]})
        assert page["ok"] and len(page["d"]["members"]) == 100 and page["d"]["more"] is True
    finally:
        await ana.close()


async def frames_of(ws: SocketClient, kind: str, count: int) -> list[dict]:
    """The next `count` frames of this type (the inbox's first); the others stay in the inbox."""
    found = [f for f in ws.inbox if f["t"] == kind]
    ws.inbox = [f for f in ws.inbox if f["t"] != kind]
    while len(found) < count:
        frame = await ws.receive(15)
        (found if frame["t"] == kind else ws.inbox).append(frame)
    ws.inbox.extend(found[count:])
    return found[:count]


async def nothing_more(ws: SocketClient, kinds: set[str], wait: float = 1.0) -> list[dict]:
    """Frames of these types that come within `wait` (from the inbox too): none is the answer hoped for."""
    extra = [f for f in ws.inbox if f["t"] in kinds]
    try:
        while True:
            frame = await ws.receive(wait)
            if frame["t"] in kinds:
                extra.append(frame)
    except TimeoutError:
        return extra


async def test_the_senders_sockets_on_two_processes_get_each_state_once_and_nobody_gets_status(start_daphne):
    crowd_ids = await sync_to_async(crowd)("big", 150, name_length=40)
    a, b = start_daphne(), start_daphne()
    ana_session = await sync_to_async(sign_in)(a.url, "ana")
    ana_a, ana_b = await SocketClient(a.url, ana_session).connect(), await SocketClient(b.url, ana_session).connect()
    bob = await SocketClient(a.url, await sync_to_async(sign_in)(a.url, "bob")).connect()
    cat = await SocketClient(b.url, await sync_to_async(sign_in)(b.url, "cat")).connect()
    sockets = (ana_a, ana_b, bob, cat)
    try:
        for ws in sockets:
            assert (await ws.call("room.join", {"room": "big"}))["ok"]
        for body in ("one", "two"):
            assert (await ana_a.call("room.post", {"room": "big", "body": body}))["ok"]
        for ws in sockets:
            await ws.messages_until("big", 2)
        await sync_to_async(catch_up)("big", crowd_ids, 2)

        assert (await bob.call("receipt", {"room": "big", "delivered": 2, "read": 2}))["ok"]
        assert (await cat.call("receipt", {"room": "big", "delivered": 2, "read": 2}))["ok"]
        for ws in (ana_a, ana_b):
            told = [(f["d"]["seq"], f["d"]["state"]) for f in await frames_of(ws, "state", 4)]
            assert told == [(1, "delivered"), (2, "delivered"), (1, "read"), (2, "read")]
        for ws in sockets:
            assert await nothing_more(ws, {"state", "status"}) == []
    finally:
        for ws in sockets:
            await ws.close()
