"""The send buffer of a server-sent event stream (messaging/transport/stream.py): one HTTP response's body, bounded.

A stream's events are the frames of a session (messaging/transport/session.py),
and its client may stop reading as a socket's may. The bound is the sockets'
(`MAX_SEND_BUFFER`, messaging/transport/servers/__init__.py), met per server:

* under daphne an ASGI `http.response.body` is written to Twisted's request at
  once and its `send` never waits, however much the transport holds:
  `DaphneStreamBuffer` writes to the request itself and registers as its push
  producer, so the transport's pushback pauses it (as `DaphneSendBuffer` does
  for a socket) and what waits beyond is counted here;
* under uvicorn (and any server whose `send` awaits its transport's drain, as
  the ASGI spec asks) the generic `SendBuffer` sends each event as a body part
  by a task, whose await does not return while the transport pushes back:
  what waits is its queue, and uvicorn's transport holds at most its
  high-water mark (64 KiB) beside it.
"""

from __future__ import annotations

import functools
import sys
from typing import Any

from .asgi import TRANSPORT_BUFFER, OnOverflow, Send, SendBuffer, WritingSendBuffer, server_send


def body_send(send: Send) -> Send:
    """An ASGI `send` that takes the generic buffer's `websocket.send` messages and sends their text as body parts."""

    async def send_body(message: dict[str, Any]) -> None:
        await send({"type": "http.response.body", "body": message["text"].encode(), "more_body": True})

    return send_body


def daphne_request(send: Send) -> Any | None:
    """The daphne HTTP request (a Twisted `Request`) behind an ASGI `send`, or None under another server."""
    server, http_protocol = sys.modules.get("daphne.server"), sys.modules.get("daphne.http_protocol")
    if server is None or http_protocol is None:
        return None
    send = server_send(send)
    if not (isinstance(send, functools.partial) and len(send.args) == 1 and not send.keywords):
        return None
    if getattr(send.func, "__func__", None) is not server.Server.handle_reply:
        return None
    request = send.args[0]
    return request if isinstance(request, http_protocol.WebRequest) else None


class DaphneStreamBuffer(WritingSendBuffer):
    """One daphne response's events: written while its transport takes them, queued while it pushes back."""

    adapter = "daphne"
    framing = "http"

    def __init__(self, request: Any, send: Send, limit: int, on_overflow: OnOverflow) -> None:
        super().__init__(send, limit, on_overflow)
        self.request: Any | None = request
        transport = getattr(request.channel, "transport", None)
        self.reserve = getattr(transport, "bufferSize", TRANSPORT_BUFFER)
        # The channel hands its transport's pause and resume to the request's producer.
        request.registerProducer(self, True)

    @property
    def waiting(self) -> int:
        return self.queued + (self.reserve if self.paused else 0)

    def write(self, text: str) -> None:
        request = self.request
        if request is not None and not request.finished and request.channel is not None:
            request.write(text.encode())

    def pauseProducing(self) -> None:
        self.paused = True

    def resumeProducing(self) -> None:
        self.resumed()

    def stopProducing(self) -> None:
        self.stop()

    def release(self) -> None:
        request, self.request = self.request, None
        if request is not None and request.producer is self:
            try:
                request.unregisterProducer()
            except (AttributeError, RuntimeError):  # the channel is gone already
                request.producer = None

    async def close_behind(self, closer: Any) -> None:
        self.flush(pushed_back=True)
        request = self.request
        self.release()
        self.request = request
        await closer()
        self.request = None

    def stop(self) -> None:
        super().stop()
        self.release()


def stream_buffer(send: Send, limit: int, on_overflow: OnOverflow, *, adapters: bool = True) -> SendBuffer:
    """The send buffer of the HTTP response behind `send`, once `http.response.start` is sent."""
    request = daphne_request(send) if adapters else None
    if request is not None:
        return DaphneStreamBuffer(request, send, limit, on_overflow)
    return SendBuffer(body_send(send), limit, on_overflow)
