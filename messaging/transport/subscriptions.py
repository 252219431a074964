"""The Pub/Sub channels a process listens to, kept subscribed through Redis failures.

`Subscriptions` holds the channels the hub wants (messaging/transport/fanout.py)
and a listener per place they are subscribed at: the one Redis, or, on a
Redis Cluster, the master that owns each channel's slot (sharded Pub/Sub:
`SSUBSCRIBE`, whose messages stay on the shard that owns the channel instead
of crossing every node of the cluster as `PUBLISH`'s do).

A listener that loses its connection (Redis restarted, a master killed, a
network cut) waits, connects again and subscribes every channel still wanted
there, with a pause that doubles from `FIRST_PAUSE` up to `LONGEST_PAUSE`
while the failures go on. On a cluster it first asks the cluster where each
of its channels lives now, so after a failover its channels move to the
replica that took over. A channel added while its place is unreachable is
still wanted: it is subscribed as soon as the place answers. Frames
published meanwhile are lost to live delivery (not to the rooms: clients
catch up by seq), never delivered twice. Each time a listener has
subscribed its channels, and before it hands on anything they carry, it
awaits the owner's `connected` (the hub's check of what its sockets may
still hear: a `room.left` lost meanwhile; messaging/transport/memberships.py);
what comes meanwhile waits in the connection.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any, cast

import redis
from redis.asyncio.connection import parse_url
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff

from ..core.redis_clients import REDIS_FAILED, Client, ClientPubSub, Cluster
from ..core.runtime import async_client, by_slot

log = logging.getLogger(__name__)

FIRST_PAUSE = 0.1
LONGEST_PAUSE = 2.0

# The place of channels whose cluster master is not known yet.
UNPLACED = ("?", 0)

Handler = Callable[[bytes, bytes], Awaitable[None]]
Connected = Callable[[], Awaitable[Any]]

# What leaves a subscription unconfirmed: no confirmation in time, or Redis failing.
NOT_CONFIRMED: tuple[type[BaseException], ...] = (TimeoutError, *REDIS_FAILED)


class Subscriptions:
    def __init__(
        self, url: str, handler: Handler, *, timeout: float, sharded: bool, connected: Connected | None = None
    ) -> None:
        self.url = url
        self.handler = handler
        self.connected = connected
        self.timeout = timeout
        self.sharded = sharded
        # Each wanted channel, with the place it is subscribed at (None: the one Redis).
        self.placed: dict[bytes, Any] = {}
        self.listeners: dict[Any, Listener] = {}
        self.confirmations: dict[bytes, asyncio.Future[None]] = {}
        # On a cluster, what tells a channel's master (CLUSTER SLOTS); it sends no Pub/Sub itself.
        # Sharded only on a cluster (`REDIS_CLUSTER`), where `async_client` makes a `Cluster`.
        self.cluster = cast(Cluster, async_client(url, timeout=timeout, connect_timeout=timeout)) if sharded else None
        self.topology_known = False

    async def add(self, channel: bytes) -> bool:
        """Want `channel` from now on; whether Redis confirmed the subscription
        (within `4 x timeout`). Unconfirmed, it is still subscribed as soon as its
        place answers."""
        place = await self.place_of(channel)
        self.placed[channel] = place
        listener = self.listener_at(place)
        if listener.failing:
            # Redis did not answer its last attempt: it subscribes every
            # channel of its place once it can; the caller need not wait.
            return False
        confirmed = self.confirmations[channel] = asyncio.get_running_loop().create_future()
        try:
            if listener.connected:
                await listener.subscribe([channel])
            # Else it is connecting, and subscribes this channel with the rest.
            await asyncio.wait_for(confirmed, self.timeout * 4)
            return True
        except NOT_CONFIRMED as exc:
            log.warning("subscribing to %s not confirmed, the listener will retry: %r", channel, exc)
            return False
        finally:
            if self.confirmations.get(channel) is confirmed:
                del self.confirmations[channel]

    async def remove(self, channel: bytes) -> None:
        """No longer want `channel`; its place's listener stops when it wants nothing more."""
        if channel not in self.placed:
            return
        place = self.placed.pop(channel)
        listener = self.listeners.get(place)
        if listener is None:
            return
        if not self.wants_any_at(place):
            del self.listeners[place]
            await listener.stop()
            return
        try:
            await listener.unsubscribe(channel)
        except REDIS_FAILED as exc:
            # Still subscribed at worst: the hub drops what no socket here wants.
            log.warning("unsubscribing from %s failed: %s", channel, exc)

    async def aclose(self) -> None:
        listeners, self.listeners = list(self.listeners.values()), {}
        self.placed.clear()
        for listener in listeners:
            await listener.stop()
        if self.cluster is not None:
            await self.cluster.aclose()

    def channels_at(self, place: Any) -> list[bytes]:
        return [channel for channel, at in self.placed.items() if at == place]

    def wants_any_at(self, place: Any) -> bool:
        # Stops at the first channel of `place` (with one Redis, the first of
        # all), where listing them on every `remove` made a mass disconnect
        # quadratic: each closing socket's user channel scanned every other's.
        return any(at == place for at in self.placed.values())

    def listener_at(self, place: Any) -> Listener:
        listener = self.listeners.get(place)
        if listener is None:
            listener = self.listeners[place] = Listener(self, place)
            listener.start()
        return listener

    def confirmed(self, channel: bytes) -> None:
        future = self.confirmations.get(channel)
        if future is not None and not future.done():
            future.set_result(None)

    async def place_of(self, channel: bytes) -> Any:
        """Where `channel` is subscribed: None for one Redis; its master's (host, port) on a cluster."""
        if self.cluster is None:
            return None
        try:
            if not self.topology_known:
                await self.cluster.initialize()
                self.topology_known = True
            node = self.cluster.get_node_from_key(channel)  # type: ignore[arg-type]  # typed str in redis-py; it encodes any key
        except REDIS_FAILED as exc:
            log.warning("no master known for %s yet: %s", channel, exc)
            return UNPLACED
        return UNPLACED if node is None else (node.host, node.port)

    async def replace(self, place: Any) -> None:
        """After a failure at `place`: on a cluster, learn the slots again and
        move that place's channels to the masters that own them now."""
        if self.cluster is None:
            return
        try:
            await self.cluster.read_slots()
            self.topology_known = True
        except REDIS_FAILED as exc:
            log.warning("the cluster's slots could not be read: %s", exc)
            return
        for channel in self.channels_at(place):
            moved = await self.place_of(channel)
            if moved != place:
                self.placed[channel] = moved
                self.listener_at(moved)

    def client_for(self, place: Any) -> Client:
        """A client for one listener's connection: no socket timeout (it waits
        for the next frame forever) and no retries of its own (a failure
        reaches the listener, which knows what to subscribe again)."""
        options: dict[str, Any] = {
            "socket_timeout": None,
            "socket_connect_timeout": self.timeout,
            "retry": Retry(NoBackoff(), 0),
        }
        if place is None:
            return Client.from_url(self.url, **options)  # type: ignore[return-value]  # typed `Redis` in redis-py; it makes a `cls`
        kwargs = {**parse_url(self.url), "host": place[0], "port": place[1], "db": 0}
        return Client(**kwargs, **options)


class Listener:
    """One connection subscribed to the channels of one place, reading what they carry."""

    def __init__(self, owner: Subscriptions, place: Any) -> None:
        self.owner = owner
        self.place = place
        self.connected = False
        # Whether its last attempt failed (until Redis confirms a subscription again).
        self.failing = False
        self.client: Client | None = None
        self.pubsub: ClientPubSub | None = None
        self.task: asyncio.Task[None] | None = None
        # The next wait before connecting again; back to the first once Redis confirms a subscription.
        self.pause = FIRST_PAUSE

    def start(self) -> None:
        self.task = asyncio.create_task(self.run())

    async def stop(self) -> None:
        if self.task is not None:
            self.task.cancel()
            await asyncio.gather(self.task, return_exceptions=True)

    async def subscribe(self, channels: list[bytes]) -> None:
        assert self.pubsub is not None
        if not self.owner.sharded:
            await self.pubsub.subscribe(*channels)
            return
        # One SSUBSCRIBE names channels of one slot only.
        for indexes in by_slot([channel.decode() for channel in channels]).values():
            await self.pubsub.ssubscribe(*(channels[i] for i in indexes))

    async def unsubscribe(self, channel: bytes) -> None:
        if self.pubsub is None or not self.connected:
            return
        if self.owner.sharded:
            await self.pubsub.sunsubscribe(channel)
        else:
            await self.pubsub.unsubscribe(channel)

    async def run(self) -> None:
        while True:
            if not self.owner.wants_any_at(self.place):
                # Nothing is wanted here any more (moved elsewhere, or removed).
                if self.owner.listeners.get(self.place) is self:
                    del self.owner.listeners[self.place]
                return
            try:
                if self.place == UNPLACED:
                    raise redis.ConnectionError("the cluster has not said where these channels live")
                await self.listen()
            except REDIS_FAILED as exc:
                self.failing = True
                log.warning("live frames paused, Redis subscription at %s failed: %s", self.place or "redis", exc)
            finally:
                self.connected = False
                await self.close_pubsub()
            await asyncio.sleep(self.pause)
            self.pause = min(self.pause * 2, LONGEST_PAUSE)
            await self.owner.replace(self.place)

    async def listen(self) -> None:
        """Connect, subscribe what this place wants, and hand on what comes
        until the connection fails (raises)."""
        self.client = self.owner.client_for(self.place)
        self.pubsub = self.client.pubsub()
        await self.pubsub.connect()
        # From here on a new channel of this place is subscribed by its `add`;
        # the ones wanted until now are subscribed here, with no await between.
        self.connected = True
        wanted = self.owner.channels_at(self.place)
        if wanted:
            await self.subscribe(wanted)
            await self.caught_up()
        while True:
            message = await self.pubsub.get_message(timeout=None)
            if message is None:
                continue
            kind = message["type"]
            if kind in ("message", "smessage"):
                await self.owner.handler(message["channel"], message["data"])
            elif kind in ("subscribe", "ssubscribe"):
                self.pause = FIRST_PAUSE
                self.failing = False
                self.owner.confirmed(message["channel"])

    async def caught_up(self) -> None:
        """The owner's `connected`, before anything the channels carry is read: what it
        finds lost while this connection was away is dealt with first."""
        if self.owner.connected is None:
            return
        try:
            await self.owner.connected()
        except Exception:
            log.exception("the check after subscribing at %s failed", self.place or "redis")

    async def close_pubsub(self) -> None:
        pubsub, client, self.pubsub, self.client = self.pubsub, self.client, None, None
        try:
            if pubsub is not None:
                await pubsub.aclose()  # type: ignore[no-untyped-call]  # untyped in redis-py
            if client is not None:
                await client.aclose()
        except REDIS_FAILED:
            pass
