"""A frame the server cannot send is a small error frame, never a 1011 (PROTOCOL.md 1.1, "Safety limits").

Daphne's `--websocket-max-message-size` is also the largest frame autobahn
sends; here it is the size of a post of 4,000 characters, which fits, while
the server's `msg` frame of it, which carries more fields, does not.
"""
from __future__ import annotations

import json

import pytest
from asgiref.sync import sync_to_async

from messaging_client import sign_in
from messaging.testing import SocketClient

from .conftest import scrape, seed_room

pytestmark = [pytest.mark.e2e]

POST_ID = "a-post-at-the-limit"
POST = json.dumps({"id": POST_ID, "t": "room.post", "d": {"room": "wide", "body": "z" * 4000}})
LARGEST = len(POST)


async def next_error(ws: SocketClient) -> dict:
    """The next error frame the socket got; the frames before it stay in its inbox."""
    for frame in ws.inbox:
        if frame["t"] == "error":
            ws.inbox.remove(frame)
            return frame
    while (frame := await ws.receive())["t"] != "error":
        ws.inbox.append(frame)
    return frame


async def test_frames_over_the_servers_largest_are_error_frames_and_the_sockets_live_on(daphne):
    server = daphne(("--websocket-max-message-size", str(LARGEST)))
    await sync_to_async(seed_room)("wide", 2, 4000)
    ana = await SocketClient(server.url, sign_in(server.url, "ana")).connect()
    bob = await SocketClient(server.url, sign_in(server.url, "bob")).connect()

    # A join's backlog: each message too large becomes an error frame naming the join.
    join = await ana.send("room.join", {"room": "wide", "since": 0})
    assert (await ana.ack(join))["ok"]
    for _ in range(2):
        frame = await ana.receive()
        assert frame["t"] == "error" and frame["error"]["code"] == "frame_too_large", frame
        assert frame["error"]["id"] == join and str(LARGEST) in frame["error"]["message"]
    assert (await ana.call("room.post", {"room": "wide", "body": "still here"}))["ok"]
    assert (await bob.call("room.join", {"room": "wide", "since": 3}))["ok"]

    # A live frame too large: every member gets the error frame, without an id.
    await bob.ws.send(POST)
    ack = await bob.ack(POST_ID)
    assert ack["ok"], ack
    for ws in (ana, bob):
        frame = await next_error(ws)
        assert frame["error"]["code"] == "frame_too_large" and "id" not in frame["error"], frame
        assert (await ws.call("room.post", {"room": "wide", "body": "and here"}))["ok"]
    assert scrape(server, "messaging_unsendable_frames_total", reason="too_large") == 4
    for ws in (ana, bob):
        await ws.close()
