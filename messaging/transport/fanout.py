"""Live fan-out: a room's frames to every socket joined to it, and a user's
frames to that user's sockets, in every process.

Each server process keeps which of its sockets joined which room, and (with
Redis) one Pub/Sub connection subscribed to exactly those rooms. The frames a
process has queued for a room go as one `PUBLISH` to the room's channel (a
batch of posts makes several), pipelined with those of other rooms; every
process subscribed to the room decodes it once and hands each frame to its
sockets in that room. The publishing process hears its
own publish like any other, so every socket of a room sees one order: the
order in which Redis received the publishes.

Frames for one user (a `state` frame for a message's sender) travel the same
way on the user's own channel: the process subscribes to it while it holds a
socket of that user, and hands each frame to those sockets; a frame addressed
to the user's sockets in a room goes only to those joined to it. A user's
frames keep their order among themselves; they are not ordered against the
rooms' frames.

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

Except what ends a membership: a `room.left` is what makes a removed
member's sockets stop hearing the room. Its publish is tried again, with the
next batch or after a pause, until Redis takes it (at most `PUBLISH_BACKLOG`
wait), and a batch publishes its users' frames before its rooms', so a
process's `room.left` reaches Redis before any frame of the room it queued
after it. Where it is lost all the same (another process's subscription was
down), the hub's `MembershipWatch` (messaging/transport/memberships.py) finds
the ended membership in the database: as the subscription comes back, before
any frame it hears is handed on, and every `MEMBERSHIP_CHECK_INTERVAL`.
"""
from __future__ import annotations

import asyncio
import logging
from collections import deque
from typing import Any, Protocol, Sequence

from ..chat.private import left_room
from ..conf import get_settings
from ..core.redis_clients import REDIS_FAILED
from ..core.runtime import async_client, runtime
from ..ops import metrics
from .memberships import MembershipWatch
from .packing import pack, pack_for_user, unpack, unpack_for_user
from .subscriptions import Subscriptions

log = logging.getLogger(__name__)

# Frames queued for publishing past which the oldest are dropped: a Redis that
# cannot keep up must not grow the process without bound. Rooms' frames and
# users' frames have a queue each.
PUBLISH_BACKLOG = 10_000
# Most publishes sent in one pipelined round trip, of each queue.
PUBLISH_BATCH = 500
# Seconds before a `room.left` whose publish failed is tried again, doubling while it fails.
FIRST_RETRY, LONGEST_RETRY = 0.1, 2.0

def user_key(user_id: Any) -> str:
    """A user as the hub knows it: the id's text, the same for an id from the
    ORM, from SQL or from a channel name (integers and UUIDs alike)."""
    return str(user_id)


class Member(Protocol):
    """A socket as the hub sees it."""

    async def live(self, room: str, seq: int | None, text: str) -> None:
        """Send one live frame of `room`; `seq` is the message's, None for other frames."""

    async def personal(self, room: str | None, text: str) -> None:
        """Send one frame addressed to this socket's user: if `room` is given,
        only while this socket is joined to it."""


class Hub:
    """The sockets of this process per room; delivers to them in-process.

    The base class is the whole fan-out without Redis. `RedisHub` publishes
    instead of delivering, and delivers what its subscription hears.
    """

    def __init__(self, *, membership_interval: float = 0.0) -> None:
        self.members: dict[str, set[Member]] = {}
        # Per user (`user_key`), this process's sockets of that user.
        self.users: dict[str, set[Member]] = {}
        self.outbox: deque[tuple[str, int | None, str]] = deque()
        # Frames for one user: (user key, room or None, text).
        self.user_outbox: deque[tuple[str, str | None, str]] = deque()
        self.pump: asyncio.Task | None = None
        # The private rooms its sockets joined, checked against the database.
        self.memberships = MembershipWatch(membership_interval)
        # `release_soon`'s tasks, held until done.
        self.releasing: set[asyncio.Task] = set()

    async def join(self, room: str, member: Member) -> None:
        """From return on, `member` gets every frame published to `room`."""
        self.members.setdefault(room, set()).add(member)

    async def leave(self, room: str, member: Member) -> None:
        self.forget(room, member)

    def forget(self, room: str, member: Member) -> None:
        """From now on, no frame of `room` reaches `member` (before any await of `leave`)."""
        self.memberships.unwatch(room, member)  # type: ignore[arg-type]
        members = self.members.get(room)
        if members is not None:
            members.discard(member)
            if not members:
                del self.members[room]

    async def release(self, room: str) -> None:
        """Let go of what the hub holds for `room` if no socket here wants it any more (`RedisHub`: its channel)."""

    def release_soon(self, room: str) -> None:
        """`release`, in a task of its own."""
        task = asyncio.get_running_loop().create_task(self.release(room))
        self.releasing.add(task)
        task.add_done_callback(self.releasing.discard)

    def watch(self, room: str, member: Member) -> None:
        """`member` joined `room`, a private room: its membership is checked from now on."""
        self.memberships.watch(room, member)  # type: ignore[arg-type]

    async def attach(self, user_id: Any, member: Member) -> None:
        """From return on, `member` gets every frame published to the user `user_id`."""
        self.users.setdefault(user_key(user_id), set()).add(member)

    async def detach(self, user_id: Any, member: Member) -> None:
        key = user_key(user_id)
        sockets = self.users.get(key)
        if sockets is not None:
            sockets.discard(member)
            if not sockets:
                del self.users[key]

    def publish(self, room: str, seq: int | None, text: str) -> None:
        """Queue one frame for everyone in `room`, and return at once.

        Frames leave in the order they were queued. A socket's own command is
        acked before its broadcast is queued; nothing here waits for a peer.
        """
        queue(self.outbox, (room, seq, text))
        self.start_pump()

    def publish_to_user(self, user_id: Any, room: str | None, text: str) -> None:
        """Queue one frame for the sockets of the user `user_id` (those joined
        to `room`, if given) in every process, and return at once."""
        queue(self.user_outbox, (user_key(user_id), room, text))
        self.start_pump()

    async def aclose(self) -> None:
        """Stop sending (the loop's runtime closes): what is still queued is dropped."""
        pump, self.pump = self.pump, None
        if pump is not None and not pump.done():
            pump.cancel()
            await asyncio.gather(pump, return_exceptions=True)
        await self.memberships.aclose()

    def start_pump(self) -> None:
        if self.pump is None or self.pump.done():
            self.pump = asyncio.create_task(self.send_queued())

    async def send_queued(self) -> None:
        while self.outbox or self.user_outbox:
            await self.send(take(self.outbox), take(self.user_outbox))

    async def send(self, batch: list[tuple[str, int | None, str]],
                   to_users: Sequence[tuple[str, str | None, str]] = ()) -> bool:
        """Deliver (`RedisHub`: publish) one batch; whether it went."""
        for room, seq, text in batch:
            await self.deliver(room, seq, text)
        for key, room, text in to_users:
            await self.deliver_to_user(key, room, text)
        metrics.FANOUT_FRAMES.labels("published").inc(len(batch) + len(to_users))
        return True

    async def deliver_to_user(self, key: str, room: str | None, text: str) -> None:
        for member in list(self.users.get(key, ())):
            try:
                await member.personal(room, text)
            except Exception:
                # One broken socket must not keep the frame from the user's others.
                log.warning("a frame for user %s not delivered", key, exc_info=True)

    async def deliver(self, room: str, seq: int | None, text: str) -> None:
        for member in list(self.members.get(room, ())):
            try:
                await member.live(room, seq, text)
            except Exception:
                # One broken socket must not keep the frame from the others.
                log.warning("live frame for room %s not delivered", room, exc_info=True)


def queue(outbox: deque, item: tuple) -> None:
    """Append to a bounded outbox, dropping (and counting) the oldest when it is full."""
    if len(outbox) >= PUBLISH_BACKLOG:
        outbox.popleft()
        metrics.FANOUT_FRAMES.labels("dropped").inc()
    outbox.append(item)


def take(outbox: deque) -> list:
    """The oldest `PUBLISH_BATCH` items of an outbox, taken out of it."""
    return [outbox.popleft() for _ in range(min(len(outbox), PUBLISH_BATCH))]


class RedisHub(Hub):
    """Fan-out across processes through Redis Pub/Sub (sharded Pub/Sub on a
    Redis Cluster: `SPUBLISH`, `SSUBSCRIBE`).

    Pub/Sub channels ignore the Redis db number, so the channel names carry
    it: two projects (or test runs) on different dbs of one server never hear
    each other.
    """

    def __init__(self, url: str, *, timeout: float, sharded: bool = False, membership_interval: float = 0.0) -> None:
        super().__init__(membership_interval=membership_interval)
        self.timeout = timeout
        self.sharded = sharded
        # Publishing gives up after `timeout`, like the claim store.
        self.client = async_client(url, timeout=timeout, connect_timeout=timeout)
        db = 0 if sharded else self.client.connection_pool.connection_kwargs.get("db", 0)
        # `live`, not the `room` of versions that published one frame per
        # message: processes of the two formats do not hear each other.
        self.prefix = f"messaging:{db}:live:"
        # Versions before per-user frames never subscribe to these.
        self.user_prefix = f"messaging:{db}:user:"
        # Subscribed again after every failure (messaging/transport/subscriptions.py);
        # each time, what was lost meanwhile is checked before anything heard is handed on.
        self.subscriptions = Subscriptions(url, self.heard, timeout=timeout, sharded=sharded,
                                           connected=self.memberships.check)
        self.lock = asyncio.Lock()
        # `room.left` frames whose publish failed, (user key, room, text), oldest first; and the wait before the next try.
        self.unsent_left: deque[tuple[str, str | None, str]] = deque()
        self.retry_pause = FIRST_RETRY
        self.retry: asyncio.TimerHandle | None = None

    def channel(self, room: str) -> bytes:
        return (self.prefix + room).encode()

    def user_channel(self, key: str) -> bytes:
        return (self.user_prefix + key).encode()

    async def attach(self, user_id: Any, member: Member) -> None:
        key = user_key(user_id)
        await self.add_subscribed(self.users, key, self.user_channel(key), member)

    async def add_subscribed(self, sockets: dict[str, set[Member]], key: str, channel: bytes, member: Member) -> None:
        """`member` among the `sockets` of `key` (a room, a user), subscribed to
        `channel` first if it is the first there.

        Subscribed before the caller reads a room's backlog (or joins a room,
        for a user's frames), and confirmed by Redis, so a frame published
        after that is heard. While Redis does not answer, the member is still
        added and the channel stays wanted: its live frames start once the
        subscription is back (`Subscriptions`), without another join.
        """
        async with self.lock:
            if key in sockets:
                sockets[key].add(member)
                return
            sockets[key] = {member}
            if not await self.subscriptions.add(channel):
                log.warning("live frames of %s wait for Redis: subscribed once it answers", channel.decode())

    async def detach(self, user_id: Any, member: Member) -> None:
        key = user_key(user_id)
        async with self.lock:
            await super().detach(user_id, member)
            if key not in self.users:
                await self.subscriptions.remove(self.user_channel(key))

    async def join(self, room: str, member: Member) -> None:
        await self.add_subscribed(self.members, room, self.channel(room), member)

    async def leave(self, room: str, member: Member) -> None:
        # At once, not once the lock is free: nothing more of the room for it.
        self.forget(room, member)
        await self.release(room)

    async def release(self, room: str) -> None:
        async with self.lock:
            if room not in self.members:
                await self.subscriptions.remove(self.channel(room))

    async def aclose(self) -> None:
        if self.retry is not None:
            self.retry.cancel()
        await super().aclose()
        await self.subscriptions.close()
        try:
            await self.client.aclose()
        except REDIS_FAILED:
            pass

    async def heard(self, channel: bytes, data: bytes) -> None:
        name = channel.decode()
        if name.startswith(self.user_prefix):
            await self.heard_for_user(name[len(self.user_prefix):], data)
            return
        room = name[len(self.prefix):]
        try:
            frames = list(unpack(data))
        except ValueError:
            log.warning("dropped a live message of room %s that is not a packed list of frames", room)
            return
        for seq, text in frames:
            await self.deliver(room, seq, text)

    async def heard_for_user(self, key: str, data: bytes) -> None:
        try:
            frames = list(unpack_for_user(data))
        except ValueError:
            log.warning("dropped a message for user %s that is not a packed list of frames", key)
            return
        for room, text in frames:
            await self.deliver_to_user(key, room, text)

    async def send_queued(self) -> None:
        while self.outbox or self.user_outbox or self.unsent_left:
            if not await self.send(take(self.outbox), take(self.user_outbox)) and not (self.outbox or self.user_outbox):
                # Only `room.left` frames wait: tried again after a pause, not in a busy loop.
                self.retry_later()
                return

    def retry_later(self) -> None:
        if self.retry is None:
            self.retry = asyncio.get_running_loop().call_later(self.retry_pause, self.retry_now)
            self.retry_pause = min(self.retry_pause * 2, LONGEST_RETRY)

    def retry_now(self) -> None:
        self.retry = None
        self.start_pump()

    async def send(self, batch: list[tuple[str, int | None, str]],
                   to_users: Sequence[tuple[str, str | None, str]] = ()) -> bool:
        # `room.left` frames that failed before go first, in their order.
        if self.unsent_left:
            to_users = [*self.unsent_left, *to_users]
            self.unsent_left.clear()
        by_room: dict[str, list[tuple[int | None, str]]] = {}
        for room, seq, text in batch:
            by_room.setdefault(room, []).append((seq, text))
        by_user: dict[str, list[tuple[str | None, str]]] = {}
        for key, room, text in to_users:
            by_user.setdefault(key, []).append((room, text))
        frames = len(batch) + len(to_users)
        try:
            pipe = self.client.pipeline(transaction=False)
            publish = pipe.spublish if self.sharded else pipe.publish
            # Users' frames first: a `room.left` before any frame of the room queued after it.
            for key, user_frames in by_user.items():
                publish(self.user_channel(key), pack_for_user(user_frames))
            for room, room_frames in by_room.items():
                publish(self.channel(room), pack(room_frames))
            await pipe.execute()
        except REDIS_FAILED as exc:
            self.keep_unsent_left(to_users)
            lost = frames - len(self.unsent_left)
            metrics.FANOUT_FRAMES.labels("lost").inc(lost)
            log.warning("%d live frames lost, Redis publish failed: %s; %d room.left frames wait to be published",
                        lost, exc, len(self.unsent_left))
            return False
        self.retry_pause = FIRST_RETRY
        metrics.FANOUT_FRAMES.labels("published").inc(frames)
        return True

    def keep_unsent_left(self, to_users: Sequence[tuple[str, str | None, str]]) -> None:
        for item in to_users:
            if left_room(item[2]) is not None:
                queue(self.unsent_left, item)


def make_hub() -> Hub:
    conf = get_settings()
    if not conf.REDIS_URL:
        return Hub(membership_interval=conf.MEMBERSHIP_CHECK_INTERVAL)
    return RedisHub(conf.REDIS_URL, timeout=conf.REDIS_TIMEOUT, sharded=conf.REDIS_CLUSTER,
                    membership_interval=conf.MEMBERSHIP_CHECK_INTERVAL)


def get_hub() -> Hub:
    """This event loop's hub (a server process has one loop; tests have one per test), closed with the loop."""
    return runtime().part("hub", make_hub, close=lambda hub: hub.aclose())
