"""Text frames written straight to daphne's connection.

A text frame a consumer sends passes channels' consumer `send`, channels'
session middleware (which reads the session's `modified` and `is_empty()`
through a `LazyObject` on every message, to save the session on an HTTP
response), daphne's `handle_reply` and autobahn's `sendMessage` (assertions,
traffic statistics, the compression, size and fragmentation checks, the
header) before its bytes reach Twisted's transport. A post sends six frames
(its ack and the room's `msg` to each member), and that path was a fifth of
a busy server's CPU (docs/PERFORMANCE.md).

Under daphne, on a connection with no extension, a server's text frame is a
header of 2, 4 or 10 bytes and the UTF-8 text, unmasked (RFC 6455 5.2).
`FrameWriter` writes exactly that to the transport, as autobahn's `sendData`
does, and a frame that goes to several sockets (a room's message) is encoded
once. Whatever it cannot write the same way is left to autobahn's own
`sendMessage`, as daphne's send would do it (messaging/transport/sendbuffer.py): a
connection that is not open, an empty text (daphne drops it), autobahn's own
queue of chopped or synchronous data, compression, masking, fragmentation,
a size limit, octet or frame logging. Another server gets no writer.
"""
from __future__ import annotations

import functools
import struct
from typing import Any, Awaitable, Callable

FIN_TEXT = 0x81


def frame_bytes(payload: bytes) -> bytes:
    """A final, unmasked text frame of `payload` (RFC 6455 5.2)."""
    length = len(payload)
    if length < 126:
        return bytes((FIN_TEXT, length)) + payload
    if length < 1 << 16:
        return struct.pack("!BBH", FIN_TEXT, 126, length) + payload
    return struct.pack("!BBQ", FIN_TEXT, 127, length) + payload


# The last frame built, with its text and payload length: a room's frame goes
# to every member of the room in turn, the same str object each time. Read
# and replaced whole, so event loops in other threads (tests) see one triple
# or the other.
_last: tuple[str | None, bytes, int] = (None, b"", 0)


def encoded(text: str) -> tuple[bytes, int]:
    """The frame of `text`, and the length of its payload."""
    global _last
    last = _last
    if text is not last[0]:
        payload = text.encode("utf-8")
        last = _last = (text, frame_bytes(payload), len(payload))
    return last[1], last[2]


class FrameWriter:
    """Writes text frames to one daphne WebSocket connection, as long as autobahn would write them the same way."""

    __slots__ = ("protocol",)

    def __init__(self, protocol: Any) -> None:
        self.protocol = protocol

    def write(self, text: str) -> bool:
        """Write `text` as one frame; False (nothing written) where the ASGI path must send it."""
        protocol = self.protocol
        # Daphne sends no frame for an empty text.
        if not text or protocol.state != protocol.STATE_OPEN or protocol.send_queue or protocol._perMessageCompress is not None:
            return False
        frame, length = encoded(text)
        if 0 < protocol.maxMessagePayloadSize < length:
            # Autobahn refuses to send it; let it, as it would.
            return False
        protocol.transport.write(frame)
        return True


def daphne_connection(send: Callable[[dict], Awaitable[None]]) -> Any | None:
    """The daphne WebSocket connection (autobahn protocol) behind an ASGI `send`, or None under another server."""
    try:
        from channels.sessions import InstanceSessionWrapper
        from daphne.server import Server
        from daphne.ws_protocol import WebSocketProtocol
    except ImportError:
        return None
    # Channels' session middleware wraps `send` only to save a session on an
    # HTTP response; a WebSocket frame passes through it unchanged.
    while isinstance(getattr(send, "__self__", None), InstanceSessionWrapper):
        send = send.__self__.real_send  # type: ignore[attr-defined]
    if not (isinstance(send, functools.partial) and len(send.args) == 1 and not send.keywords):
        return None
    if getattr(send.func, "__func__", None) is not Server.handle_reply:
        return None
    protocol = send.args[0]
    return protocol if isinstance(protocol, WebSocketProtocol) else None


def writes_plainly(protocol: Any) -> bool:
    """Whether autobahn writes this connection's text frames as `frame_bytes` does (no masking, fragmenting or logging)."""
    return not (protocol.maskServerFrames or protocol.autoFragmentSize or protocol.logOctets or protocol.logFrames
                or not protocol.factory.isServer)


def frame_writer(send: Callable[[dict], Awaitable[None]]) -> FrameWriter | None:
    """A `FrameWriter` for the connection behind an ASGI `send`, or None if it is not a plain daphne WebSocket."""
    protocol = daphne_connection(send)
    if protocol is None or not writes_plainly(protocol):
        return None
    return FrameWriter(protocol)
