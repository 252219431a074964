"""The send buffer of any ASGI server, and what every server adapter shares.

`SendBuffer` is a socket's frames under a server this package has no adapter
for (channels' test communicator, hypercorn, uvicorn with an implementation
other than websockets' Sans-I/O one), or for a connection its adapter cannot
write to: frames queue here, and a task of the socket's own sends them in
order through the ASGI `send`, whose await does not return while the server
pushes back (uvicorn waits for its transport to drain). What waits is the
queue, the frame being sent included. The adapters (`daphne.py`,
`uvicorn.py`) are subclasses that write to the connection themselves and
need no task; the limit, overflow and close semantics are this class's
(messaging/transport/servers/__init__.py).
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Any

from ...ops import metrics

log = logging.getLogger(__name__)

Send = Callable[[dict[str, Any]], Awaitable[None]]
Closer = Callable[[], Awaitable[None]]
# Told, once, how many frames and bytes were dropped when the buffer overflowed.
OnOverflow = Callable[[int, int], None]

# Twisted's FileDescriptor.bufferSize, for a transport that does not say; and
# what may queue under another server before the socket's own replies wait.
TRANSPORT_BUFFER = 64 * 1024


def payload_length(text: str) -> int:
    """The UTF-8 length of `text`; for ASCII text (almost every frame) without encoding it."""
    return len(text) if text.isascii() else len(text.encode("utf-8", "surrogatepass"))


def refit(connection: Any) -> None:
    """Give `connection` a copy of its `__dict__` that fits the keys it holds now.

    A dict's table never shrinks as keys go, and a server's connection grows
    its own past 42 keys during the handshake (daphne's and uvicorn's both),
    then keeps that table for its life: 1.6 kB a socket where a copy takes
    0.8. Once per connection, after its handshake's attributes are gone.
    """
    connection.__dict__ = dict(connection.__dict__)


NOTHING: tuple[()] = ()


def server_send(send: Send) -> Send:
    """The server's own ASGI `send` behind channels' session middleware, which wraps it only to save a session on an
    HTTP response (a WebSocket frame passes through it unchanged)."""
    try:
        from channels.sessions import InstanceSessionWrapper
    except ImportError:
        return send
    while isinstance(getattr(send, "__self__", None), InstanceSessionWrapper):
        send = send.__self__.real_send  # type: ignore[attr-defined]
    return send


class SendBuffer:
    """One socket's frames, sent in order by a task of their own through the ASGI `send`."""

    # Which server's connection this buffer writes to, and who frames what it
    # writes: `frames` (frames.frame_bytes), `server` (the server's own
    # framing, called directly) or `asgi` (the ASGI send). Counted in
    # `messaging_send_buffers_total`.
    adapter = "asgi"
    framing = "asgi"
    # One buffer a socket for its life: slots, not a dict (about 0.2 kB a socket).
    __slots__ = (
        "_send",
        "limit",
        "largest",
        "on_overflow",
        "queue",
        "queued",
        "task",
        "closing",
        "overflowed",
        "stopped",
        "waiter",
    )

    def __init__(self, send: Send, limit: int, on_overflow: OnOverflow) -> None:
        self._send = send
        self.limit = limit
        self.largest = limit
        self.on_overflow = on_overflow
        # What waits, in order: texts, or the close (a `Closer`), with their payload lengths.
        # `NOTHING` while nothing waits: an empty deque costs 0.6 kB, and most
        # sockets are idle (10,000 of them: 6 MB).
        self.queue: deque[tuple[str | Closer, int]] | tuple[()] = NOTHING
        self.queued = 0
        self.task: asyncio.Task[Any] | None = None
        # Closing: no frame is taken after the close. Overflowed: frames are
        # dropped (and counted) until the socket is gone. Stopped: the
        # connection is gone, and frames are lost with it as one in flight
        # would be (the client's reconnect gets them back).
        self.closing = False
        self.overflowed = False
        self.stopped = False
        # The socket's replies waiting for room (`room`).
        self.waiter: asyncio.Future[None] | None = None

    @property
    def waiting(self) -> int:
        """Bytes sent to this socket and not yet taken by its connection, as far as this buffer can tell."""
        return self.queued

    @property
    def pushed_back(self) -> bool:
        """Whether the connection has not taken what was sent already (more than a transport's buffer waits)."""
        return self.queued > TRANSPORT_BUFFER

    async def room(self, size: int = 0) -> None:
        """Return once the connection has taken what waits, or the socket is overflowed, closing or gone.

        A socket's own replies (a join's backlog, which may be larger than
        the limit) wait here between frames, so they go as fast as the
        client reads them and never overflow the buffer themselves. A frame
        of `size` bytes also waits until it fits beside what still waits.
        """
        while self.crowded(size) and not (self.overflowed or self.closing or self.stopped):
            waiter = self.waiter = asyncio.get_running_loop().create_future()
            await waiter

    def crowded(self, size: int) -> bool:
        """Whether a frame of `size` bytes must wait: the connection pushes back, or it would pass the limit."""
        return self.pushed_back or (self.queued > 0 and self.queued + size > self.limit)

    def wake(self) -> None:
        waiter, self.waiter = self.waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def fits(self, text: str) -> bool:
        """Whether `text` can be sent at all: its payload is at most `largest` bytes."""
        # At most four bytes per character: most texts need no counting.
        return len(text) <= self.largest // 4 or payload_length(text) <= self.largest

    def send(self, text: str) -> bool:
        """Send `text` as one frame, now or once the connection takes it; never waits.

        False if it is too large ever to be sent (nothing is sent).
        """
        if not self.fits(text):
            return False
        if self.overflowed:
            metrics.SEND_BUFFER_DROPPED.inc()
        elif not (self.closing or self.stopped):
            self.put(text)
        return True

    def put(self, text: str) -> None:
        self.enqueue(text, payload_length(text))
        if self.waiting > self.limit:
            self.overflow()
        else:
            self.start()

    def enqueue(self, text: str, size: int) -> None:
        self.append((text, size))
        self.queued += size

    def append(self, item: tuple[str | Closer, int]) -> None:
        if self.queue is NOTHING:
            self.queue = deque()
        self.queue.append(item)  # type: ignore[union-attr]

    def emptied(self) -> None:
        """Let the queue's memory go once nothing waits."""
        if not self.queue:
            self.queue = NOTHING

    def start(self) -> None:
        if self.task is None or self.task.done():
            self.task = asyncio.get_running_loop().create_task(self.drain())

    async def drain(self) -> None:
        while self.queue:
            item, size = self.queue[0]
            try:
                if isinstance(item, str):
                    await self._send({"type": "websocket.send", "text": item})
                else:
                    await item()
            except OSError:
                # ASGI has a send on a closed connection raise a subclass of
                # OSError (uvicorn's ClientDisconnected).
                self.stop()
                return
            except Exception:
                log.warning("sending to a socket failed; dropping what waits for it", exc_info=True)
                self.stop()
                return
            # An overflow or a stop meanwhile emptied the queue.
            if self.queue and self.queue[0][0] is item:
                self.queue.popleft()
                self.queued -= size
                self.emptied()
                if not self.pushed_back:
                    self.wake()

    async def close(self, closer: Closer) -> None:
        """Close the socket (`closer` sends the close) after the frames queued before it; the first call only."""
        if self.closing or self.stopped:
            return
        self.closing = True
        self.wake()
        await self.close_behind(closer)

    async def close_behind(self, closer: Closer) -> None:
        self.append((closer, 0))
        self.start()

    def overflow(self, held_frames: int = 0, held_bytes: int = 0) -> None:
        """Drop what waits and every frame until the socket is gone; the owner closes it.

        `held_frames` and `held_bytes`: what the owner held back for the
        socket and has dropped too.
        """
        frames = held_frames + sum(1 for item, _ in self.queue if isinstance(item, str))
        waited = held_bytes + self.waiting
        self.queue = NOTHING
        self.queued = 0
        self.cancel()
        self.overflowed = True
        self.wake()
        metrics.SEND_BUFFER_DROPPED.inc(frames)
        self.on_overflow(frames, waited)

    def cancel(self) -> None:
        # The task may wait in a send the client will never take.
        task, self.task = self.task, None
        if task is not None and task is not asyncio.current_task():
            task.cancel()

    def stop(self) -> None:
        """The connection is gone: forget what waits."""
        self.stopped = True
        self.queue = NOTHING
        self.queued = 0
        self.cancel()
        self.wake()


class WritingSendBuffer(SendBuffer):
    """A server adapter's buffer: frames written to the connection at once, queued only while its transport pushes back.

    A subclass writes one frame (`write`), says what waits (`waiting`), and
    sets `paused` and calls `resumed` from its server's flow control.
    """

    __slots__ = ("paused",)

    def __init__(self, send: Send, limit: int, on_overflow: OnOverflow) -> None:
        super().__init__(send, limit, on_overflow)
        self.paused = False

    @property
    def pushed_back(self) -> bool:
        return self.paused or bool(self.queue)

    def crowded(self, size: int) -> bool:
        # Not pushed back, a frame is written to the connection at once, whatever its size.
        return self.pushed_back

    def put(self, text: str) -> None:
        if not (self.paused or self.queue):
            self.write(text)
            return
        self.enqueue(text, payload_length(text))
        if self.waiting > self.limit:
            self.overflow()

    def write(self, text: str) -> None:
        raise NotImplementedError

    def flush(self, *, pushed_back: bool = False) -> None:
        """Write what is queued, as long as the transport does not push back (`pushed_back`: even if it does)."""
        while self.queue and (pushed_back or not self.paused):
            text, size = self.queue.popleft()
            self.queued -= size
            self.write(text)  # type: ignore[arg-type]
        self.emptied()

    def resumed(self) -> None:
        """The transport takes frames again: what waits goes, and the socket's own replies go on."""
        self.paused = False
        self.flush()
        if not self.pushed_back:
            self.wake()

    async def close_behind(self, closer: Closer) -> None:
        # What waits goes to the transport ahead of the close frame, pushed
        # back or not: it is within the limit, and the client reads it first.
        self.flush(pushed_back=True)
        await closer()

    def stop(self) -> None:
        super().stop()
        self.paused = False
