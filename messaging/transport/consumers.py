"""The WebSocket consumer: parse, dispatch, send. The logic lives elsewhere."""
from __future__ import annotations

import asyncio
import contextvars
import functools
import logging
import math
import random
import time
from collections import deque
from typing import Any, Awaitable, Callable

import redis
from channels.consumer import get_handler_name
from channels.exceptions import StopConsumer
from channels.generic.websocket import AsyncWebsocketConsumer
from channels.layers import get_channel_layer
from django.utils.functional import LazyObject, empty

from ..conf import get_settings
from ..core import handlers
from ..core.exceptions import BadFrame, CommandError, Invalid, RateLimited, Unavailable
from ..core.idempotency import BATCH_LIMIT, Delivery, Outcome, execute_async, execute_together, run_in_db_thread
from ..core.protocol import Command, ack_error, ack_ok, bad_frame, encode, frame_not_sent, parse_command
from ..ops import metrics
from ..ops.logcontext import command_scope, loggable
from .fanout import get_hub
from .ratelimit import TokenBucket, user_limiter
from .sendbuffer import SendBuffer, payload_length, send_buffer
from .sessions import session_still_signs_in

log = logging.getLogger(__name__)

CLOSE_UNSUPPORTED = 1003
CLOSE_POLICY = 1008
CLOSE_TOO_BIG = 1009
CLOSE_INTERNAL = 1011
CLOSE_UNAUTHENTICATED = 4401


def resilient(receive: Callable[[], Awaitable[dict]]) -> Callable[[], Awaitable[dict]]:
    """Retry the channel layer's receive, so an outage of its Redis pauses
    live fan-out instead of killing every socket with 1011. Commands keep
    working meanwhile (the database path), and clients catch up by seq."""

    async def receive_until_it_works() -> dict:
        pause = 0.1
        while True:
            try:
                return await receive()
            except (OSError, redis.RedisError) as exc:
                log.warning("channel layer receive failed, retrying in %.1fs: %s", pause, exc)
            await asyncio.sleep(pause)
            pause = min(pause * 2, 2.0)

    return receive_until_it_works


class SessionWatch:
    """One periodic check of a session for all the sockets it signed in.

    Every socket of a session (a browser's tabs, reconnects) shares one task,
    so a process reads each session once per interval, however many sockets
    it holds: 5,000 sockets of one session cost one read per interval, not
    5,000 reads on the database thread that also serves sign-ins. Once the
    session stops signing the user in (logout elsewhere), every socket of it
    is closed with 4401, within the interval plus one check.
    """

    _watches: dict[tuple[str, Any], "SessionWatch"] = {}

    def __init__(self, key: tuple[str, Any], user: Any, interval: float) -> None:
        self.key = key
        self.user = user
        self.interval = interval
        self.sockets: set[ChatConsumer] = set()
        self.task = asyncio.create_task(self.run())

    @classmethod
    def join(cls, socket: "ChatConsumer", session_key: str, interval: float) -> "SessionWatch":
        key = (session_key, socket.user.pk)
        watch = cls._watches.get(key)
        if watch is None or watch.task.done() or watch.task.get_loop() is not asyncio.get_running_loop():
            watch = cls._watches[key] = cls(key, socket.user, interval)
        watch.sockets.add(socket)
        return watch

    def leave(self, socket: "ChatConsumer") -> None:
        self.sockets.discard(socket)
        if not self.sockets:
            self.task.cancel()
            if self._watches.get(self.key) is self:
                del self._watches[self.key]

    async def run(self) -> None:
        # Jitter spreads the checks of sessions that connected together.
        await asyncio.sleep(random.uniform(0, self.interval))
        while True:
            try:
                # On the commands' threads: channels' one database thread also
                # signs in every new socket, and must not queue behind checks.
                valid = await run_in_db_thread(session_still_signs_in, self.key[0], self.user)
            except Exception:
                # A storage outage is not a logout: keep the sockets, ask again later.
                log.warning("session check failed for user %s", self.user.pk, exc_info=True)
                valid = True
            if not valid:
                if self._watches.get(self.key) is self:
                    del self._watches[self.key]
                for socket in list(self.sockets):
                    try:
                        await socket.close(code=CLOSE_UNAUTHENTICATED)
                    except Exception:
                        # A socket whose client is already gone (uvicorn raises
                        # then) must not keep the session's other sockets open.
                        log.warning("closing a socket of user %s failed", self.user.pk, exc_info=True)
                return
            await asyncio.sleep(self.interval)


def resolved(user: Any) -> Any:
    """The user behind channels' lazy `scope["user"]`, once AuthMiddleware resolved it.

    Every attribute read through the proxy is a Python call; the consumer
    reads the user on every frame.
    """
    if isinstance(user, LazyObject) and user._wrapped is not empty:
        return user._wrapped
    return user


class ChatConsumer(AsyncWebsocketConsumer):
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
        # database only through `run_in_db_thread`, which does that upkeep
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
        self.session_watch: SessionWatch | None = None
        # Live frames of a room held back while this socket joins it, and the
        # room's seq up to which the join's backlog covers its messages.
        self.held: dict[str, list[tuple[int | None, str]]] = {}
        self.live_after: dict[str, int] = {}
        # Frames received and not yet answered, with when each came; the task
        # that answers them while there are any (`receive`), and how many of
        # them it has taken from the inbox and not yet answered.
        self.inbox: deque[tuple[str | None, float]] = deque()
        self.worker: asyncio.Task | None = None
        self.answering = 0
        self.closed = False
        # Whether the hub delivers the user's own frames (`personal`) here.
        self.attached = False
        self.signed_in = self.user is not None and self.user.is_authenticated
        conf = get_settings()
        self.inbox_limit = conf.INBOX_LIMIT
        await self.accept()
        # Everything this socket sends waits here until the connection takes it
        # (messaging/transport/sendbuffer.py).
        self.outgoing: SendBuffer = send_buffer(self.base_send, conf.MAX_SEND_BUFFER, self.send_buffer_overflowed)
        self.held_bytes = 0
        metrics.OPEN_SOCKETS.inc()
        self.counted = True
        if not self.signed_in:
            await self.close(code=CLOSE_UNAUTHENTICATED)
            return
        self.bucket = TokenBucket(conf.RATE_PER_SECOND, conf.RATE_BURST)
        session = self.scope.get("session")
        session_key = getattr(session, "session_key", None)
        if session_key and conf.SESSION_CHECK_INTERVAL > 0:
            self.session_watch = SessionWatch.join(self, session_key, conf.SESSION_CHECK_INTERVAL)
        await self.attach()

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
        if self.session_watch is not None:
            self.session_watch.leave(self)
            self.session_watch = None
        for room in list(getattr(self, "rooms", ())):
            await self.unsubscribe(room)
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
        self.inbox.append((text_data, time.perf_counter()))
        if self.worker is None:
            self.worker = asyncio.create_task(self.answer_inbox())

    async def answer_inbox(self) -> None:
        try:
            while self.inbox and not self.closed:
                frames = list(self.inbox)
                self.inbox.clear()
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
        """Answer `frames` in the order received.

        Consecutive exactly-once commands of one type (a client's pipelined
        posts) run together in one batch, in order, so their seqs follow send
        order and their acks come in it. Everything else waits for them and
        runs alone: a join, a receipt, a refusal, a bad frame, a close. So a
        post sent right behind its room's join still runs after the join.
        """
        together: list[tuple[Delivery, float]] = []
        for text, started in frames:
            if self.closed:
                return
            frame = self.read(text)
            if isinstance(frame, Command):
                self.bad_frames = 0
                with command_scope(frame.id, frame.t, self.user.pk):
                    handler, data, error = await self.prepare(frame)
                    if error is None and handler.exactly_once and handler.subscribes_to is None:
                        if together and (together[0][0].handler.type != handler.type or len(together) >= BATCH_LIMIT):
                            await self.run_together(together)
                            together = []
                        delivery = Delivery(self.user, frame, handler, data, contextvars.copy_context())
                        together.append((delivery, started))
                        continue
            await self.run_together(together)
            together = []
            if self.closed:
                return
            if isinstance(frame, Command):
                with command_scope(frame.id, frame.t, self.user.pk):
                    await self.run(frame, started, handler, data, error)
            elif isinstance(frame, BadFrame):
                await self.refuse_frame(frame.message)
            else:
                await self.close(code=frame)
        await self.run_together(together)

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
                refusal = RateLimited(f"{waiting} frames of this socket wait for their answers",
                                      retry_after=math.ceil(wait * 1000) / 1000)
                await self.refuse(frame, handler, refusal, time.perf_counter())
        elif isinstance(frame, BadFrame):
            await self.refuse_frame(frame.message)
        else:
            await self.close(code=frame)

    async def send_text(self, text: str) -> None:
        """Send one text frame: every frame this consumer sends goes through here.

        The socket's send buffer (messaging/transport/sendbuffer.py) writes it to the
        connection, or queues it while the client does not read; it never
        waits, so a room's fan-out is not held up by a slow member. A frame
        too large ever to be sent is replaced by an error frame. A subclass
        that wants to see or change frames overrides this.
        """
        if not self.outgoing.send(text):
            await self.not_sent("live", "frame_too_large", f"{payload_length(text)} bytes", None)

    async def send_frame(self, frame: dict, command_id: str | None = None) -> int:
        """Encode and send one frame of this socket's own; the bytes of its payload, 0 if it was not sent.

        `command_id` is the command whose ack or reply it is: a frame that
        cannot be encoded or is too large to send is replaced by an error
        frame naming it, so its client learns why the ack or reply is missing.
        """
        try:
            text = encode(frame)
        except TypeError as exc:  # orjson.JSONEncodeError is one
            await self.not_sent(frame.get("t"), "frame_unencodable", str(exc), command_id)
            return 0
        if not self.outgoing.fits(text):
            await self.not_sent(frame.get("t"), "frame_too_large", f"{payload_length(text)} bytes", command_id)
            return 0
        await self.send_text(text)
        return payload_length(text)

    async def not_sent(self, what: Any, code: str, detail: str, command_id: str | None) -> None:
        """Log and count a frame that cannot be sent, and send the small error frame that stands for it."""
        metrics.UNSENDABLE_FRAMES.labels("too_large" if code == "frame_too_large" else "unencodable").inc()
        largest = self.outgoing.largest
        log.warning("a %s frame for user %s was not sent (%s): %s, the limit is %d bytes",
                    str(what)[:32], self.user.pk, code, detail, largest)
        message = (f"a frame of {detail} is over the {largest} bytes this server sends in one"
                   if code == "frame_too_large" else "a frame could not be encoded as JSON")
        await self.send_text(encode(frame_not_sent(code, message, command_id)))

    def send_buffer_overflowed(self, frames: int, waited: int) -> None:
        """More than `MAX_SEND_BUFFER` waits for this socket's client: close it with 1008.

        The send buffer has dropped what waited; the frames still queued in
        the inbox are dropped too, and the close goes in a task of its own,
        since the send that overflowed may be a room's fan-out.
        """
        metrics.SEND_BUFFER_OVERFLOWS.inc()
        log.warning("closing a socket of user %s with 1008: %d bytes waited for its client (MAX_SEND_BUFFER %d), "
                    "%d frames dropped", self.user.pk, waited, self.outgoing.limit, frames)
        self.stop_answering()
        self.overflow_close = asyncio.ensure_future(self.close(code=CLOSE_POLICY))

    async def send(self, text_data: str | None = None, bytes_data: bytes | None = None,
                   close: bool | int = False) -> None:
        """Channels' `send`, for a host's code: a text frame goes through `send_text`, behind the frames before it."""
        if text_data is not None and getattr(self, "outgoing", None) is not None:
            await self.send_text(text_data)
            if close:
                await self.close(close)
            return
        await super().send(text_data=text_data, bytes_data=bytes_data, close=close)

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

    async def prepare(self, command: Command) -> tuple[handlers.Handler | None, Any, CommandError | None]:
        """The command's handler (None if it has none) and validated data, or why it is refused.

        Everything that can fail for this command alone fails here, before
        it joins a batch with other users' commands: its type, its data and,
        for an exactly-once type, its fingerprint; for a join, this socket's
        count of rooms.
        """
        handler = None
        try:
            await self.check_rate()
            handler = handlers.lookup(command.t)
            data = handlers.validate(handler, command.d)
            if handler.exactly_once:
                command.fingerprint  # computed now, and kept on the command for its batch
            if handler.subscribes_to is not None:
                self.check_rooms(handler.subscribes_to(data))
            return handler, data, None
        except CommandError as exc:
            return handler, None, exc
        except Exception as exc:
            return handler, None, self.unavailable(command, exc)

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

    async def run(self, command: Command, started: float, handler: handlers.Handler | None, data: Any,
                  error: CommandError | None) -> None:
        """One prepared command on its own (or its refusal, `error`), answered."""
        joining = subscribed = None
        if error is None:
            assert handler is not None
            try:
                if handler.subscribes_to is not None:
                    joining = handler.subscribes_to(data)
                    self.held[joining] = []
                    subscribed = await self.subscribe(joining)
                outcome = await execute_async(self.user, command, handler, data)
            except CommandError as exc:
                error = exc
            except Exception as exc:
                error = self.unavailable(command, exc)
        if error is not None:
            await self.unsubscribe(subscribed)
            await self.refuse(command, handler, error, started)
            await self.release_held(joining)
            return
        await self.ack(command, handler, outcome, started)
        if joining is not None:
            last_seq = outcome.data.get("last_seq")
            if isinstance(last_seq, int):
                self.live_after[joining] = last_seq
            await self.release_held(joining)
        self.publish(outcome)

    async def run_together(self, together: list[tuple[Delivery, float]]) -> None:
        """Exactly-once commands that take effect in their order, answered in it."""
        if not together:
            return
        try:
            results = await execute_together([delivery for delivery, _ in together])
        except Exception:
            log.exception("a batch of %d commands by user %s failed", len(together), self.user.pk)
            results = [Unavailable()] * len(together)
        for (delivery, started), result in zip(together, results):
            command, handler = delivery.command, delivery.handler
            with command_scope(command.id, command.t, self.user.pk):
                if isinstance(result, Outcome):
                    await self.ack(command, handler, result, started)
                    self.publish(result)
                    continue
                if not isinstance(result, CommandError):
                    result = self.unavailable(command, result)
                await self.refuse(command, handler, result, started)

    async def ack(self, command: Command, handler: handlers.Handler, outcome: Outcome, started: float) -> None:
        """The command's ack, then its replies (a join's backlog), which cost the socket's rate by their size."""
        await self.send_frame(ack_ok(command.id, outcome.data, dup=outcome.dup), command.id)
        self.answered(handler, "dup" if outcome.dup else "ok", started, source=outcome.source)
        sent = 0
        for frame in outcome.replies:
            # As fast as the client reads them: a backlog may be larger than MAX_SEND_BUFFER.
            await self.outgoing.room()
            if self.closed:  # closing (or overflowed): the rest would be dropped
                break
            sent += await self.send_frame(frame, command.id)
        if sent:
            self.bucket.charge(sent / get_settings().REPLY_BYTES_PER_TOKEN)

    async def refuse(self, command: Command, handler: handlers.Handler | None, error: CommandError,
                     started: float) -> None:
        await self.send_frame(ack_error(command.id, error.as_error()), command.id)
        self.answered(handler, error.code, started)

    def publish(self, outcome: Outcome) -> None:
        for room, frame in outcome.broadcasts:
            self.broadcast(room, frame)
        for user_id, room, frame in outcome.to_users:
            self.hub.publish_to_user(user_id, room, encode(frame))

    def answered(self, handler: handlers.Handler | None, outcome: str, started: float, *, source: str | None = None) -> None:
        """Count and log one ack, the one place where every command's outcome is known."""
        seconds = time.perf_counter() - started
        metrics.command_answered(handler.type if handler else metrics.UNKNOWN_TYPE, outcome, seconds, source=source)
        # Refusals at INFO; successes at DEBUG, since a line per command costs
        # more than a cheap command itself under load.
        log.log(
            logging.DEBUG if outcome in ("ok", "dup") else logging.INFO,
            "answered %s%s in %.1f ms", outcome, f" from {source}" if source else "", seconds * 1000,
        )

    async def attach(self) -> None:
        """Have the hub deliver the user's own frames to this socket (`personal`).

        Best effort like a room's live frames: a failure (Redis away) is tried
        again at the socket's next join, before that room's frames can come.
        """
        try:
            await self.hub.attach(self.user.pk, self)
        except Exception:
            log.exception("attaching a socket of user %s failed", self.user.pk)
            return
        self.attached = True

    async def subscribe(self, room: str) -> str | None:
        """Add this socket to the room's live frames; returns the room if this call added it."""
        if not self.attached:
            await self.attach()
        if room in self.rooms:
            return None
        try:
            await self.hub.join(room, self)
        except Exception:
            # Live fan-out is best effort; the join itself (membership and
            # backlog) does not depend on it. A later join tries again.
            log.exception("subscribing to room %s failed", room)
            return None
        self.rooms.add(room)
        return room

    async def unsubscribe(self, room: str | None) -> None:
        if room is not None:
            self.rooms.discard(room)
            self.live_after.pop(room, None)
            try:
                await self.hub.leave(room, self)
            except Exception:
                log.exception("unsubscribing from room %s failed", room)

    def broadcast(self, room: str, frame: dict) -> None:
        """Queue a committed and acked effect's frame for everyone in the room.

        The socket's next command does not wait for it; the hub publishes
        frames in the order they were queued (messaging/transport/fanout.py).
        """
        seq = frame["d"].get("seq") if frame.get("t") == "msg" else None
        self.hub.publish(room, seq, encode(frame))

    async def live(self, room: str, seq: int | None, text: str) -> None:
        """One live frame of a joined room, from the hub."""
        held = self.held.get(room)
        if held is not None:
            # A join of this room is running: its ack and backlog go first.
            # What is held waits for the client as much as what is queued.
            held.append((seq, text))
            self.held_bytes += payload_length(text)
            if self.held_bytes + self.outgoing.waiting > self.outgoing.limit and not self.outgoing.overflowed:
                frames = sum(len(frames) for frames in self.held.values())
                self.held.clear()
                self.outgoing.overflow(frames, self.held_bytes)
                self.held_bytes = 0
        elif seq is None or seq > self.live_after.get(room, 0):
            # A message at or below the join's last seq was in its backlog
            # (or beyond its replay limit, for the client to fetch by seq).
            await self.send_text(text)

    async def personal(self, room: str | None, text: str) -> None:
        """A frame for this socket's user, from the hub; one for a room only
        while this socket is joined to it, after a running join's backlog."""
        if room is None:
            await self.send_text(text)
        elif room in self.held or room in self.rooms:
            await self.live(room, None, text)

    async def release_held(self, room: str | None) -> None:
        """After a join's ack and backlog: send what the room published meanwhile."""
        held = self.held.pop(room, None) if room is not None else None
        if held:
            self.held_bytes -= sum(payload_length(text) for _, text in held)
        if held and room in self.rooms:
            for seq, text in held:
                await self.live(room, seq, text)
