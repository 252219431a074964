"""Presence (PROTOCOL.md 1.1): a user is online while a socket of theirs is open on any process.

Each process counts its own sockets per user. With Redis it also keeps, per
user, a sorted set of the processes holding one (`messaging:<db>:presence:
<user>`, each process scored with when its heartbeat expires) and, per
process, the set of its users. The first socket of a user on a process adds
the process to the user's set; the last one's close removes it; each write
is followed in the same pipeline by a count of the processes left, so of
two processes opening and closing at once, the one that acts last sees the
other (online stays true, or the last frame says false). A user's
`presence` frame goes to their rooms when the count goes from none to some
(`online: true`) or back (`false`), not for every socket.

Every `PRESENCE_BEAT` seconds a process renews its entries, for all its
users in one round trip of a few commands whatever their number: a script
(`RENEW`) renews `RENEW_CHUNK` users' entries inside Redis, so the process
does not build and parse two commands per user (with Redis Cluster, whose
users' keys lie on many nodes, one pipeline of two commands per user), and
the process's one task does it for every socket. It then looks for processes whose heartbeat
expired (killed, frozen): the first process to claim one (`ZREM` answers 1
to one caller) takes its users out and announces those who are offline
everywhere. Entries expire `PRESENCE_TTL - 1.5 * PRESENCE_BEAT` seconds
after their last beat (15 s by default), so a process that dies takes its
users offline within `PRESENCE_TTL` while another process lives
(docs/RELIABILITY.md).

Without Redis (`make run`) the process's own counts are the whole truth.
Presence is best effort like live fan-out: a Redis error is logged and the
process's own counts answer. `online` in member lists is added here, on
the event loop, to the results of the types whose `Handler.member_list` is set, so the
database thread that built the list does not wait on Redis.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
import uuid
from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import Any, cast

import redis.asyncio as aioredis
from django.contrib.auth import get_user_model
from django.utils import timezone
from redis.exceptions import NoScriptError, ResponseError

from ..conf import get_settings
from ..core.protocol import encode
from ..core.redis_clients import REDIS_FAILED
from ..core.runtime import clustered, runtime
from ..models import Membership, Room
from .fanout import get_hub, user_key

log = logging.getLogger(__name__)

# The heartbeat's renewal of users' entries, inside Redis: KEYS are the users'
# sets, ARGV the process, its entries' expiry and the sets' TTL.
RENEW = """
for i = 1, #KEYS do
  redis.call('ZADD', KEYS[i], ARGV[2], ARGV[1])
  redis.call('EXPIRE', KEYS[i], ARGV[3])
end
return #KEYS
"""
# Users renewed by one call of the script: Redis runs nothing else meanwhile
# (5,000 users take it about 3 ms), and a beat sends one call per chunk, all in one pipeline.
RENEW_CHUNK = 5000
# Users' opens and closes written by one pipeline. They queue while one is
# written, so a storm (a restart's reconnects, a mass disconnect) takes one
# connection of the loop's pool, which the claim store and the rate window
# share (100 connections), instead of one per user: 16,000 users opening and
# closing at once exhausted it ("Too many connections") for all three.
WRITE_CHUNK = 1000


def presence_frame(room: str, user_id: Any, online: bool) -> dict[str, Any]:
    # `user` first: the user's own sockets skip it (messaging/transport/typing.py's `own_prefix`).
    return {"t": "presence", "d": {"user": user_id, "room": room, "online": online}}


ROOMS_SQL = """
SELECT r.slug FROM {membership} m JOIN {room} r ON r.id = m.room_id
WHERE m.user_id = %(user)s AND m.joined_at <= %(at)s ORDER BY m.joined_at DESC LIMIT %(limit)s
"""


async def rooms_of(user_id: Any, limit: int, at: datetime) -> list[str]:
    """The rooms a presence frame of the user goes to: the newest `limit` they
    had joined `at` the open or close it tells (a room joined after a socket
    opened has the user `online` in its join ack). One statement through the
    gateway, on the event loop's connection where it has one: a storm of
    reconnects does not queue its announcements behind the commands' thread."""
    sql = ROOMS_SQL.format(membership=Membership._meta.db_table, room=Room._meta.db_table)
    return [slug for (slug,) in await runtime().gateway.fetch(sql, {"user": user_id, "limit": limit, "at": at})]


class Presence:
    """One event loop's presence: its sockets per user, its heartbeat, its announcements."""

    def __init__(self, url: str | None, *, timeout: float, ttl: float, beat: float, rooms: int) -> None:
        self.ttl = ttl
        self.beat = beat
        self.rooms = rooms
        self.process = uuid.uuid4().hex
        self.sockets: dict[str, int] = {}
        self.client: aioredis.Redis | None = None
        self.beating: asyncio.Task[Any] | None = None
        # The `RENEW` script's SHA once Redis has it; False where it cannot run it (Cluster, scripting off).
        self.renew: str | bool | None = None
        # Per user, the last of their writes and announcements not yet done (`in_turn`).
        self.turns: dict[str, asyncio.Task[Any]] = {}
        # Opens and closes waiting for the pipeline being written (at most one
        # per user with a socket here: a user's next waits for their last, `in_turn`).
        self.pending: list[tuple[str, bool, asyncio.Future[int]]] = []
        self.writing: asyncio.Task[None] | None = None
        if url:
            # The loop's client the claim store and the rate window share: no pool of its own.
            self.client = runtime().redis_client(url, timeout)
            # A cluster has db 0 only (and its client no single pool).
            db = 0 if clustered() else self.client.connection_pool.connection_kwargs.get("db", 0)
            self.prefix = f"messaging:{db}:presence:"

    def user_set(self, key: str) -> str:
        return f"{self.prefix}user:{key}"

    def process_set(self, process: str) -> str:
        return f"{self.prefix}process:{process}"

    @property
    def processes(self) -> str:
        return f"{self.prefix}processes"

    def expiry(self) -> float:
        # Renewed every beat, an entry outlives one late beat by half a beat;
        # and its expiry plus the next beat of a living process, which finds
        # it, is half a beat within the TTL (for the announcement's own time).
        return time.time() + self.ttl - 1.5 * self.beat

    def opened(self, user_id: Any) -> Awaitable[None]:
        """A socket of `user_id` opened here: if it is their first here, the
        write to Redis and, if it is their first anywhere, the announcement,
        in a task (the socket does not wait for them); returns it."""
        key = user_key(user_id)
        count = self.sockets.get(key, 0)
        self.sockets[key] = count + 1
        if count:
            return done()
        self.start_beating()
        return self.in_turn(key, functools.partial(self.changed, user_id, key, timezone.now(), online=True))

    def closed(self, user_id: Any) -> Awaitable[None]:
        """A socket of `user_id` closed here: `opened`'s counterpart for their last one."""
        key = user_key(user_id)
        count = self.sockets.get(key, 0) - 1
        if count > 0:
            self.sockets[key] = count
            return done()
        self.sockets.pop(key, None)
        return self.in_turn(key, functools.partial(self.changed, user_id, key, timezone.now(), online=False))

    async def changed(self, user_id: Any, key: str, at: datetime, *, online: bool) -> None:
        if not await self.write(key, add=online):
            await self.send_presence(user_id, online, at)

    def in_turn(self, key: str, step: Callable[[], Awaitable[None]]) -> asyncio.Task[Any]:
        """Run `step()` in a task once the user's steps before it are done: a
        quick open and close write and announce in that order, so the last
        frame the rooms hear is the user's state."""
        previous = self.turns.get(key)

        async def run() -> None:
            if previous is not None:
                await asyncio.wait([previous])
            await step()

        task = asyncio.ensure_future(run())
        # Held here until done (the loop keeps only weak references to tasks).
        self.turns[key] = task
        task.add_done_callback(lambda t: self.turns.pop(key) if self.turns.get(key) is t else None)
        return task

    async def write(self, key: str, *, add: bool) -> int:
        """Add (or remove) this process in the user's set; how many other processes hold a socket of theirs.

        Queued for the next pipeline (`write_pending`) with the other users' opens and closes."""
        if self.client is None:
            return 0
        written: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        self.pending.append((key, add, written))
        if self.writing is None or self.writing.done():
            self.writing = asyncio.ensure_future(self.write_pending())
        return await written

    async def write_pending(self) -> None:
        """Write the queued opens and closes, `WRITE_CHUNK` users a pipeline, one pipeline at a time."""
        batch: list[tuple[str, bool, asyncio.Future[int]]] = []
        try:
            while self.pending:
                batch = self.pending[:WRITE_CHUNK]
                del self.pending[:WRITE_CHUNK]
                try:
                    holders = await self.write_batch([(key, add) for key, add, _ in batch])
                except REDIS_FAILED as exc:
                    log.warning("presence of %d users not written to Redis: %s", len(batch), exc)
                    holders = [0] * len(batch)
                for (_, _, written), others in zip(batch, holders):
                    if not written.done():  # its waiter was cancelled meanwhile
                        written.set_result(others)
        finally:
            # Closed with the loop: no waiter is left waiting for a write that will not come.
            for _, _, written in batch + self.pending:
                written.cancel()

    async def write_batch(self, changes: list[tuple[str, bool]]) -> list[int]:
        """One pipeline for `changes` (user, added): per user, how many other processes hold a socket of theirs.

        Each user's write is followed by a count of the processes left in
        their set, so of two processes opening and closing at once the one
        that acts last sees the other."""
        assert self.client is not None
        now, expiry, ttl = time.time(), self.expiry(), int(self.ttl) + 1
        pipe = self.client.pipeline(transaction=False)
        if any(add for _, add in changes):
            # Listed from its first user on, so it is reaped if it dies before its first beat.
            pipe.zadd(self.processes, {self.process: expiry})
        counts = []
        for key, add in changes:
            if add:
                pipe.zadd(self.user_set(key), {self.process: expiry})
                pipe.expire(self.user_set(key), ttl)
                pipe.sadd(self.process_set(self.process), key)
            else:
                pipe.zrem(self.user_set(key), self.process)
                pipe.srem(self.process_set(self.process), key)
            counts.append(len(pipe))
            pipe.zcount(self.user_set(key), now, "+inf")
        replies = await pipe.execute()
        return [replies[at] - (1 if add else 0) for at, (_, add) in zip(counts, changes)]

    async def send_presence(self, user_id: Any, online: bool, at: datetime) -> None:
        """The user's `presence` frame to the rooms they were a member of `at` the change."""
        try:
            rooms = await rooms_of(user_id, self.rooms, at)
        except Exception:
            log.warning("presence of user %s not announced: their rooms could not be read", user_id, exc_info=True)
            return
        hub = get_hub()
        for room in rooms:
            hub.publish(room, None, encode(presence_frame(room, user_id, online)))

    async def online(self, user_ids: list[Any]) -> set[str]:
        """Of `user_ids`, the `user_key`s of those online: here, or anywhere by
        Redis (one pipeline); with Redis failing, those here."""
        keys = [user_key(u) for u in user_ids]
        found = {key for key in keys if self.sockets.get(key)}
        rest = [key for key in keys if key not in found]
        if self.client is None or not rest:
            return found
        now = time.time()
        pipe = self.client.pipeline(transaction=False)
        for key in rest:
            pipe.zcount(self.user_set(key), now, "+inf")
        try:
            counts = await pipe.execute()
        except REDIS_FAILED as exc:
            log.warning("presence not read from Redis, this process's own sockets answer: %s", exc)
            return found
        return found | {key for key, count in zip(rest, counts) if count}

    def close(self) -> None:
        for task in (self.beating, self.writing):
            if task is not None:
                task.cancel()

    def start_beating(self) -> None:
        if self.client is not None and (self.beating is None or self.beating.done()):
            self.beating = asyncio.ensure_future(self.beat_forever())

    async def beat_forever(self) -> None:
        while self.sockets:
            await asyncio.sleep(self.beat)
            try:
                await self.heartbeat()
                await self.reap()
            except REDIS_FAILED as exc:
                log.warning("presence heartbeat failed: %s", exc)

    async def heartbeat(self) -> None:
        """Renew this process's entries, all its users in one round trip: a
        call of `RENEW` per `RENEW_CHUNK` of them (a command pair per user
        where Redis cannot run it)."""
        assert self.client is not None
        if self.renew is None:
            self.renew = await self.load_renew()
        try:
            await self.renew_entries()
        except NoScriptError:
            # Redis forgot its scripts (a restart, SCRIPT FLUSH): load it again, once.
            self.renew = await self.load_renew()
            await self.renew_entries()

    async def load_renew(self) -> str | bool:
        assert self.client is not None
        if clustered():
            return False
        try:
            return str(await self.client.script_load(RENEW))
        except ResponseError as exc:
            log.warning("presence renews with a command pair per user: Redis runs no scripts (%s)", exc)
            return False

    async def renew_entries(self) -> None:
        assert self.client is not None
        expiry, ttl = self.expiry(), int(self.ttl) + 1
        pipe = self.client.pipeline(transaction=False)
        pipe.zadd(self.processes, {self.process: expiry})
        pipe.expire(self.process_set(self.process), ttl)
        sets = [self.user_set(key) for key in self.sockets]
        if isinstance(self.renew, str):
            for start in range(0, len(sets), RENEW_CHUNK):
                chunk = sets[start : start + RENEW_CHUNK]
                pipe.evalsha(self.renew, len(chunk), *chunk, self.process, expiry, ttl)
        else:
            for user_set in sets:
                pipe.zadd(user_set, {self.process: expiry})
                pipe.expire(user_set, ttl)
        await pipe.execute()

    async def reap(self) -> None:
        """Take the users of processes whose heartbeat expired offline, announcing those offline everywhere."""
        assert self.client is not None
        now = time.time()
        # Members are bytes: the client does not decode responses (redis-py types them `bytes | str`).
        for member in cast("list[bytes]", await self.client.zrangebyscore(self.processes, "-inf", now)):
            if not await self.client.zrem(self.processes, member):
                continue  # another process reaps it
            dead = member.decode()
            keys = [k.decode() for k in cast("set[bytes]", await self.client.smembers(self.process_set(dead)))]
            pipe = self.client.pipeline(transaction=False)
            for key in keys:
                pipe.zrem(self.user_set(key), dead)
                pipe.zcount(self.user_set(key), now, "+inf")
            pipe.delete(self.process_set(dead))
            replies = await pipe.execute()
            for n, key in enumerate(keys):
                if not replies[2 * n + 1] and key not in self.sockets:
                    user_id = get_user_model()._meta.pk.to_python(key)
                    self.in_turn(key, functools.partial(self.send_presence, user_id, False, timezone.now()))


def done() -> asyncio.Future[None]:
    future = asyncio.get_running_loop().create_future()
    future.set_result(None)
    return future


def get_presence() -> Presence:
    """This event loop's presence (a server process has one loop; tests have one per test), closed with the loop."""
    conf = get_settings()
    return runtime().part(
        "presence",
        lambda: Presence(
            conf.REDIS_URL,
            timeout=conf.REDIS_TIMEOUT,
            ttl=conf.PRESENCE_TTL,
            beat=conf.PRESENCE_BEAT,
            rooms=conf.PRESENCE_ROOMS,
        ),
        close=lambda presence: presence.close(),
    )


async def add_online(entries: list[dict[str, Any]] | None) -> None:
    """Member entries (with their `user` ids) with `online` added: one Redis round trip for the lot.
    An entry that has it already (a member of another deployment, as its room's home said) keeps it."""
    entries = [entry for entry in entries or () if "online" not in entry]
    if not entries:
        return
    online = await get_presence().online([entry["user"] for entry in entries])
    for entry in entries:
        entry["online"] = user_key(entry["user"]) in online
