"""The WebSocket consumer: read frames, hand commands to the pipeline, write what comes back.

What a command does is the core's (messaging/core/pipeline.py); this module owns the socket:
its inbox, its refusals before the pipeline (rate, rooms), and the order of its answers. A room's
live frames are `LiveRooms` (live.py), the socket's send path `Outgoing` (outgoing.py); its
credential is checked with every other socket's of the loop (signins.py).
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import logging
import math
import time
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from channels.consumer import get_handler_name
from channels.exceptions import StopConsumer
from channels.generic.websocket import AsyncWebsocketConsumer
from channels.layers import get_channel_layer
from django.utils.functional import LazyObject, empty

from ..conf import get_settings
from ..core import handlers, pipeline
from ..core.exceptions import BadFrame, CommandError, Invalid, RateLimited, Unavailable
from ..core.outcomes import Delivery
from ..core.protocol import Command, bad_frame, parse_command
from ..core.redis_clients import REDIS_FAILED
from ..ops import metrics
from ..ops.logcontext import command_scope, loggable
from .addresses import client_of_scope
from .answers import Answers
from .closes import CLOSE_INTERNAL, CLOSE_POLICY, CLOSE_TOO_BIG, CLOSE_UNAUTHENTICATED, CLOSE_UNSUPPORTED
from .daphne_compat import adapt_to_daphne
from .fanout import get_hub
from .live import LiveRooms
from .outgoing import Outgoing
from .presence import get_presence
from .ratelimit import TokenBucket, user_limiter
from .servers import SendBuffer, send_buffer
from .signins import credential_of, credential_watch
from .typing import own_prefix
from .watch import CredentialWatch

log = logging.getLogger(__name__)


def resilient(receive: Callable[[], Awaitable[dict]]) -> Callable[[], Awaitable[dict]]:
    """Retry the channel layer's receive, so an outage of its Redis pauses
    live fan-out instead of killing every socket with 1011. Commands keep
    working meanwhile (the database path), and clients catch up by seq."""

    async def receive_until_it_works() -> dict:
        pause = 0.1
        while True:
            try:
                return await receive()
            except REDIS_FAILED as exc:
                log.warning("channel layer receive failed, retrying in %.1fs: %s", pause, exc)
            await asyncio.sleep(pause)
            pause = min(pause * 2, 2.0)

    return receive_until_it_works


def resolved(user: Any) -> Any:
    """The user behind channels' lazy `scope["user"]`, once AuthMiddleware resolved it.

    Every attribute read through the proxy is a Python call; the consumer
    reads the user on every frame.
    """
    if isinstance(user, LazyObject) and user._wrapped is not empty:
        return user._wrapped
    return user


@dataclass
class Refused:
    """A command refused before it reached the pipeline, answered in its turn."""

    command: Command
    handler: handlers.Handler | None
    error: CommandError
    started: float


class ChatConsumer(Answers, LiveRooms, Outgoing, AsyncWebsocketConsumer):
    # Rooms' live frames come through the app's own hub (messaging/transport/fanout.py),
    # so a socket does not listen on the channel layer: no channel, no
    # receive task and no Redis poll per socket. A host's subclass that wants
    # channel-layer events for its sockets names its layer here.
    channel_layer_alias: str | None = None

    # Channels assigns `channel_receive` in `__call__` and hands it to its
    # dispatch loop right away; wrapping it on assignment is the one hook.
    @property
    def channel_receive(self) -> Callable[[], Awaitable[dict]]:
        return self._channel_receive

    @channel_receive.setter
    def channel_receive(self, receive: Callable[[], Awaitable[dict]]) -> None:
        self._channel_receive = resilient(receive)

    async def __call__(self, scope: dict, receive: Callable[[], Awaitable[dict]], send: Callable) -> None:
        """Dispatch the socket's messages as they come.

        Channels' loop (`await_many_dispatch`) waits on a task per source,
        and makes a new task and an `asyncio.wait` for every frame, to listen
        on the channel layer too: 9 us of the loop's CPU per frame here. A
        socket that listens only to its client awaits `receive` directly; a
        subclass that names a channel layer gets channels' loop.
        """
        if get_channel_layer(self.channel_layer_alias) is not None:
            return await super().__call__(scope, receive, send)
        self.scope = scope
        self.channel_layer = None
        self.base_send = send
        try:
            while True:
                await self.dispatch(await receive())
        except StopConsumer:
            pass

    async def dispatch(self, message: dict[str, Any]) -> None:
        # channels' dispatch runs close_old_connections on its one sync thread
        # before every handler: a thread hop per frame and per fan-out event,
        # a quarter of the server's CPU under load. This consumer reaches the
        # database only through the gateway (`Gateway.run`), which does that upkeep
        # around each call itself.
        handler = getattr(self, get_handler_name(message), None)
        if handler is None:
            raise ValueError(f"no handler for message type {message['type']}")
        await handler(message)

    async def connect(self) -> None:
        self.user = resolved(self.scope.get("user"))
        self.hub = get_hub()
        self.rooms: set[str] = set()
        self.bad_frames = 0
        self.watch: CredentialWatch | None = None
        # Live frames of a room held back while this socket joins it, and the
        # room's seq up to which the join's backlog covers its messages.
        self.held: dict[str, list[tuple[int | None, str]]] = {}
        self.live_after: dict[str, int] = {}
        # Frames received and not yet answered, with when each came; the task
        # that answers them while there are any (`receive`), and how many of
        # them it has taken from the inbox and not yet answered.
        # (An empty tuple until the first frame: an empty deque is 0.6 kB a socket.)
        self.inbox: deque[tuple[str | None, float]] | tuple = ()
        self.worker: asyncio.Task | None = None
        self.answering = 0
        self.closed = False
        # Whether the hub delivers the user's own frames (`personal`) here.
        self.attached = False
        self.signed_in = self.user is not None and self.user.is_authenticated
        # A user's own `typing` (PROTOCOL.md 1.1) and `presence` frames are not sent back to them.
        self.own_frames = (
            (own_prefix("typing", self.user.pk), own_prefix("presence", self.user.pk)) if self.signed_in else ()
        )
        conf = get_settings()
        self.inbox_limit = conf.INBOX_LIMIT
        adapt_to_daphne()
        await self.accept()
        # Everything this socket sends waits here until the connection takes it
        # (messaging/transport/servers/).
        self.outgoing: SendBuffer = send_buffer(
            self.base_send, conf.MAX_SEND_BUFFER, self.send_buffer_overflowed, adapters=conf.SERVER_ADAPTERS
        )
        self.held_bytes = 0
        metrics.OPEN_SOCKETS.inc()
        self.counted = True
        if not self.signed_in:
            await self.close(code=CLOSE_UNAUTHENTICATED)
            return
        self.bucket = TokenBucket(conf.RATE_PER_SECOND, conf.RATE_BURST)
        # Who the socket's commands come from, for the limits per address (rooms created).
        self.client_address = client_of_scope(self.scope)
        self.watch = credential_watch()
        if self.watch is not None:
            self.watch.add(
                self, credential_of(self.scope, self.user), functools.partial(self.close, code=CLOSE_UNAUTHENTICATED)
            )
        await self.attach()
        self.present = True
        get_presence().opened(self.user.pk)

    async def disconnect(self, code: int) -> None:
        # The command being answered finishes (a join's subscription must
        # exist before it can be undone below); the rest are dropped.
        self.stop_answering()
        if getattr(self, "outgoing", None) is not None:
            self.outgoing.stop()
        if getattr(self, "worker", None) is not None:
            await asyncio.wait([self.worker])
        if getattr(self, "counted", False):
            metrics.OPEN_SOCKETS.dec()
            self.counted = False
        if self.watch is not None:
            self.watch.discard(self)
        for room in list(getattr(self, "rooms", ())):
            await self.unsubscribe(room)
        if getattr(self, "present", False):
            self.present = False
            get_presence().closed(self.user.pk)
        if getattr(self, "attached", False):
            self.attached = False
            try:
                await self.hub.detach(self.user.pk, self)
            except Exception:
                log.exception("detaching the sockets of user %s failed", self.user.pk)

    async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None) -> None:
        """Queue the frame for `answer_inbox`, which answers the socket's frames in order.

        Channels hands a consumer its next frame only when this returns, so
        answering here would keep one command per socket in flight however
        many the client sends ahead. Queued, a socket's consecutive posts go
        to the database together (`answer_frames`).
        """
        if not self.signed_in or self.closed:
            return
        if len(self.inbox) + self.answering >= self.inbox_limit:
            await self.refuse_past_inbox(text_data)
            return
        if not self.inbox:
            self.inbox = deque()
        self.inbox.append((text_data, time.perf_counter()))
        if self.worker is None:
            self.worker = asyncio.create_task(self.answer_inbox())

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
            # end the socket (1011), rather than leave its frames unanswered.
            log.exception("answering frames of user %s failed", self.user.pk)
            try:
                await self.close(code=CLOSE_INTERNAL)
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
            item = self.read(text)
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
                await self.join(first)
            else:
                await self.run_together(group)
        elif isinstance(first, Refused):
            with command_scope(first.command.id, first.command.t, self.user.pk):
                await self.refuse(first.command, first.handler, first.error, first.started)
        elif isinstance(first, BadFrame):
            await self.refuse_frame(first.message)
        else:
            await self.close(code=first)

    def read(self, text: str | None) -> Command | BadFrame | int:
        """The frame's command, why it is no command, or the code to close the socket with."""
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
        the time the socket's rate needs for the frames already waiting.
        """
        frame = self.read(text)
        if isinstance(frame, Command):
            self.bad_frames = 0
            with command_scope(frame.id, frame.t, self.user.pk):
                try:
                    handler = handlers.lookup(frame.t)
                except CommandError:
                    handler = None
                waiting = len(self.inbox) + self.answering
                wait = waiting / get_settings().RATE_PER_SECOND
                refusal = RateLimited(
                    f"{waiting} frames of this socket wait for their answers", retry_after=math.ceil(wait * 1000) / 1000
                )
                await self.refuse(frame, handler, refusal, time.perf_counter())
        elif isinstance(frame, BadFrame):
            await self.refuse_frame(frame.message)
        else:
            await self.close(code=frame)

    async def refuse_frame(self, message: str) -> None:
        self.bad_frames += 1
        await self.send_frame(bad_frame(message))
        if self.bad_frames >= get_settings().BAD_FRAME_LIMIT:
            await self.close(code=CLOSE_POLICY)

    async def close(self, code: int | bool | None = None, reason: str | None = None) -> None:
        # Frames queued behind a close are not answered; frames sent before it
        # reach the client first.
        self.stop_answering()
        closer = functools.partial(super().close, code=code, reason=reason)
        outgoing = getattr(self, "outgoing", None)
        if outgoing is None:  # closed before `connect` made it
            await closer()
        else:
            await outgoing.close(closer)

    def stop_answering(self) -> None:
        """Drop the queued frames and take no more (channels may close before `connect` made the queue)."""
        self.closed = True
        if getattr(self, "inbox", None):
            self.inbox.clear()

    async def check_rate(self) -> None:
        """Refuse with `rate_limited` above the socket's or the user's rate."""
        wait = self.bucket.take()
        if not wait:
            limiter = user_limiter()
            wait = await limiter.ahit(self.user.pk)
        if wait:
            # Rounded up, so a client that waits exactly this long is let in.
            raise RateLimited(retry_after=math.ceil(wait * 1000) / 1000)

    async def prepare(self, command: Command, started: float) -> Delivery | Refused:
        """The command as the pipeline runs it, or why it is refused.

        Everything that can fail for this command alone fails here, before
        it joins a batch with other users' commands: the socket's and the
        user's rate, its type, its data and fingerprint (`pipeline.prepare`),
        and for a join this socket's count of rooms.
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
        each joined room costs the socket a subscription and the hub an entry."""
        limit = get_settings().ROOMS_PER_SOCKET
        if limit and room not in self.rooms and len(self.rooms) >= limit:
            raise Invalid(f"this socket has joined {limit} rooms")

    def unavailable(self, command: Command, exc: BaseException) -> Unavailable:
        """An unexpected failure of `command`, logged; the client is told `unavailable` (retry)."""
        log.error("command %s %s by user %s failed", loggable(command.t), command.id, self.user.pk, exc_info=exc)
        return Unavailable()
