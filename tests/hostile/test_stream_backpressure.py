"""An event stream (`GET /api/stream`) whose client does not read, against real daphne and uvicorn processes.

Its room's frames queue as a socket's do, and once more than
`MAX_SEND_BUFFER` waits the stream is ended and what waited dropped, as a
socket is closed with 1008 (PROTOCOL.md 1.2, "Server-sent events"); the
room's other members hear everything.
"""

from __future__ import annotations

import asyncio
import json
import socket
from urllib.parse import urlsplit

import pytest

from messaging.testing import SocketClient
from messaging_client import sign_in

from ..support.waiting import wait_for
from .conftest import scrape
from .test_backpressure import BODY_CHARS, UNLIMITED

pytestmark = [pytest.mark.e2e]

END = b"0\r\n\r\n"


def open_stream(url: str, session: str, cookie_name: str = "sessionid") -> socket.socket:
    """A stream with a 4 KB receive buffer, its request sent; nothing read."""
    parts = urlsplit(url)
    raw = socket.socket()
    raw.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    raw.connect((parts.hostname, parts.port))
    request = (
        f"GET /api/stream?rooms=live HTTP/1.1\r\nHost: {parts.netloc}\r\n"
        f"Cookie: {cookie_name}={session}\r\nSec-Fetch-Site: same-origin\r\n\r\n"
    )
    raw.sendall(request.encode())
    return raw


def read_to_end(raw: socket.socket) -> bytes:
    """What the stream sent until its end (the last chunk); raises if it goes on past 30 s of silence."""
    raw.settimeout(30)
    received = b""
    while data := raw.recv(65536):
        received += data
        if received.endswith(END):
            break
    return received


@pytest.mark.parametrize("kind", ["daphne", "uvicorn"])
async def test_a_stream_that_never_reads_is_ended_and_the_others_hear_everything(kind, daphne, uvicorn):
    server = (daphne if kind == "daphne" else uvicorn)(**UNLIMITED)
    poster = await SocketClient(server.url, sign_in(server.url, "poster")).connect()
    reader = await SocketClient(server.url, sign_in(server.url, "reader")).connect()
    for ws in (poster, reader):
        assert (await ws.call("room.join", {"room": "live"}))["ok"]
    raw = open_stream(server.url, sign_in(server.url, "hoarder"))
    await wait_for(
        lambda: scrape(server, "messaging_commands_total", type="room.join", outcome="ok") == 3,
        30,
        "the hoarder's stream joined",
    )
    heard: set[int] = set()

    async def read() -> None:
        async for text in reader.ws:
            frame = json.loads(text)
            if frame["t"] == "msg":
                heard.add(frame["d"]["seq"])

    reading = asyncio.ensure_future(read())
    posted = 0
    try:
        while not scrape(server, "messaging_send_buffer_overflows_total"):
            # The kernel's buffers (4 MB) and MAX_SEND_BUFFER (1 MiB) fill long before.
            assert posted < 3000, "the stream was never ended"
            ids = [await poster.send("room.post", {"room": "live", "body": "y" * BODY_CHARS}) for _ in range(50)]
            for id in ids:
                assert (await poster.ack(id))["ok"]
            posted += len(ids)
        # Read now: what was written before the drop, then the response's end, short of every post.
        received = await asyncio.to_thread(read_to_end, raw)
        assert received.endswith(END)
        assert 0 < received.count(b"event: msg\n") < posted
        await wait_for(lambda: len(heard) == posted, 30, "the reader heard every message")
    finally:
        reading.cancel()
        raw.close()
        for ws in (poster, reader):
            await ws.close()
    assert scrape(server, "messaging_send_buffer_overflows_total") == 1
