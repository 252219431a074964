"""One connected client, whatever carries its frames: its inbox, its refusals, the order of its answers.

What a command does is the core's (messaging/core/pipeline.py); a session
owns what a client is while it is connected: the frames it sent and not yet
answered (`receive`, answered in order by runs: `answer_frames`), its rate,
its rooms' live frames (`LiveRooms`, live.py), its send path (`Sender`,
outgoing.py), its presence, the watch of its credential (signins.py) and
what happens when its client reads too slowly (`overflowed`). It imports no
framework: it talks to its transport through a `Port` (ports.py), and a
transport adapter (`ChatConsumer`, consumers.py) feeds it frames.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import logging
import math
import time
from collections import deque
from collections.abc import Hashable
from dataclasses import dataclass
from typing import Any

from ..conf import get_settings
from ..core import handlers, pipeline
from ..core.exceptions import BadFrame, CommandError, Invalid, RateLimited, Unavailable
from ..core.outcomes import Delivery
from ..core.protocol import Command, bad_frame, parse_command
from ..ops import metrics
from ..ops.logcontext import command_scope, loggable
from .answers import Answers
from .closes import CLOSE_INTERNAL, CLOSE_POLICY, CLOSE_TOO_BIG, CLOSE_UNAUTHENTICATED, CLOSE_UNSUPPORTED
from .hub import Hub
from .live import LiveRooms
from .outgoing import Sender
from .ports import Port
from .presence import get_presence
from .ratelimit import TokenBucket, user_limiter
from .typing import own_prefix
from .watch import CredentialWatch

log = logging.getLogger("messaging.transport.consumers")


@dataclass
class Refused:
    """A command refused before it reached the pipeline, answered in its turn."""

    command: Command
    handler: handlers.Handler | None
    error: CommandError
    started: float


# What a frame is to the session: a command, why it is none, or the code to close with.
Read = Command | BadFrame | int


class Session:
    """The client of `user` on `port`, from `start` to `end`.

    `client_address`: the key of the client (messaging/transport/addresses.py),
    for the limits per address. `credential` and `watch`: what signs the
    client in, and the loop's watch that closes the session once it no
    longer does (None: not watched).
    """

    # Slots, as in each object a session makes for itself (Sender, LiveRooms, TokenBucket, Answers): one of each a socket, for its life, and a dict apiece cost about 1 kB a socket.
    __slots__ = (
        "port",
        "user",
        "signed_in",
        "client_address",
        "credential",
        "watch",
        "sender",
        "rooms",
        "bucket",
        "answers",
        "inbox_limit",
        "bad_frames",
        "inbox",
        "worker",
        "answering",
        "closed",
        "counted",
        "present",
        "overflow_close",
    )

    def __init__(
        self,
        port: Port,
        user: Any,
        hub: Hub,
        *,
        client_address: str | None = None,
        credential: Hashable | None = None,
        watch: CredentialWatch[Any] | None = None,
    ) -> None:
        conf = get_settings()
        self.port = port
        self.user = user
        self.signed_in = user is not None and bool(user.is_authenticated)
        self.client_address = client_address
        self.credential = credential
        self.watch = watch if self.signed_in and credential is not None else None
        self.sender = Sender(port.buffer, user.pk if self.signed_in else None)
        # A user's own `typing` (PROTOCOL.md 1.1) and `presence` frames are not sent back to them.
        own_frames = (own_prefix("typing", user.pk), own_prefix("presence", user.pk)) if self.signed_in else ()
        self.rooms = LiveRooms(hub, user, self.sender, own_frames)
        self.bucket = TokenBucket(conf.RATE_PER_SECOND, conf.RATE_BURST)
        self.answers = Answers(self)
        self.inbox_limit = conf.INBOX_LIMIT
        self.bad_frames = 0
        # Frames received and not yet answered, with when each came; the task
        # that answers them while there are any (`receive`), and how many of
        # them it has taken from the inbox and not yet answered.
        # (An empty tuple until the first frame: an empty deque is 0.6 kB a session.)
        self.inbox: deque[tuple[str | None, float]] | tuple[()] = ()
        self.worker: asyncio.Task[None] | None = None
        self.answering = 0
        self.closed = False
        self.counted = False
        self.present = False
        # The close a send buffer's overflow started, held until done.
        self.overflow_close: asyncio.Future[None] | None = None

    async def start(self) -> None:
        """The client is connected: count it, and close it at once if it is not signed in."""
        metrics.OPEN_SOCKETS.inc()
        self.counted = True
        if not self.signed_in:
            await self.close(CLOSE_UNAUTHENTICATED)
            return
        if self.watch is not None:
            # A bound method, not a `partial` of `close` (which also keeps a bound method and its
            # arguments' tuple): the watch holds it for the socket's life.
            self.watch.add(self, self.credential, self.credential_ended)
        await self.rooms.attach()
        self.present = True
        get_presence().opened(self.user.pk)

    async def end(self) -> None:
        """The client is gone: let go of everything it held."""
        # The command being answered finishes (a join's subscription must
        # exist before it can be undone below); the rest are dropped.
        self.stop_answering()
        self.port.buffer.stop()
        if self.worker is not None:
            await asyncio.wait([self.worker])
        if self.counted:
            metrics.OPEN_SOCKETS.dec()
            self.counted = False
        if self.watch is not None:
            self.watch.discard(self)
        for room in list(self.rooms.rooms):
            await self.rooms.unsubscribe(room)
        if self.present:
            self.present = False
            get_presence().closed(self.user.pk)
        await self.rooms.detach()

    async def receive(self, text: str | None) -> None:
        """Queue a frame for `answer_inbox`, which answers the session's frames in order (None: not text).

        A transport hands its next frame only when this returns, so answering
        here would keep one command per client in flight however many it
        sends ahead. Queued, a client's consecutive posts go to the database
        together (`answer_frames`).
        """
        if not self.signed_in or self.closed:
            return
        if len(self.inbox) + self.answering >= self.inbox_limit:
            await self.refuse_past_inbox(text)
            return
        if not self.inbox:
            self.inbox = deque()
        self.inbox.append((text, time.perf_counter()))
        if self.worker is None:
            self.worker = asyncio.create_task(self.answer_inbox())

    async def idle(self) -> None:
        """Return once every frame received so far is answered (its replies put in the buffer)."""
        while self.worker is not None:
            await asyncio.wait([self.worker])

    async def answer_inbox(self) -> None:
        try:
            while self.inbox and not self.closed:
                frames = list(self.inbox)
                self.inbox = ()
                self.answering = len(frames)
                await self.answer_frames(frames)
                self.answering = 0
        except Exception:
            # What channels does with an exception of a handler: log it and
            # end the connection (1011), rather than leave its frames unanswered.
            log.exception("answering frames of user %s failed", self.user.pk)
            try:
                await self.close(CLOSE_INTERNAL)
            except Exception:
                log.warning("closing a socket of user %s failed", self.user.pk, exc_info=True)
        finally:
            self.worker = None
            self.answering = 0

    async def answer_frames(self, frames: list[tuple[str | None, float]]) -> None:
        """Answer `frames` in the order received, in the groups the pipeline runs together.

        Each frame is read and its command prepared (rate, type, data, rooms)
        as its turn comes, so a join counts the rooms of the joins before it.
        The pipeline's rule (`pipeline.Runs`) says what runs together: a
        client's pipelined posts in one batch, everything else alone.
        """
        order = pipeline.Runs()
        for text, started in frames:
            if self.closed:
                return
            item: Read | Delivery | Refused = self.read(text)
            if isinstance(item, Command):
                self.bad_frames = 0
                with command_scope(item.id, item.t, self.user.pk):
                    item = await self.prepare(item, started)
            for group in order.add(item):
                await self.answer(group)
                if self.closed:
                    return
        for group in order.end():
            await self.answer(group)

    async def answer(self, group: list[Any]) -> None:
        """One group of `answer_frames`: deliveries for the pipeline, or a refusal, a bad frame, a close."""
        first = group[0]
        if isinstance(first, Delivery):
            if first.handler.subscribes_to is not None:
                await self.answers.join(first)
            else:
                await self.answers.run_together(group)
        elif isinstance(first, Refused):
            with command_scope(first.command.id, first.command.t, self.user.pk):
                await self.answers.refuse(first.command, first.handler, first.error, first.started)
        elif isinstance(first, BadFrame):
            await self.refuse_frame(first.message)
        else:
            await self.close(first)

    def read(self, text: str | None) -> Read:
        """The frame's command, why it is no command, or the code to close the connection with."""
        if text is None:
            return CLOSE_UNSUPPORTED
        limit = get_settings().MAX_FRAME_BYTES
        if len(text) > limit or len(text.encode("utf-8", "surrogatepass")) > limit:
            return CLOSE_TOO_BIG
        try:
            return parse_command(text)
        except BadFrame as exc:
            return exc

    async def refuse_past_inbox(self, text: str | None) -> None:
        """Answer at once a frame that came with `INBOX_LIMIT` frames unanswered, without queueing it.

        A command is refused with `rate_limited`: it is not applied, and past
        the inbox it would have been past `RATE_BURST` too. `retry_after` is
        the time the session's rate needs for the frames already waiting.
        """
        frame = self.read(text)
        if isinstance(frame, Command):
            self.bad_frames = 0
            with command_scope(frame.id, frame.t, self.user.pk):
                handler: handlers.Handler | None
                try:
                    handler = handlers.lookup(frame.t)
                except CommandError:
                    handler = None
                waiting = len(self.inbox) + self.answering
                wait = waiting / get_settings().RATE_PER_SECOND
                refusal = RateLimited(
                    f"{waiting} frames of this socket wait for their answers", retry_after=math.ceil(wait * 1000) / 1000
                )
                await self.answers.refuse(frame, handler, refusal, time.perf_counter())
        elif isinstance(frame, BadFrame):
            await self.refuse_frame(frame.message)
        else:
            await self.close(frame)

    async def refuse_frame(self, message: str) -> None:
        self.bad_frames += 1
        await self.sender.send_frame(bad_frame(message))
        if self.bad_frames >= get_settings().BAD_FRAME_LIMIT:
            await self.close(CLOSE_POLICY)

    async def credential_ended(self) -> None:
        """The watch found this session's credential ended: closed with 4401."""
        await self.close(CLOSE_UNAUTHENTICATED)

    async def close(self, code: int | None, reason: str | None = None) -> None:
        """Close the connection with `code`, after the frames sent before it; frames queued behind it are not answered."""
        self.stop_answering()
        await self.port.buffer.close(functools.partial(self.port.end, code, reason))

    def stop_answering(self) -> None:
        """Drop the queued frames and take no more."""
        self.closed = True
        if self.inbox:
            self.inbox = ()

    def overflowed(self, frames: int, waited: int) -> None:
        """More than `MAX_SEND_BUFFER` waits for this client (the buffer's overflow): close it with 1008.

        The buffer has dropped what waited; the frames still queued in the
        inbox are dropped too, and the close goes in a task of its own, since
        the send that overflowed may be a room's fan-out.
        """
        metrics.SEND_BUFFER_OVERFLOWS.inc()
        log.warning(
            "closing a socket of user %s with 1008: %d bytes waited for its client (MAX_SEND_BUFFER %d), "
            "%d frames dropped",
            self.user.pk,
            waited,
            self.port.buffer.limit,
            frames,
        )
        self.stop_answering()
        self.overflow_close = asyncio.ensure_future(self.close(CLOSE_POLICY))

    async def check_rate(self) -> None:
        """Refuse with `rate_limited` above the session's or the user's rate."""
        wait = self.bucket.take()
        if not wait:
            wait = await user_limiter().ahit(self.user.pk)
        if wait:
            # Rounded up, so a client that waits exactly this long is let in.
            raise RateLimited(retry_after=math.ceil(wait * 1000) / 1000)

    async def prepare(self, command: Command, started: float) -> Delivery | Refused:
        """The command as the pipeline runs it, or why it is refused.

        Everything that can fail for this command alone fails here, before
        it joins a batch with other users' commands: the session's and the
        user's rate, its type, its data and fingerprint (`pipeline.prepare`),
        and for a join this session's count of rooms.
        """
        handler = None
        try:
            await self.check_rate()
            handler = handlers.lookup(command.t)
            delivery = pipeline.prepare(self.user, command, contextvars.copy_context(), self.client_address)
            delivery.received = started
            if handler.subscribes_to is not None:
                self.check_rooms(handler.subscribes_to(delivery.data))
            return delivery
        except CommandError as exc:
            return Refused(command, handler, exc, started)
        except Exception as exc:
            return Refused(command, handler, self.unavailable(command, exc), started)

    def check_rooms(self, room: str) -> None:
        """Refuse a join of one room more than `ROOMS_PER_SOCKET` with `Invalid`:
        each joined room costs the session a subscription and the hub an entry."""
        limit = get_settings().ROOMS_PER_SOCKET
        if limit and room not in self.rooms.rooms and len(self.rooms.rooms) >= limit:
            raise Invalid(f"this socket has joined {limit} rooms")

    def unavailable(self, command: Command, exc: BaseException) -> Unavailable:
        """An unexpected failure of `command`, logged; the client is told `unavailable` (retry)."""
        log.error("command %s %s by user %s failed", loggable(command.t), command.id, self.user.pk, exc_info=exc)
        return Unavailable()
