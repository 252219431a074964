"""What waits to be sent to one socket, and its limit (PROTOCOL.md 1.1, "Safety limits").

A client that does not read makes the server hold what it is sent: in
Twisted's transport under daphne, in the ASGI server's buffers elsewhere. One
socket asking for backlogs it never read grew a server by 200 MB in seconds
(docs/RELIABILITY.md). Every frame of a socket passes through its send buffer
here: frames go out as fast as the connection takes them and queue while it
pushes back; once more than `limit` bytes wait, the queue is dropped and the
owner is told (`on_overflow`), which closes the socket with 1008.

* `DaphneSendBuffer`, under daphne: a push producer of the connection
  (Twisted's producer/consumer API). The transport pauses it once it holds
  more than its `bufferSize` (64 KiB) unsent, and resumes it once the kernel
  has taken all of it. Frames are written to the transport while it is not
  paused (`FrameWriter`, or autobahn's `sendMessage` for a connection that
  frames otherwise, as daphne's own send would) and queued here while it is.
  What waits is counted as the queue plus the transport's `bufferSize`, a
  lower bound of what the transport holds then: a socket is closed only when
  more than `limit` truly waits, and the process holds at most about `limit`
  plus two frames for it.
* `SendBuffer`, under any other ASGI server (uvicorn, channels' test
  communicator): frames queue here, and a task of the socket's own sends them
  in order through the ASGI `send`, whose await does not return while the
  server pushes back (uvicorn waits for its transport to drain). What waits
  is the queue, the frame being sent included.

Sending never waits, so a slow socket holds back no other: a room's fan-out
hands its frame to each member in turn (messaging/transport/fanout.py). Frames keep
their order, and a close goes after the frames queued before it, except
after an overflow, when they are dropped. What a socket's own command sends
(a join's backlog, which may be larger than the limit) is paced instead:
between its replies the consumer awaits `room`, so it goes as fast as the
client reads and only others' frames can overflow the buffer.

A frame larger than `largest` (the limit, or the server's own frame limit if
lower) can never be sent within the limit: `send` refuses it, and the owner
sends a small error frame in its place.
"""
from __future__ import annotations

import asyncio
import logging
from collections import deque
from typing import Any, Awaitable, Callable

from ..ops import metrics
from .frames import FrameWriter, daphne_connection, writes_plainly

log = logging.getLogger(__name__)

Send = Callable[[dict], Awaitable[None]]
Closer = Callable[[], Awaitable[None]]
# Told, once, how many frames and bytes were dropped when the buffer overflowed.
OnOverflow = Callable[[int, int], None]

# Twisted's FileDescriptor.bufferSize, for a transport that does not say; and
# what may queue under another server before the socket's own replies wait.
TRANSPORT_BUFFER = 64 * 1024


def payload_length(text: str) -> int:
    """The UTF-8 length of `text`; for ASCII text (almost every frame) without encoding it."""
    return len(text) if text.isascii() else len(text.encode("utf-8", "surrogatepass"))


NOTHING: tuple = ()


class SendBuffer:
    """One socket's frames, sent in order by a task of their own through the ASGI `send`."""

    def __init__(self, send: Send, limit: int, on_overflow: OnOverflow) -> None:
        self._send = send
        self.limit = limit
        self.largest = limit
        self.on_overflow = on_overflow
        # What waits, in order: texts, or the close (a `Closer`), with their payload lengths.
        # `NOTHING` while nothing waits: an empty deque costs 0.6 kB, and most
        # sockets are idle (10,000 of them: 6 MB).
        self.queue: deque[tuple[str | Closer, int]] | tuple = NOTHING
        self.queued = 0
        self.task: asyncio.Task | None = None
        # Closing: no frame is taken after the close. Overflowed: frames are
        # dropped (and counted) until the socket is gone. Stopped: the
        # connection is gone, and frames are lost with it as one in flight
        # would be (the client's reconnect gets them back).
        self.closing = False
        self.overflowed = False
        self.stopped = False
        # The socket's replies waiting for room (`room`).
        self.waiter: asyncio.Future | None = None

    @property
    def waiting(self) -> int:
        """Bytes sent to this socket and not yet taken by its connection, as far as this buffer can tell."""
        return self.queued

    @property
    def pushed_back(self) -> bool:
        """Whether the connection has not taken what was sent already (more than a transport's buffer waits)."""
        return self.queued > TRANSPORT_BUFFER

    async def room(self) -> None:
        """Return once the connection has taken what waits, or the socket is overflowed, closing or gone.

        A socket's own replies (a join's backlog, which may be larger than
        the limit) wait here between frames, so they go as fast as the
        client reads them and never overflow the buffer themselves.
        """
        while self.pushed_back and not (self.overflowed or self.closing or self.stopped):
            waiter = self.waiter = asyncio.get_running_loop().create_future()
            await waiter

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
                self.queue.popleft()  # type: ignore[union-attr]
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


class DaphneSendBuffer(SendBuffer):
    """One daphne connection's frames: written while its transport takes them, queued while it pushes back.

    Registered as the connection's push producer (`register_producer`); Twisted
    calls `pauseProducing`, `resumeProducing` and `stopProducing`.
    """

    def __init__(self, protocol: Any, slot: Any, send: Send, limit: int, on_overflow: OnOverflow) -> None:
        super().__init__(send, limit, on_overflow)
        self.protocol = protocol
        self.slot = slot
        self.writer = FrameWriter(protocol) if writes_plainly(protocol) else None
        # The transport pauses its producer only once it holds more than this.
        self.reserve = getattr(protocol.transport, "bufferSize", TRANSPORT_BUFFER)
        server_limit = protocol.maxMessagePayloadSize
        if 0 < server_limit < limit:
            # Autobahn refuses to send a larger frame (PayloadExceededError).
            self.largest = server_limit
        self.paused = False

    @property
    def waiting(self) -> int:
        return self.queued + (self.reserve if self.paused else 0)

    @property
    def pushed_back(self) -> bool:
        return self.paused or bool(self.queue)

    def put(self, text: str) -> None:
        if not (self.paused or self.queue):
            self.write(text)
            return
        self.enqueue(text, payload_length(text))
        if self.waiting > self.limit:
            self.overflow()

    def write(self, text: str) -> None:
        writer = self.writer
        if writer is not None and writer.write(text):
            return
        protocol = self.protocol
        # Daphne sends no frame for an empty text, and autobahn none on a
        # closing connection (the client closed, or this socket did): such a
        # frame is lost with the socket, as one in flight would be.
        if text and protocol.state == protocol.STATE_OPEN:
            # What daphne's own send does, without the ASGI hop.
            protocol.sendMessage(text.encode("utf-8"), False)

    def flush(self, *, pushed_back: bool = False) -> None:
        """Write what is queued, as long as the transport does not push back (`pushed_back`: even if it does)."""
        while self.queue and (pushed_back or not self.paused):
            text, size = self.queue.popleft()  # type: ignore[union-attr]
            self.queued -= size
            self.write(text)  # type: ignore[arg-type]
        self.emptied()

    # Twisted's IPushProducer.

    def pauseProducing(self) -> None:
        self.paused = True

    def resumeProducing(self) -> None:
        self.paused = False
        self.flush()
        if not self.pushed_back:
            self.wake()

    def stopProducing(self) -> None:
        self.stop()

    async def close_behind(self, closer: Closer) -> None:
        # What waits goes to the transport ahead of the close frame, pushed
        # back or not: it is within the limit, and the client reads it first.
        self.flush(pushed_back=True)
        await closer()

    def stop(self) -> None:
        super().stop()
        self.paused = False
        slot, self.slot = self.slot, None
        if slot is not None:
            try:
                slot.unregisterProducer()
            except RuntimeError:  # a transport that says none is registered (autobahn's drop unregistered it)
                pass


def register_producer(producer: Any, transport: Any) -> Any | None:
    """Register `producer` as the push producer of a daphne connection's transport; where it was registered, or None.

    Twisted allows one producer per transport. Over plain TCP, daphne's HTTP
    channel registered itself on it, and stays registered once it has handed
    the connection to the WebSocket protocol: it forwards pause and resume to
    the producer of its request, which an upgraded connection never has, so
    that slot takes this one. Over TLS the channel found no push producer to
    register with, and the transport's own slot is free.
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
    if not isinstance(channel, HTTPChannel):
        return None
    try:
        channel.registerProducer(producer, True)
    except RuntimeError:
        return None
    return channel


_warned_unbuffered = False


def send_buffer(send: Send, limit: int, on_overflow: OnOverflow) -> SendBuffer:
    """The send buffer of the connection behind an ASGI `send`, right after `websocket.accept`."""
    global _warned_unbuffered
    protocol = daphne_connection(send)
    if protocol is None:
        return SendBuffer(send, limit, on_overflow)
    buffer = DaphneSendBuffer(protocol, None, send, limit, on_overflow)
    buffer.slot = register_producer(buffer, protocol.transport)
    if buffer.slot is None and not buffer.stopped:
        # Daphne's send never waits: without the transport's pushback nothing
        # here can tell what waits, and nothing is closed for it.
        if not _warned_unbuffered:
            _warned_unbuffered = True
            log.warning("daphne connection on %r takes no push producer: slow clients are not limited",
                        type(protocol.transport).__name__)
    return buffer
