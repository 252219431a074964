"""The daphne adapter: text frames written straight to daphne's connection, and Twisted's pushback.

A text frame a consumer sends passes channels' consumer `send`, channels'
session middleware (which reads the session's `modified` and `is_empty()`
through a `LazyObject` on every message, to save the session on an HTTP
response), daphne's `handle_reply` and autobahn's `sendMessage` (assertions,
traffic statistics, the compression, size and fragmentation checks, the
header) before its bytes reach Twisted's transport. A post sends six frames
(its ack and the room's `msg` to each member), and that path was a fifth of
a busy server's CPU (docs/PERFORMANCE.md).

On a connection with no extension `FrameWriter` writes what autobahn's
`sendData` would (`frames.frame_bytes`). Whatever it cannot write the same
way is left to autobahn's own `sendMessage`, as daphne's send would do it: a
connection that is not open, an empty text (daphne drops it), autobahn's own
queue of chopped or synchronous data, compression, masking, fragmentation,
octet or frame logging.

Autobahn applies daphne's `--websocket-max-message-size`, a limit on what
clients send, to what the server sends too. The app's own limit on a frame
it sends is `MAX_SEND_BUFFER` (`largest_frame`, messaging/conf.py), under
every server, so that the answers sized to it (a `room.history` page) are
sent whatever daphne was started with: frames over autobahn's limit are
written all the same, and it still refuses larger messages from clients.

`DaphneSendBuffer` is a push producer of the connection (Twisted's
producer/consumer API). The transport pauses it once it holds more than its
`bufferSize` (64 KiB) unsent, and resumes it once the kernel has taken all of
it. Frames are written to the transport while it is not paused and queued
here while it is. What waits is counted as the queue plus the transport's
`bufferSize`, a lower bound of what the transport holds then: a socket is
closed only when more than `limit` truly waits, and the process holds at
most about `limit` plus two frames for it.
"""

from __future__ import annotations

import functools
import logging
import sys
from collections.abc import Awaitable, Callable
from typing import Any

from ...conf import get_settings
from ..frames import encoded
from .asgi import TRANSPORT_BUFFER, OnOverflow, Send, WritingSendBuffer, server_send
from .daphne_idle import release_handshake

log = logging.getLogger(__name__)


class FrameWriter:
    """Writes text frames to one daphne WebSocket connection, as long as autobahn would write them the same way.

    `direct` (`DAPHNE_DIRECT_WRITES`, on a plain TCP connection only): a frame
    is written to the socket at once while Twisted's transport holds nothing
    unsent, as asyncio's own transports (uvicorn's) do; what the kernel does
    not take, and every frame while anything waits, goes to the transport.
    Otherwise Twisted buffers each frame and writes it on the loop's next
    turn, registering the socket's writer with epoll and unregistering it:
    two system calls more per frame, which in a big room's fan-out (a frame
    to each of hundreds of sockets) took a quarter of the server's samples
    (docs/PERFORMANCE.md, "Loop stalls").
    """

    __slots__ = ("protocol", "direct")

    def __init__(self, protocol: Any, direct: bool = False) -> None:
        self.protocol = protocol
        self.direct = direct and plain_tcp(protocol.transport)

    def write(self, text: str) -> bool:
        """Write `text` as one frame; False (nothing written) where the ASGI path must send it."""
        protocol = self.protocol
        # Daphne sends no frame for an empty text.
        if (
            not text
            or protocol.state != protocol.STATE_OPEN
            or protocol.send_queue
            or protocol._perMessageCompress is not None
        ):
            return False
        data = encoded(text)[0]
        if self.direct:
            data = write_now(protocol.transport, data)
            if not data:
                return True
        protocol.transport.write(data)
        return True


# What `write_now` reads of Twisted's TCP transport (twisted.internet.abstract.FileDescriptor, tcp.Connection).
TCP_ATTRIBUTES = (
    "socket",
    "dataBuffer",
    "offset",
    "_tempDataBuffer",
    "connected",
    "disconnecting",
    "_writeDisconnected",
)


def plain_tcp(transport: Any) -> bool:
    """Whether `transport` is Twisted's TCP connection without TLS, as `write_now` knows it."""
    return getattr(transport, "TLS", True) is False and all(hasattr(transport, name) for name in TCP_ATTRIBUTES)


def write_now(transport: Any, data: bytes) -> bytes:
    """Write `data` to a plain TCP transport's socket at once if the transport holds nothing unsent;
    what is left to write through the transport (all of `data` if it holds some: the order stays)."""
    if (
        transport._tempDataBuffer
        or len(transport.dataBuffer) != transport.offset
        or not transport.connected
        or transport.disconnecting
        or transport._writeDisconnected
    ):
        return data
    try:
        sent = transport.socket.send(data)
    except OSError:
        # The kernel's buffer full (BlockingIOError), or the connection broken:
        # the transport's own write buffers it, or meets the error and closes.
        return data
    return data[sent:]


def daphne_connection(send: Callable[[dict[str, Any]], Awaitable[None]]) -> Any | None:
    """The daphne WebSocket connection (autobahn protocol) behind an ASGI `send`, or None under another server."""
    # Daphne has imported both if it is the server that serves this socket;
    # importing them under another would load Twisted into its process.
    server, ws_protocol = sys.modules.get("daphne.server"), sys.modules.get("daphne.ws_protocol")
    if server is None or ws_protocol is None:
        return None
    Server, WebSocketProtocol = server.Server, ws_protocol.WebSocketProtocol
    send = server_send(send)
    if not (isinstance(send, functools.partial) and len(send.args) == 1 and not send.keywords):
        return None
    if getattr(send.func, "__func__", None) is not Server.handle_reply:
        return None
    protocol = send.args[0]
    return protocol if isinstance(protocol, WebSocketProtocol) else None


def writes_plainly(protocol: Any) -> bool:
    """Whether autobahn writes this connection's text frames as `frame_bytes` does (no masking, fragmenting or logging)."""
    return not (
        protocol.maskServerFrames
        or protocol.autoFragmentSize
        or protocol.logOctets
        or protocol.logFrames
        or not protocol.factory.isServer
    )


def frame_writer(send: Callable[[dict[str, Any]], Awaitable[None]]) -> FrameWriter | None:
    """A `FrameWriter` for the connection behind an ASGI `send`, or None if it is not a plain daphne WebSocket."""
    protocol = daphne_connection(send)
    if protocol is None or not writes_plainly(protocol):
        return None
    return FrameWriter(protocol)


class DaphneSendBuffer(WritingSendBuffer):
    """One daphne connection's frames: written while its transport takes them, queued while it pushes back.

    Registered as the connection's push producer (`register_producer`); Twisted
    calls `pauseProducing`, `resumeProducing` and `stopProducing`.
    """

    adapter = "daphne"
    __slots__ = ("protocol", "slot", "writer", "reserve")

    def __init__(self, protocol: Any, slot: Any, send: Send, limit: int, on_overflow: OnOverflow) -> None:
        super().__init__(send, limit, on_overflow)
        self.protocol = protocol
        self.slot = slot
        direct = get_settings().DAPHNE_DIRECT_WRITES
        self.writer = FrameWriter(protocol, direct) if writes_plainly(protocol) else None
        # The transport pauses its producer only once it holds more than this.
        self.reserve = getattr(protocol.transport, "bufferSize", TRANSPORT_BUFFER)
        self.paused = False

    @property
    def framing(self) -> str:  # type: ignore[override]
        return "server" if self.writer is None else "frames"

    @property
    def waiting(self) -> int:
        return self.queued + (self.reserve if self.paused else 0)

    def write(self, text: str) -> None:
        writer = self.writer
        if writer is not None and writer.write(text):
            return
        protocol = self.protocol
        # Daphne sends no frame for an empty text, and autobahn none on a
        # closing connection (the client closed, or this socket did): such a
        # frame is lost with the socket, as one in flight would be.
        if text and protocol.state == protocol.STATE_OPEN:
            send_message(protocol, text.encode("utf-8"))

    # Twisted's IPushProducer.

    def pauseProducing(self) -> None:
        self.paused = True

    def resumeProducing(self) -> None:
        self.resumed()

    def stopProducing(self) -> None:
        self.stop()

    def stop(self) -> None:
        super().stop()
        slot, self.slot = self.slot, None
        if slot is not None:
            try:
                slot.unregisterProducer()
            except RuntimeError:  # a transport that says none is registered (autobahn's drop unregistered it)
                pass


def send_message(protocol: Any, payload: bytes) -> None:
    """What daphne's own send does, without the ASGI hop; a frame over autobahn's
    `maxMessagePayloadSize` (its limit on received messages) is sent too."""
    ceiling = protocol.maxMessagePayloadSize
    if not 0 < ceiling < len(payload):
        protocol.sendMessage(payload, False)
        return
    # sendMessage raises PayloadExceededError past it; the reactor's thread is
    # this one, so no frame is received while it is lifted.
    protocol.maxMessagePayloadSize = 0
    try:
        protocol.sendMessage(payload, False)
    finally:
        protocol.maxMessagePayloadSize = ceiling


def register_producer(producer: Any, transport: Any) -> Any | None:
    """Register `producer` as the push producer of a daphne connection's transport; where it was registered, or None.

    Twisted allows one producer per transport. Over plain TCP, daphne's HTTP
    channel registered itself on it, and stays registered once it has handed
    the connection to the WebSocket protocol: it forwards pause and resume to
    the producer of its request, which an upgraded connection never has. It
    is the one thing still holding the spent channel, with the upgrade's
    request and its headers (about 3.5 kB), for the connection's life: the
    producer takes its place on the transport, and the channel goes. Over TLS
    the channel found no push producer to register with, and the transport's
    own slot is free.
    """
    try:
        transport.registerProducer(producer, True)
        return transport
    except RuntimeError:
        pass
    try:
        from twisted.web.http import HTTPChannel
    except ImportError:
        return None
    channel = getattr(transport, "producer", None)
    # Only a channel whose connection the upgrade took, and that lends its slot to nothing.
    if (
        not isinstance(channel, HTTPChannel)
        or getattr(transport, "protocol", None) is channel
        or getattr(channel, "_requestProducer", None) is not None
    ):
        return None
    transport.unregisterProducer()
    transport.registerProducer(producer, True)
    return transport


_warned_unbuffered = False


def daphne_send_buffer(protocol: Any, send: Send, limit: int, on_overflow: OnOverflow) -> DaphneSendBuffer:
    """The send buffer of a daphne connection, registered as its transport's push producer."""
    global _warned_unbuffered
    buffer = DaphneSendBuffer(protocol, None, send, limit, on_overflow)
    buffer.slot = register_producer(buffer, protocol.transport)
    release_handshake(protocol)
    if buffer.slot is None and not buffer.stopped:
        # Daphne's send never waits: without the transport's pushback nothing
        # here can tell what waits, and nothing is closed for it.
        if not _warned_unbuffered:
            _warned_unbuffered = True
            log.warning(
                "daphne connection on %r takes no push producer: slow clients are not limited",
                type(protocol.transport).__name__,
            )
    return buffer
