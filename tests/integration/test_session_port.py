"""A session on a transport of its own: no Channels, only a `Port` (messaging/transport/ports.py).

What a new transport writes: a buffer (here the generic ASGI one, over a
`send` that keeps what it is given), a close, and the calls a `Session`
takes (`start`, `receive`, `end`). The real pipeline, PostgreSQL and Redis
answer; the rooms' live frames come through the loop's hub.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from messaging.transport.closes import CLOSE_POLICY, CLOSE_UNAUTHENTICATED
from messaging.transport.fanout import get_hub
from messaging.transport.servers.asgi import SendBuffer
from messaging.transport.session import Session

pytestmark = [pytest.mark.django_db(transaction=True)]


class ListPort:
    """A transport that keeps every frame sent and the close code; `reading` False: the client reads nothing."""

    def __init__(self, limit: int = 1 << 20, *, reading: bool = True) -> None:
        self.frames: list[dict[str, Any]] = []
        self.closed_with: list[int | None] = []
        self.reading = asyncio.Event()
        if reading:
            self.reading.set()
        self.session: Session | None = None
        self.buffer = SendBuffer(self.send, limit, lambda frames, waited: self.session.overflowed(frames, waited))

    async def send(self, message: dict[str, Any]) -> None:
        await self.reading.wait()
        self.frames.append(json.loads(message["text"]))

    async def end(self, code: int | None, reason: str | None = None) -> None:
        self.closed_with.append(code)

    async def next(self, t: str) -> dict[str, Any]:
        for _ in range(500):
            for frame in self.frames:
                if frame.get("t") == t:
                    self.frames.remove(frame)
                    return frame
            await asyncio.sleep(0.01)
        raise AssertionError(f"no {t} frame came: {self.frames}")

    async def closed(self) -> int | None:
        for _ in range(500):
            if self.closed_with:
                return self.closed_with[0]
            await asyncio.sleep(0.01)
        raise AssertionError("the session did not close")


async def open_session(user: Any, port: ListPort) -> Session:
    port.session = session = Session(port, user, get_hub())
    await session.start()
    return session


def frame(id: str, t: str, d: dict[str, Any]) -> str:
    return json.dumps({"id": id, "t": t, "d": d})


async def test_a_session_without_channels_joins_posts_and_hears_another(make_user):
    ana_port, bob_port = ListPort(), ListPort()
    ana = await open_session(await make_user("ana"), ana_port)
    bob = await open_session(await make_user("bob"), bob_port)
    try:
        await ana.receive(frame("j1", "room.join", {"room": "port"}))
        await bob.receive(frame("j2", "room.join", {"room": "port"}))
        assert (await ana_port.next("ack"))["ok"] and (await bob_port.next("ack"))["ok"]
        await ana.receive(frame("p1", "room.post", {"room": "port", "body": "over a port"}))
        ack = await ana_port.next("ack")
        assert ack["id"] == "p1" and ack["ok"] and ack["d"]["seq"] == 1
        heard = await bob_port.next("msg")
        assert heard["d"]["body"] == "over a port" and heard["d"]["seq"] == 1
        # The same id again: the original ack, nothing applied twice.
        await ana.receive(frame("p1", "room.post", {"room": "port", "body": "over a port"}))
        again = await ana_port.next("ack")
        assert again["dup"] is True and again["d"]["seq"] == 1
        # A frame that is no command: an error frame, and the session goes on.
        await ana.receive("{")
        assert (await ana_port.next("error"))["error"]["code"] == "bad_frame"
    finally:
        await ana.end()
        await bob.end()
    assert ana_port.closed_with == bob_port.closed_with == []


async def test_a_session_of_nobody_is_closed_with_4401_through_its_port():
    from django.contrib.auth.models import AnonymousUser

    port = ListPort()
    session = await open_session(AnonymousUser(), port)
    assert await port.closed() == CLOSE_UNAUTHENTICATED
    await session.receive(frame("p1", "room.post", {"room": "port", "body": "refused"}))
    await session.end()
    assert port.frames == []


async def test_a_client_that_does_not_read_is_closed_with_1008_when_its_buffer_overflows(make_user):
    port = ListPort(limit=4000, reading=False)
    session = await open_session(await make_user("slow"), port)
    try:
        for n in range(40):
            await session.receive(frame(f"p{n}", "room.post", {"room": "slow", "body": "x" * 200}))
        assert await port.closed() == CLOSE_POLICY
        assert port.buffer.overflowed and session.closed
    finally:
        await session.end()
