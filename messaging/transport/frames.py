"""Text frames as a server writes them to a connection with no extension (RFC 6455 5.2).

A server's text frame is a header of 2, 4 or 10 bytes and the UTF-8 text,
unmasked. The server adapters (messaging/transport/servers/) write exactly that
to a connection their server would frame the same way, instead of passing each
frame through the ASGI `send` and the server's own framing. A frame that goes
to several sockets (a room's message) is encoded once for all of them.
"""

from __future__ import annotations

import struct

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
