"""Live fan-out: a room's frames to every socket joined to it, in every process.

Each server process keeps which of its sockets joined which room, and (with
Redis) one Pub/Sub connection subscribed to exactly those rooms. The frames a
process has queued for a room go as one `PUBLISH` to the room's channel (a
batch of posts makes several), pipelined with those of other rooms; every
process subscribed to the room decodes it once and hands each frame to its
sockets in that room. The publishing process hears its
own publish like any other, so every socket of a room sees one order: the
order in which Redis received the publishes.

Why not channels' `group_send`: with `RedisChannelLayer` a broadcast costs a
Lua script over the group's members, a message per member in Redis and a
receive and dispatch per member, which made it the largest item of the
server's profile, and its per-channel capacity silently drops frames under
load (docs/PERFORMANCE.md). A room's frames are the same bytes for every
member, so they travel once per process.

Fan-out is best effort by design: the effect is committed and acked before
its frame is published, so a frame lost to a Redis outage loses nothing;
clients catch up by seq with `room.join` and `since`. Without Redis the hub
reaches the sockets of its own process only (the embedded demo).
"""
from __future__ import annotations

import asyncio
import logging
import weakref
from collections import deque
from typing import Iterator, Protocol

import redis
import redis.asyncio as aioredis

from . import metrics
from .conf import get_settings

log = logging.getLogger(__name__)

# Frames queued for publishing past which the oldest are dropped: a Redis that
# cannot keep up must not grow the process without bound.
PUBLISH_BACKLOG = 10_000
# Most publishes sent in one pipelined round trip.
PUBLISH_BATCH = 500


def pack(frames: list[tuple[int | None, str]]) -> bytes:
    """A room's frames, in order, as one Pub/Sub message: per frame a line
    `<seq or -> <length>`, then that many bytes of UTF-8 text."""
    parts = []
    for seq, text in frames:
        payload = text.encode()
        parts.append(b"%s %d\n%s" % (b"-" if seq is None else b"%d" % seq, len(payload), payload))
    return b"".join(parts)


def unpack(data: bytes) -> Iterator[tuple[int | None, str]]:
    """The frames of a `pack`ed message; ValueError if it is not one."""
    at = 0
    while at < len(data):
        newline = data.index(b"\n", at)
        seq, length = data[at:newline].split(b" ")
        size = int(length)
        end = newline + 1 + size
        if size < 0 or end > len(data):
            raise ValueError("a frame's length is negative or runs past the end of the message")
        yield None if seq == b"-" else int(seq), data[newline + 1:end].decode()
        at = end


class Member(Protocol):
    """A socket as the hub sees it."""

    async def live(self, room: str, seq: int | None, text: str) -> None:
        """Send one live frame of `room`; `seq` is the message's, None for other frames."""


class Hub:
    """The sockets of this process per room; delivers to them in-process.

    The base class is the whole fan-out without Redis. `RedisHub` publishes
    instead of delivering, and delivers what its subscription hears.
    """

    def __init__(self) -> None:
        self.members: dict[str, set[Member]] = {}
        self.outbox: deque[tuple[str, int | None, str]] = deque()
        self.pump: asyncio.Task | None = None

    async def join(self, room: str, member: Member) -> None:
        """From return on, `member` gets every frame published to `room`."""
        self.members.setdefault(room, set()).add(member)

    async def leave(self, room: str, member: Member) -> None:
        members = self.members.get(room)
        if members is not None:
            members.discard(member)
            if not members:
                del self.members[room]

    def publish(self, room: str, seq: int | None, text: str) -> None:
        """Queue one frame for everyone in `room`, and return at once.

        Frames leave in the order they were queued. A socket's own command is
        acked before its broadcast is queued; nothing here waits for a peer.
        """
        if len(self.outbox) >= PUBLISH_BACKLOG:
            self.outbox.popleft()
            metrics.FANOUT_FRAMES.labels("dropped").inc()
        self.outbox.append((room, seq, text))
        if self.pump is None or self.pump.done():
            self.pump = asyncio.create_task(self.send_queued())

    async def send_queued(self) -> None:
        while self.outbox:
            batch = [self.outbox.popleft() for _ in range(min(len(self.outbox), PUBLISH_BATCH))]
            await self.send(batch)

    async def send(self, batch: list[tuple[str, int | None, str]]) -> None:
        for room, seq, text in batch:
            await self.deliver(room, seq, text)
        metrics.FANOUT_FRAMES.labels("published").inc(len(batch))

    async def deliver(self, room: str, seq: int | None, text: str) -> None:
        for member in list(self.members.get(room, ())):
            try:
                await member.live(room, seq, text)
            except Exception:
                # One broken socket must not keep the frame from the others.
                log.warning("live frame for room %s not delivered", room, exc_info=True)


class RedisHub(Hub):
    """Fan-out across processes through Redis Pub/Sub.

    Pub/Sub channels ignore the Redis db number, so the channel names carry
    it: two projects (or test runs) on different dbs of one server never hear
    each other.
    """

    def __init__(self, url: str, *, timeout: float) -> None:
        super().__init__()
        self.timeout = timeout
        # Publishing gives up after `timeout`, like the claim store; the
        # subscription waits forever for its next frame, so no socket timeout.
        self.client = aioredis.Redis.from_url(url, socket_timeout=timeout, socket_connect_timeout=timeout)
        self.listen_client = aioredis.Redis.from_url(url, socket_timeout=None, socket_connect_timeout=timeout)
        db = self.client.connection_pool.connection_kwargs.get("db", 0)
        # `live`, not the `room` of versions that published one frame per
        # message: processes of the two formats do not hear each other.
        self.prefix = f"messaging:{db}:live:"
        self.pubsub: aioredis.client.PubSub | None = None
        self.listener: asyncio.Task | None = None
        self.confirmations: dict[bytes, asyncio.Future] = {}
        self.lock = asyncio.Lock()

    def channel(self, room: str) -> bytes:
        return (self.prefix + room).encode()

    async def join(self, room: str, member: Member) -> None:
        async with self.lock:
            if room in self.members:
                self.members[room].add(member)
                return
            # Subscribed before the caller reads its backlog, and confirmed by
            # Redis, so a message committed after that read is heard live.
            # A failure raises: the caller joins without live frames, and
            # its next join tries again.
            await self.subscribe(self.channel(room))
            self.members[room] = {member}

    async def leave(self, room: str, member: Member) -> None:
        async with self.lock:
            await super().leave(room, member)
            if room in self.members or self.pubsub is None:
                return
            if not self.members:
                await self.stop_listening()
                return
            try:
                await self.pubsub.unsubscribe(self.channel(room))
            except (OSError, redis.RedisError) as exc:
                log.warning("unsubscribing from room %s failed: %s", room, exc)

    async def subscribe(self, channel: bytes) -> None:
        if self.pubsub is None:
            self.pubsub = self.listen_client.pubsub()
        confirmed = asyncio.get_running_loop().create_future()
        self.confirmations[channel] = confirmed
        try:
            await self.pubsub.subscribe(channel)
            if self.listener is None or self.listener.done():
                self.listener = asyncio.create_task(self.listen(self.pubsub))
            await asyncio.wait_for(confirmed, self.timeout * 4)
        finally:
            self.confirmations.pop(channel, None)

    async def stop_listening(self) -> None:
        pubsub, listener = self.pubsub, self.listener
        self.pubsub = self.listener = None
        if listener is not None:
            listener.cancel()
            await asyncio.gather(listener, return_exceptions=True)
        if pubsub is not None:
            try:
                await pubsub.aclose()
            except (OSError, redis.RedisError):
                pass

    async def listen(self, pubsub: aioredis.client.PubSub) -> None:
        pause = 0.1
        while True:
            try:
                message = await pubsub.get_message(timeout=None)
            except asyncio.CancelledError:
                raise
            except (OSError, redis.RedisError) as exc:
                # redis-py reconnects and subscribes again on the next read.
                log.warning("live frames paused, Redis subscription failed: %s", exc)
                await asyncio.sleep(pause)
                pause = min(pause * 2, 2.0)
                continue
            pause = 0.1
            if message is None:
                continue
            kind = message["type"]
            if kind == "message":
                await self.heard(message["channel"], message["data"])
            elif kind == "subscribe":
                confirmed = self.confirmations.get(message["channel"])
                if confirmed is not None and not confirmed.done():
                    confirmed.set_result(None)

    async def heard(self, channel: bytes, data: bytes) -> None:
        room = channel.decode()[len(self.prefix):]
        try:
            frames = list(unpack(data))
        except ValueError:
            log.warning("dropped a live message of room %s that is not a packed list of frames", room)
            return
        for seq, text in frames:
            await self.deliver(room, seq, text)

    async def send(self, batch: list[tuple[str, int | None, str]]) -> None:
        by_room: dict[str, list[tuple[int | None, str]]] = {}
        for room, seq, text in batch:
            by_room.setdefault(room, []).append((seq, text))
        try:
            pipe = self.client.pipeline(transaction=False)
            for room, frames in by_room.items():
                pipe.publish(self.channel(room), pack(frames))
            await pipe.execute()
        except (OSError, redis.RedisError) as exc:
            metrics.FANOUT_FRAMES.labels("lost").inc(len(batch))
            log.warning("%d live frames lost, Redis publish failed: %s", len(batch), exc)
            return
        metrics.FANOUT_FRAMES.labels("published").inc(len(batch))


_hubs: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Hub] = weakref.WeakKeyDictionary()


def get_hub() -> Hub:
    """This event loop's hub (a server process has one loop; tests have one per test)."""
    loop = asyncio.get_running_loop()
    hub = _hubs.get(loop)
    if hub is None:
        conf = get_settings()
        hub = _hubs[loop] = RedisHub(conf.REDIS_URL, timeout=conf.REDIS_TIMEOUT) if conf.REDIS_URL else Hub()
    return hub
