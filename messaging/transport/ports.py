"""What a session (messaging/transport/session.py) needs of its transport: the port a transport adapter fills.

A transport gives a session two things. Its `buffer` takes text frames in
order and never waits: `send` says whether a frame was taken (False: too
large ever to be sent), and past `limit` bytes waiting for the client it
drops what waits and tells the session (`Session.overflowed`, the callback
the transport hands the buffer when it makes it). Every server's send buffer
(messaging/transport/servers/) is one. And `end(code)` closes the connection
now, with `code` (a WebSocket close code, messaging/transport/closes.py);
the session calls it through the buffer, behind the frames sent before it.

`ChatConsumer` (messaging/transport/consumers.py) is the port of a WebSocket
under Channels.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Protocol

Closer = Callable[[], Awaitable[None]]


class Buffer(Protocol):
    """One client's frames on their way to it, bounded (messaging/transport/servers/)."""

    # Bytes that may wait for the client; and the largest frame it sends.
    limit: int
    largest: int
    # Past the limit once: what waits is dropped, and every frame from now on.
    overflowed: bool

    @property
    def waiting(self) -> int:
        """Bytes sent and not yet taken by the connection."""
        ...

    def send(self, text: str) -> bool:
        """Send `text` as one frame, now or once the connection takes it; False if it is too large ever to be sent."""
        ...

    def fits(self, text: str) -> bool:
        """Whether `text` is at most `largest` bytes."""
        ...

    async def room(self, size: int = 0) -> None:
        """Return once the connection has taken what waits (and a frame of `size` fits), or it is overflowed or gone."""
        ...

    def overflow(self, held_frames: int = 0, held_bytes: int = 0) -> None:
        """Drop what waits and every later frame, counting what the owner held back too; the owner is told."""
        ...

    def stop(self) -> None:
        """The connection is gone: forget what waits."""
        ...

    async def close(self, closer: Closer) -> None:
        """Run `closer` after the frames sent before it (the first call only)."""
        ...


class Port(Protocol):
    """A session's transport: where its frames go, and how its connection ends."""

    @property
    def buffer(self) -> Buffer: ...

    async def end(self, code: int | None, reason: str | None = None) -> None:
        """Close the connection now with `code` (None: the transport's normal close) and `reason`."""
        ...
