"""Fan-out across processes through Redis Pub/Sub (messaging/transport/fanout.py says how and why)."""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from django.core.exceptions import ImproperlyConfigured

from ..chat.private import left_room
from ..core.redis_clients import REDIS_FAILED
from ..core.runtime import async_client
from ..ops import metrics
from .hub import Hub, Member, queue, take, user_key
from .packing import pack, pack_for_user, unpack, unpack_for_user
from .subscriptions import Subscriptions

if TYPE_CHECKING:
    from ..conf import MessagingSettings

log = logging.getLogger("messaging.transport.fanout")

# Seconds before a `room.left` whose publish failed is tried again, doubling while it fails.
FIRST_RETRY, LONGEST_RETRY = 0.1, 2.0


class RedisHub(Hub):
    """Fan-out across processes through Redis Pub/Sub (sharded Pub/Sub on a
    Redis Cluster: `SPUBLISH`, `SSUBSCRIBE`).

    Pub/Sub channels ignore the Redis db number, so the channel names carry
    it: two projects (or test runs) on different dbs of one server never hear
    each other.
    """

    @classmethod
    def from_settings(cls, conf: MessagingSettings) -> Hub:
        if not conf.REDIS_URL:
            raise ImproperlyConfigured(f"MESSAGING['HUB'] {cls.__name__} needs MESSAGING['REDIS_URL']")
        return cls(
            conf.REDIS_URL,
            timeout=conf.REDIS_TIMEOUT,
            sharded=conf.REDIS_CLUSTER,
            membership_interval=conf.MEMBERSHIP_CHECK_INTERVAL,
        )

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
        self.subscriptions = Subscriptions(
            url, self.heard, timeout=timeout, sharded=sharded, connected=self.memberships.check
        )
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
        async with self.lock:
            first = key not in self.users
            await super().attach(user_id, member)
            if first:
                await self.subscribe(self.user_channel(key))

    async def add_subscribed(self, sockets: dict[str, set[Member]], key: str, channel: bytes, member: Member) -> None:
        """`member` among the `sockets` of the room `key`, subscribed to
        `channel` first if it is the first there (`attach` does the same for
        a user's sockets, kept in a tuple).

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
            await self.subscribe(channel)

    async def subscribe(self, channel: bytes) -> None:
        """Subscribe to `channel`, under the lock; while Redis does not answer, it stays wanted."""
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
        await self.subscriptions.aclose()
        try:
            await self.client.aclose()
        except REDIS_FAILED:
            pass

    async def heard(self, channel: bytes, data: bytes) -> None:
        name = channel.decode()
        if name.startswith(self.user_prefix):
            await self.heard_for_user(name[len(self.user_prefix) :], data)
            return
        room = name[len(self.prefix) :]
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

    async def send(
        self, batch: list[tuple[str, int | None, str]], to_users: Sequence[tuple[str, str | None, str]] = ()
    ) -> bool:
        # `room.left` frames that failed before go first, in their order.
        if self.unsent_left:
            to_users = [*self.unsent_left, *to_users]
            self.unsent_left.clear()
        by_room: dict[str, list[tuple[int | None, str]]] = {}
        for room, seq, text in batch:
            by_room.setdefault(room, []).append((seq, text))
        by_user: dict[str, list[tuple[str | None, str]]] = {}
        for key, only_in, text in to_users:
            by_user.setdefault(key, []).append((only_in, text))
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
            log.warning(
                "%d live frames lost, Redis publish failed: %s; %d room.left frames wait to be published",
                lost,
                exc,
                len(self.unsent_left),
            )
            return False
        self.retry_pause = FIRST_RETRY
        metrics.FANOUT_FRAMES.labels("published").inc(frames)
        return True

    def keep_unsent_left(self, to_users: Sequence[tuple[str, str | None, str]]) -> None:
        for item in to_users:
            if left_room(item[2]) is not None:
                queue(self.unsent_left, item)
