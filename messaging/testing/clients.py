"""Clients that speak the protocol's frames, for tests: one set of methods on two transports.

`Communicator` drives the real consumer in the test's own process (channels'
`WebsocketCommunicator`, no server); `SocketClient` talks to a running server
over a real WebSocket. Both keep the frames they read past while waiting for
something else in `inbox`, so nothing a test might look for is lost.

Neither is a resilient client: no outbox, no reconnects (that is
`messaging_client.Client`). A test that must send malformed bytes or never
read needs a raw socket instead (the suite's tests/support/rawws.py).
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

from ..ids import time_ordered_id


class FrameClient:
    """The protocol's frames over a transport a subclass gives (`_send_text`, `_receive_text`)."""

    def __init__(self) -> None:
        self.inbox: list[dict[str, Any]] = []

    async def _send_text(self, text: str) -> None:
        raise NotImplementedError

    async def _receive_text(self, timeout: float) -> str:
        raise NotImplementedError

    async def send(self, t: str, d: dict[str, Any], id: str | None = None) -> str:
        """Send one command without waiting; returns its id (a new one unless given)."""
        id = id or time_ordered_id()
        await self._send_text(json.dumps({"id": id, "t": t, "d": d}))
        return id

    async def send_raw(self, text: str) -> None:
        """One text frame exactly as given (a bad frame, for a test of the refusal)."""
        await self._send_text(text)

    async def receive(self, timeout: float = 10) -> dict[str, Any]:
        """The next frame, whatever it is (the inbox is not looked at)."""
        frame: dict[str, Any] = json.loads(await self._receive_text(timeout))
        return frame

    async def receive_sized(self, timeout: float = 10) -> tuple[dict[str, Any], int]:
        """The next frame, as `receive`, and the bytes of its payload as the server sent it."""
        text = await self._receive_text(timeout)
        return json.loads(text), len(text.encode("utf-8", "surrogatepass"))

    async def ack(self, id: str, timeout: float = 15) -> dict[str, Any]:
        """Wait for the ack of `id`; the frames read meanwhile go to `inbox`."""
        deadline = time.monotonic() + timeout
        while True:
            frame = await self.receive(max(0.1, deadline - time.monotonic()))
            if frame.get("t") == "ack" and frame.get("id") == id:
                return frame
            self.inbox.append(frame)

    async def call(self, t: str, d: dict[str, Any], id: str | None = None) -> dict[str, Any]:
        """Send one command and return its ack."""
        return await self.ack(await self.send(t, d, id))

    async def join(self, room: str, **extra: Any) -> dict[str, Any]:
        """`room.join`, which must succeed; returns its ack."""
        ack = await self.call("room.join", {"room": room, **extra})
        assert ack["ok"], ack
        return ack

    async def frames(self, kind: str, count: int, timeout: float = 10) -> list[dict[str, Any]]:
        """The next `count` frames of type `kind` (from the inbox first); others stay in the inbox."""
        found = [f for f in self.inbox if f["t"] == kind]
        self.inbox = [f for f in self.inbox if f["t"] != kind]
        deadline = time.monotonic() + timeout
        while len(found) < count:
            frame = await self.receive(max(0.1, deadline - time.monotonic()))
            (found if frame["t"] == kind else self.inbox).append(frame)
        self.inbox.extend(found[count:])
        return found[:count]

    async def messages_until(self, room: str, seq: int, timeout: float = 15) -> dict[int, dict[str, Any]]:
        """A room's `msg` frames until `seq` has arrived (the inbox's too), keyed by seq: repeats drop out."""
        seen = {f["d"]["seq"]: f for f in self.inbox if f["t"] == "msg" and f["d"]["room"] == room}
        deadline = time.monotonic() + timeout
        while seq not in seen:
            frame = await self.receive(max(0.1, deadline - time.monotonic()))
            if frame["t"] == "msg" and frame["d"]["room"] == room:
                seen[frame["d"]["seq"]] = frame
            else:
                self.inbox.append(frame)
        return seen


class Communicator(FrameClient):
    """One socket of `user` on the real consumer, in this process (no server, no network).

    `consumer` is `messaging`'s own unless given (a subclass, for a test that
    watches it); `comm` is the `WebsocketCommunicator` underneath.
    """

    def __init__(self, user: Any, consumer: Any = None, path: str = "/ws/") -> None:
        from channels.testing import WebsocketCommunicator

        if consumer is None:
            from messaging.transport.consumers import ChatConsumer as consumer
        super().__init__()
        self.user = user
        self.comm = WebsocketCommunicator(consumer.as_asgi(), path)
        self.comm.scope["user"] = user

    async def connect(self, timeout: float = 10) -> Communicator:
        connected, _ = await self.comm.connect(timeout=timeout)
        assert connected, "the consumer refused the socket"
        return self

    async def close(self) -> None:
        await self.comm.disconnect()

    async def _send_text(self, text: str) -> None:
        # send_input, not send_to: the latter refuses an empty frame.
        await self.comm.send_input({"type": "websocket.receive", "text": text})

    async def _receive_text(self, timeout: float) -> str:
        text: str = await self.comm.receive_from(timeout=timeout)
        return text

    async def nothing_more(self, wait: float = 0.3) -> bool:
        """Nothing arrived within `wait` and nothing is left unread in the inbox."""
        return await self.comm.receive_nothing(timeout=wait) and not self.inbox


class SocketClient(FrameClient):
    """One WebSocket to a running server at `base_url`, signed in by the `session` cookie's value
    (`messaging_client.sign_in` gets one from a guest form) or an API `token`.
    `ws` is the `websockets` connection underneath, once connected. `headers`
    go with the handshake too (`X-Forwarded-For`, as a proxy in front would add it)."""

    def __init__(
        self,
        base_url: str,
        session: str | None = None,
        *,
        token: str | None = None,
        origin: str | None = None,
        path: str = "/ws/",
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__()
        self.base_url = base_url
        self.session = session
        self.token = token
        self.origin = origin
        self.path = path
        self.headers = dict(headers or {})
        self.ws: Any = None

    async def connect(self) -> SocketClient:
        import websockets

        from messaging_client.auth import handshake_headers

        self.ws = await websockets.connect(
            self.base_url.replace("http", "ws", 1) + self.path,
            additional_headers={
                **handshake_headers(self.base_url, session=self.session, token=self.token, origin=self.origin),
                **self.headers,
            },
            # Tests look at frames of any size, the server's limits are what they test.
            max_size=None,
        )
        return self

    async def close(self) -> None:
        if self.ws is not None:
            await self.ws.close()

    async def _send_text(self, text: str) -> None:
        await self.ws.send(text)

    async def _receive_text(self, timeout: float) -> str:
        return await asyncio.wait_for(self.ws.recv(), timeout)
