"""Hostile clients against real daphne processes: the deployed stack, not the test harness.

Frame limits are enforced twice: daphne (autobahn) refuses a single frame
over `--websocket-max-frame-size` before buffering it, and the consumer
refuses any message over `MAX_FRAME_BYTES`, however it was fragmented. Both
close with 1009, so a client sees one behaviour. Daphne's message limit stays
at its default because autobahn applies that one to the server's own frames
too (a large join ack would fail): see docs/RELIABILITY.md.
"""

from __future__ import annotations

import asyncio
import json

import pytest
import websockets
from asgiref.sync import sync_to_async
from django.contrib.auth import get_user_model
from django.contrib.sessions.models import Session
from websockets.exceptions import ConnectionClosed, InvalidStatus

from messaging.models import Membership, Message, Room
from messaging.testing import SocketClient

from .conftest import sign_in_many

pytestmark = [pytest.mark.e2e]

LIMIT = 1000
NO_ROLLOVER = str(10**7)


def frame_of(size: int, id: str = "sized") -> str:
    """A room.post frame of exactly `size` bytes."""
    frame = {"id": id, "t": "room.post", "d": {"room": "lobby", "body": ""}}
    frame["d"]["body"] = "x" * (size - len(json.dumps(frame)))
    text = json.dumps(frame)
    assert len(text.encode()) == size
    return text


async def close_code(ws) -> int | None:
    """Read until the server closes; its close code (None: no close frame arrived)."""
    with pytest.raises(ConnectionClosed) as closed:
        for _ in range(100):
            await asyncio.wait_for(ws.recv(), 10)
    return closed.value.rcvd.code if closed.value.rcvd else None


@pytest.fixture
async def limited(cluster):
    """One daphne whose own frame limit matches MAX_FRAME_BYTES, and a signed-in, joined socket on it."""
    (server,) = cluster(1, args=("--websocket-max-frame-size", str(LIMIT)), MESSAGING_MAX_FRAME_BYTES=str(LIMIT))
    (session,) = await sign_in_many(server.url, 1)

    async def socket() -> SocketClient:
        ws = await SocketClient(server.url, session).connect()
        assert (await ws.call("room.join", {"room": "lobby"}))["ok"]
        return ws

    return server, session, socket


async def test_a_frame_at_the_limit_is_processed(limited):
    _, _, socket = limited
    ws = await socket()
    await ws.ws.send(frame_of(LIMIT))
    assert (await ws.ack("sized"))["ok"]
    await ws.close()


@pytest.mark.parametrize(
    "send, codes",
    [
        pytest.param(lambda ws: ws.send(frame_of(LIMIT + 1)), {1009}, id="one-byte-over"),
        # Daphne refuses it from the frame header, without buffering it.
        pytest.param(lambda ws: ws.send("x" * (4 * 1024 * 1024)), {1009}, id="4-MiB-refused-by-daphne"),
        pytest.param(
            lambda ws: ws.send(iter([frame_of(LIMIT + 500)[i : i + 500] for i in range(0, LIMIT + 500, 500)])),
            {1009},
            id="fragmented-into-small-frames-refused-by-the-consumer",
        ),
    ],
)
async def test_a_message_over_the_limit_closes_with_1009_and_stores_nothing(limited, send, codes):
    _, _, socket = limited
    ws = await socket()
    try:
        await send(ws.ws)
    except ConnectionClosed:
        pass
    assert await close_code(ws.ws) in codes
    assert not await Message.objects.filter(room__slug="lobby").aexists()
    # The server lives on.
    assert (await (await socket()).call("room.post", {"room": "lobby", "body": "still here"}))["ok"]


async def test_server_frames_may_be_larger_than_the_client_limit(limited):
    _, _, socket = limited

    def crowd_the_room():
        room = Room.objects.get(slug="lobby")
        for n in range(30):
            user = get_user_model().objects.create_user(username=f"crowd-{n}", first_name=f"member number {n:04}")
            Membership.objects.create(room=room, user=user)

    ws = await socket()
    await sync_to_async(crowd_the_room)()
    ack = await ws.call("room.join", {"room": "lobby"})
    assert len(json.dumps(ack)) > LIMIT and len(ack["d"]["members"]) == 31
    await ws.close()


async def test_binary_frame_closes_with_1003(limited):
    _, _, socket = limited
    ws = await socket()
    await ws.ws.send(b"\x00\x01")
    assert await close_code(ws.ws) == 1003


async def test_malformed_frames_in_a_row_close_with_1008(limited):
    _, _, socket = limited
    ws = await socket()
    for _ in range(10):
        await ws.ws.send("{")
    assert await close_code(ws.ws) == 1008


async def test_foreign_origin_with_a_valid_cookie_is_refused_at_the_handshake(limited):
    server, session, _ = limited
    with pytest.raises(InvalidStatus) as refused:
        await websockets.connect(
            server.url.replace("http", "ws") + "/ws/",
            additional_headers={"Cookie": f"sessionid={session}", "Origin": "https://evil.example"},
        )
    assert refused.value.response.status_code == 403


async def test_socket_without_a_session_is_closed_with_4401(limited):
    server, _, _ = limited
    ws = await websockets.connect(server.url.replace("http", "ws") + "/ws/", additional_headers={"Origin": server.url})
    assert await close_code(ws) == 4401


async def test_logout_elsewhere_closes_the_socket_with_4401(cluster):
    (server,) = cluster(1, MESSAGING_SESSION_CHECK_INTERVAL="0.5")
    (session,) = await sign_in_many(server.url, 1)
    ws = await SocketClient(server.url, session).connect()
    assert (await ws.call("room.join", {"room": "lobby"}))["ok"]
    await sync_to_async(Session.objects.filter(session_key=session).delete)()  # what logout does
    assert await close_code(ws.ws) == 4401


async def test_the_user_rate_limit_holds_across_processes(cluster):
    a, b = cluster(2, MESSAGING_USER_RATE_LIMIT="6", MESSAGING_USER_RATE_WINDOW=NO_ROLLOVER)
    (session,) = await sign_in_many(a.url, 1)
    on_a, on_b = await SocketClient(a.url, session).connect(), await SocketClient(b.url, session).connect()
    assert (await on_a.call("room.join", {"room": "lobby"}))["ok"]
    assert (await on_b.call("room.join", {"room": "lobby"}))["ok"]
    acks = []
    for n in range(3):
        acks.append(await on_a.call("room.post", {"room": "lobby", "body": f"a{n}"}))
        acks.append(await on_b.call("room.post", {"room": "lobby", "body": f"b{n}"}))
    # 2 joins + 4 posts fit in 6; the last two posts, one on each process, do not.
    assert [a["ok"] for a in acks] == [True] * 4 + [False] * 2
    assert {a["error"]["code"] for a in acks[4:]} == {"rate_limited"}
    assert all(a["error"]["retry"] and a["error"]["retry_after"] > 0 for a in acks[4:])
    assert await Message.objects.filter(room__slug="lobby").acount() == 4
    for ws in (on_a, on_b):
        await ws.close()
