"""The server's own frames are sent up to MAX_SEND_BUFFER, whatever daphne's message size limit
(PROTOCOL.md 1.1, "Safety limits"; 1.2, "Pages that fit in a frame").

Daphne's `--websocket-max-message-size` is the largest message autobahn takes
from a client, and autobahn applied it to what the server sends too: here it
is the size of a post of 4,000 characters, which fits, while the server's
`msg` frame of it, which carries more fields, does not. Such frames were
`frame_too_large` error frames; a join's backlog and a room's live frames are
now sent, and a frame over MAX_SEND_BUFFER is the one that is not
(tests/integration/test_send_path.py).
"""

from __future__ import annotations

import json

import pytest
import websockets
from asgiref.sync import sync_to_async

from messaging.testing import SocketClient
from messaging_client import sign_in

from .conftest import scrape, seed_room

pytestmark = [pytest.mark.e2e]

POST_ID = "a-post-at-the-limit"
POST = json.dumps({"id": POST_ID, "t": "room.post", "d": {"room": "wide", "body": "z" * 4000}})
LARGEST = len(POST)


async def test_frames_over_daphnes_message_size_are_sent_and_the_sockets_live_on(daphne):
    server = daphne(("--websocket-max-message-size", str(LARGEST)))
    await sync_to_async(seed_room)("wide", 2, 4000)
    ana = await SocketClient(server.url, sign_in(server.url, "ana")).connect()
    bob = await SocketClient(server.url, sign_in(server.url, "bob")).connect()

    # A join's backlog: each message, larger than daphne's limit, is sent.
    join = await ana.send("room.join", {"room": "wide", "since": 0})
    assert (await ana.ack(join))["ok"]
    for seq in (1, 2):
        frame, size = await ana.receive_sized()
        assert frame["t"] == "msg" and frame["d"]["seq"] == seq and size > LARGEST, frame.get("error", frame["t"])
    assert (await bob.call("room.join", {"room": "wide", "since": 2}))["ok"]

    # A live frame larger than it goes to every member.
    await bob.ws.send(POST)
    ack = await bob.ack(POST_ID)
    assert ack["ok"], ack
    for ws in (ana, bob):
        frame = await ws.messages_until("wide", ack["d"]["seq"])
        assert frame[ack["d"]["seq"]]["d"]["id"] == POST_ID
        assert (await ws.call("room.post", {"room": "wide", "body": "and here"}))["ok"]
    # A client still may not send more than daphne takes: closed with 1009.
    await ana.ws.send(POST.replace('"z', '"zz', 1))
    with pytest.raises(websockets.ConnectionClosed) as closed:
        while True:
            await ana.receive()
    assert closed.value.rcvd.code == 1009
    assert scrape(server, "messaging_unsendable_frames_total", reason="too_large") == 0
    await bob.close()
