"""Exactly-once execution of commands: claim, apply, record, replay.

Two layers keep a command's effect single:

* **Redis, the fast window.** A claim is taken atomically (`SET NX` with a
  lease of `CLAIM_LEASE`); the result then replaces the claim for
  `DEDUP_WINDOW`. Duplicates that Redis knows never touch the database. Only
  the claim's owner may release it (compare-and-delete), so a slow first
  attempt can never free a newer claim.
* **The database, the durable record.** The effect and a `CommandRecord` are
  written in one transaction, and a unique constraint on `(user, command_id)`
  makes a second commit impossible. A duplicate Redis does not know (window
  passed, data flushed, server down) fails on that constraint, is rolled back
  and answered from the record.

Redis failing is never taken for "already claimed": every Redis error falls
through to the database path, which alone still guarantees exactly-once.

Commands that arrive together in one process run as one batch
(`execute_async`, `execute_together`, `batches`, `execute_many_async`): one
Redis call (a script) from the event loop for all claims, one statement for
all commands of a type with a batch form (from the loop itself with
`apply_recorded_many_async`, as `room.post` has: messaging/core/loopdb.py), one
thread hop for the handlers of the others, and one call for all results and
releases. A batch of known duplicates or of posts never leaves the event
loop. Each command keeps its own outcome.
"""
from __future__ import annotations

import asyncio
import contextvars
import logging
import threading
import time
import uuid
import weakref
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass, field
from functools import cached_property
from itertools import groupby
from typing import Any, Callable, Iterator

import orjson
import redis
import redis.asyncio as aioredis
from channels.db import database_sync_to_async
from django.db import DatabaseError, IntegrityError, connection, connections, transaction

from ..conf import get_settings
from ..models import CommandRecord
from ..ops import metrics
from .batches import Batcher
from .exceptions import CommandError, IdReused, InProgress, Unavailable
from .handlers import BatchEntries, CommandContext, Handler
from .protocol import Command
from .redis_clients import loop_client

log = logging.getLogger(__name__)

CLAIM_PREFIX = b"c:"
RESULT_PREFIX = b"r:"

# A batch's claims in one call, so redis-py packs and parses one command, not
# one per key. KEYS: the commands' keys; ARGV: the claim, the lease in ms.
# Per key, its current value if it has one, else false once the claim is set
# (a key twice in one batch: the second copy finds the first one's claim).
_CLAIM_MANY = """
local found = {}
for i, key in ipairs(KEYS) do
    local v = redis.call('GET', key)
    if v then
        found[i] = v
    else
        redis.call('SET', key, ARGV[1], 'PX', ARGV[2])
        found[i] = false
    end
end
return found
"""
# A batch's results and releases in one call. KEYS: the results' keys, then
# the claims to release; ARGV: how many results, the window in seconds, the
# owner's claim, then the results. A claim is released only if it is still
# this owner's.
_FINISH = """
local results = tonumber(ARGV[1])
for i = 1, results do
    redis.call('SET', KEYS[i], ARGV[3 + i], 'EX', ARGV[2])
end
for i = results + 1, #KEYS do
    if redis.call('GET', KEYS[i]) == ARGV[3] then redis.call('DEL', KEYS[i]) end
end
return results
"""


@dataclass
class Outcome:
    """The result of one delivery of a command."""

    data: dict
    dup: bool = False
    # Where a duplicate's answer came from: "redis" (the fast window) or
    # "database" (the durable record); None when this delivery applied it.
    source: str | None = None
    replies: list[dict] = field(default_factory=list)
    broadcasts: list[tuple[str, dict]] = field(default_factory=list)
    to_users: list[tuple[Any, str | None, dict]] = field(default_factory=list)

    @classmethod
    def applied(cls, data: dict, ctx: CommandContext) -> Outcome:
        """This delivery applied the command: its result, and the frames its handler left on `ctx`."""
        return cls(data=data, replies=ctx.replies, broadcasts=ctx.broadcasts, to_users=ctx.to_users)


class ClaimBusy(Exception):
    """Another attempt holds the claim on this command; ask again shortly."""


@dataclass(frozen=True)
class Stored:
    fingerprint: str
    data: dict


class ClaimStore:
    """The fast window. The base class knows nothing: every command goes to the database."""

    def claim_many(self, keys: list[str], owner: str) -> list[Stored | bool | None]:
        """Per key: True, claimed for `owner`; a `Stored`, the result; False, someone else's claim; None, unknown."""
        return [None] * len(keys)

    def claim(self, key: str, owner: str) -> Stored | bool | None:
        return self.claim_many([key], owner)[0]

    def finish(self, results: list[tuple[str, Stored]], releases: list[str], owner: str) -> None:
        """Keep each `(key, result)` for the window; release each claim of `releases` that `owner` still holds."""

    # From the event loop. The base class does no I/O, so it answers in
    # place; a store that waits on anything overrides both.

    async def aclaim_many(self, keys: list[str], owner: str) -> list[Stored | bool | None]:
        """`claim_many` on the event loop."""
        return self.claim_many(keys, owner)

    async def afinish(self, results: list[tuple[str, Stored]], releases: list[str], owner: str) -> None:
        """`finish` on the event loop."""
        self.finish(results, releases, owner)


class RedisClaimStore(ClaimStore):
    """Claims and results in Redis, with short timeouts and a breaker.

    After a Redis error the store answers "unknown" for `cooldown` seconds
    without trying, so an outage costs one timeout, not one per command.
    """

    def __init__(self, url: str, *, lease: float, window: int, timeout: float = 0.5, cooldown: float = 1.0) -> None:
        self.client = redis.Redis.from_url(
            url, socket_timeout=timeout, socket_connect_timeout=timeout, retry_on_timeout=False
        )
        self.lease_ms = int(lease * 1000)
        self.window = int(window)
        self.cooldown = cooldown
        self._down_until = 0.0
        # redis-py's scripts load themselves again into a Redis that forgot
        # them (restarted, flushed) and resend the call.
        self._claim_many = self.client.register_script(_CLAIM_MANY)
        self._finish = self.client.register_script(_FINISH)
        self.url = url
        self.timeout = timeout
        # The scripts on each event loop's client (`redis_clients`).
        self._async: weakref.WeakKeyDictionary[aioredis.Redis, tuple] = weakref.WeakKeyDictionary()

    def _async_scripts(self) -> tuple:
        client = loop_client(self.url, self.timeout)
        scripts = self._async.get(client)
        if scripts is None:
            scripts = self._async[client] = (client.register_script(_CLAIM_MANY), client.register_script(_FINISH))
        return scripts

    def _available(self) -> bool:
        return time.monotonic() >= self._down_until

    def _failed(self, action: str, exc: Exception) -> None:
        self._down_until = time.monotonic() + self.cooldown
        log.warning("redis %s failed, using the database path: %s", action, exc)

    def claim_many(self, keys: list[str], owner: str) -> list[Stored | bool | None]:
        if not keys or not self._available():
            return [None] * len(keys)
        try:
            replies = self._claim_many(keys=keys, args=[CLAIM_PREFIX + owner.encode(), self.lease_ms])
        except redis.RedisError as exc:
            self._failed("claim", exc)
            return [None] * len(keys)
        return self._claims(replies)

    async def aclaim_many(self, keys: list[str], owner: str) -> list[Stored | bool | None]:
        if not keys or not self._available():
            return [None] * len(keys)
        try:
            claim_many, _ = self._async_scripts()
            replies = await claim_many(keys=keys, args=[CLAIM_PREFIX + owner.encode(), self.lease_ms])
        except (OSError, redis.RedisError) as exc:
            self._failed("claim", exc)
            return [None] * len(keys)
        return self._claims(replies)

    @staticmethod
    def _claims(replies: list[bytes | None]) -> list[Stored | bool | None]:
        results: list[Stored | bool | None] = []
        for current in replies:
            if current is None:
                results.append(True)
            elif current.startswith(RESULT_PREFIX):
                fingerprint, data = orjson.loads(current[len(RESULT_PREFIX):])
                results.append(Stored(fingerprint, data))
            else:
                results.append(False)
        return results

    def finish(self, results: list[tuple[str, Stored]], releases: list[str], owner: str) -> None:
        call = self._finish_call(results, releases, owner)
        if call is None:
            return
        try:
            self._finish(**call)
        except redis.RedisError as exc:
            # An unreleased claim frees its id when the lease runs out.
            self._failed("store", exc)

    async def afinish(self, results: list[tuple[str, Stored]], releases: list[str], owner: str) -> None:
        call = self._finish_call(results, releases, owner)
        if call is None:
            return
        try:
            _, finish = self._async_scripts()
            await finish(**call)
        except (OSError, redis.RedisError) as exc:
            self._failed("store", exc)

    def _finish_call(self, results: list[tuple[str, Stored]], releases: list[str], owner: str) -> dict | None:
        """The finish script's keys and arguments; None if there is nothing to do."""
        if not self._available():
            # Keep no results while Redis is down; still try the releases.
            results = []
        if not results and not releases:
            return None
        keys: list[str] = []
        values: list[bytes] = []
        releases = list(releases)
        for key, stored in results:
            try:
                values.append(RESULT_PREFIX + orjson.dumps([stored.fingerprint, stored.data]))
            except orjson.JSONEncodeError as exc:
                # A handler's result orjson cannot write (the database's JSON
                # encoder took it): this command alone is not kept here, and
                # its claim is released, so a retry finds the durable record.
                log.warning("result of %s not kept in redis: %s", key, exc)
                releases.append(key)
                continue
            keys.append(key)
        if not keys and not releases:
            return None
        # Each result is written whatever claim is there now: it is committed,
        # so it is the truth for every attempt, the owner's or a newer one's.
        return {"keys": keys + releases, "args": [len(keys), self.window, CLAIM_PREFIX + owner.encode(), *values]}


_store: ClaimStore | None = None


def get_claim_store() -> ClaimStore:
    global _store
    if _store is None:
        conf = get_settings()
        if conf.REDIS_URL:
            _store = RedisClaimStore(
                conf.REDIS_URL, lease=conf.CLAIM_LEASE, window=conf.DEDUP_WINDOW, timeout=conf.REDIS_TIMEOUT
            )
        else:
            _store = ClaimStore()
    return _store


def reset_claim_store() -> None:
    """Forget the store, so the next command builds one from current settings."""
    global _store
    _store = None


def claim_key(user_id: Any, command_id: str) -> str:
    return f"messaging:cmd:{user_id}:{command_id}"


@dataclass
class Delivery:
    """One delivery of an exactly-once command, as a batch carries it."""

    user: Any
    command: Command
    handler: Handler
    data: Any
    # The caller's context variables (the command's log scope), for the work
    # done for this delivery alone on the batch's thread.
    context: contextvars.Context | None = None
    fingerprint: str = field(init=False)

    def __post_init__(self) -> None:
        # Now, before the delivery joins a batch: a command whose data cannot
        # be fingerprinted raises here, for its caller alone (`Invalid`).
        self.fingerprint = self.command.fingerprint

    @cached_property
    def key(self) -> str:
        return claim_key(self.user.pk, self.command.id)

    def run(self, func: Callable[..., Any], *args: Any) -> Any:
        return func(*args) if self.context is None else self.context.run(func, *args)


# What applying a claimed delivery came to: its outcome (or the exception for
# its caller), and the result Redis learns for it (None: release its claim).
Applied = tuple[Outcome | Exception, Stored | None]


def execute(user: Any, command: Command, handler: Handler, data: Any) -> Outcome:
    """Apply one delivery of `command` (already validated into `data`), at most once.

    Raises `CommandError` for refusals and `ClaimBusy` while another attempt
    runs; any other failure is released, logged and raised as `Unavailable`.
    """
    if not handler.exactly_once:
        return _guarded(_apply, user, command, handler, data)
    (result,) = execute_many([Delivery(user, command, handler, data)])
    if isinstance(result, Exception):
        raise result
    return result


def execute_many(deliveries: list[Delivery]) -> list[Outcome | Exception]:
    """`execute` for a batch of exactly-once deliveries: per delivery, in order,
    its `Outcome` or the exception `execute` would raise for it.

    One Redis round trip claims them all; the claimed ones (and those Redis
    could not answer for) are applied; one more round trip keeps their
    results and releases the claims of those that failed.
    """
    store = get_claim_store()
    # One owner for the batch's claims: each is still released only by the
    # attempt that took it, and a second copy of a command in the same batch
    # finds the first one's claim.
    owner = uuid.uuid4().hex
    batch = Batch(deliveries, store.claim_many([d.key for d in deliveries], owner))
    try:
        batch.apply()
    finally:
        store.finish(*batch.finish(), owner)
    return batch.results()


async def execute_many_async(deliveries: list[Delivery]) -> list[Outcome | Exception]:
    """`execute_many` from the event loop: the claims and results go to Redis
    from the loop, and so does the statement of a type with a form for the
    loop (`room.post`'s, messaging/core/loopdb.py); only the rest take a database thread.

    Known duplicates and posts are answered without leaving the loop. On a
    thread, every reply had to wait for the GIL, which the busy loop holds for
    up to the switch interval (5 ms); on the loop it is one more event.
    """
    store = get_claim_store()
    owner = uuid.uuid4().hex
    started = time.perf_counter()
    batch = Batch(deliveries, await store.aclaim_many([d.key for d in deliveries], owner))
    claimed = time.perf_counter()
    try:
        await batch.apply_async()
    finally:
        applied = time.perf_counter()
        await store.afinish(*batch.finish(), owner)
        # Where a batch's cycle goes, which bounds how often a process's batches can run.
        metrics.batch_phases(claimed - started, applied - claimed, time.perf_counter() - applied)
    return batch.results()


class Batch:
    """One run of a batch of deliveries: its claims, what was applied, and each delivery's result."""

    def __init__(self, deliveries: list[Delivery], claims: list[Stored | bool | None]) -> None:
        self.deliveries = deliveries
        self.claims = claims
        self.outcomes: list[Outcome | Exception | None] = [None] * len(deliveries)
        # The deliveries to apply: claimed, or unknown to Redis.
        self.claimed: list[int] = []
        for i, (delivery, claim) in enumerate(zip(deliveries, claims)):
            if isinstance(claim, Stored):
                self.outcomes[i] = _replay_or_refuse(claim, delivery.fingerprint, source="redis")
            elif claim is False:
                self.outcomes[i] = ClaimBusy()
            else:
                self.claimed.append(i)
        self.applied: dict[int, Applied] = {}

    def apply(self, indexes: list[int] | None = None, alone: tuple[int, ...] = ()) -> None:
        """Apply the claimed deliveries, or those of `indexes`, and those of
        `alone` one by one (database work), keeping each one's result as it is done."""
        for i, done in _apply_claimed(self.deliveries, self.claimed if indexes is None else indexes):
            self.applied[i] = done
        for i in alone:
            self.applied[i] = self.deliveries[i].run(_apply_alone, self.deliveries[i])

    async def apply_async(self) -> None:
        """`apply` from the event loop: each type's deliveries through its form
        for the loop where it has one, the rest in one database thread hop."""
        rest: list[int] = []
        alone: list[int] = []
        for handler, indexes in _by_type(self.deliveries, self.claimed):
            applied = None
            if handler.apply_recorded_many_async is not None:
                applied = await _apply_batch_on_loop(handler, [self.deliveries[i] for i in indexes])
            if applied is None:
                rest.extend(indexes)
            elif applied is RUN_ALONE:
                alone.extend(indexes)
            else:
                self.applied.update(zip(indexes, applied))
        if rest or alone:
            await run_in_db_thread(self.apply, rest, tuple(alone))

    def finish(self) -> tuple[list[tuple[str, Stored]], list[str]]:
        """What Redis learns: each applied delivery's result (or its record's);
        the others (refused, failed, interrupted) give back their claims."""
        learned = {i: stored for i, (_, stored) in self.applied.items() if stored is not None}
        releases = [self.deliveries[i].key for i in self.claimed if self.claims[i] is True and i not in learned]
        return [(self.deliveries[i].key, stored) for i, stored in learned.items()], releases

    def results(self) -> list[Outcome | Exception]:
        for i, (result, _) in self.applied.items():
            self.outcomes[i] = result
        return self.outcomes  # type: ignore[return-value]


def _by_type(deliveries: list[Delivery], indexes: list[int]) -> Iterator[tuple[Handler, list[int]]]:
    """The `indexes` grouped by their deliveries' type, each group in the given order."""
    by_type = sorted(indexes, key=lambda i: deliveries[i].handler.type)
    for _, group in groupby(by_type, key=lambda i: deliveries[i].handler.type):
        of_type = list(group)
        yield deliveries[of_type[0]].handler, of_type


def _apply_claimed(deliveries: list[Delivery], claimed: list[int]) -> Iterator[tuple[int, Applied]]:
    """Apply the claimed deliveries, yielding each one's index as it is done: each
    type's in one statement where the type has a batch form, else one by one."""
    for handler, indexes in _by_type(deliveries, claimed):
        batch = None
        if len(indexes) > 1 and handler.apply_recorded_many is not None:
            batch = _apply_batch(handler, [deliveries[i] for i in indexes])
        if batch is not None:
            yield from zip(indexes, batch)
            continue
        for i in indexes:
            yield i, deliveries[i].run(_apply_alone, deliveries[i])


def _apply_alone(delivery: Delivery) -> Applied:
    """One claimed delivery on its own: its result, and what Redis should learn of it."""
    user, command, fingerprint = delivery.user, delivery.command, delivery.fingerprint
    try:
        outcome = _guarded(_apply, user, command, delivery.handler, delivery.data, fingerprint=fingerprint)
    except IntegrityError:
        # Applied before, where Redis does not remember it: the durable
        # record answers, and the rollback took our attempt's effect back.
        try:
            stored = _recall(user, command.id)
        except Unavailable as exc:
            return exc, None
        if stored is None:
            log.exception("integrity error without a record for %s %s", command.t, command.id)
            return Unavailable(), None
        return _replay_or_refuse(stored, fingerprint, source="database"), stored
    except CommandError as exc:
        return exc, None
    return outcome, Stored(fingerprint, outcome.data)


def _apply_batch(handler: Handler, deliveries: list[Delivery]) -> list[Applied] | None:
    """Several claimed deliveries of one type through its `apply_recorded_many`; None where it has no batch form.

    A duplicate among them (one Redis forgot, or two copies of one command)
    fails the whole statement on a unique constraint: then each delivery runs
    alone, where the record answers a duplicate.
    """
    assert handler.apply_recorded_many is not None
    entries = _batch_entries(handler, deliveries)
    try:
        with _one_statement():
            results = handler.apply_recorded_many(entries)
    except IntegrityError:
        return [d.run(_apply_alone, d) for d in deliveries]
    except Exception as exc:
        return _batch_failed(handler, deliveries, exc)
    return None if results is None else _batch_applied(entries, results)


# What `_apply_batch_on_loop` answers when the batch's statement failed on a
# unique constraint: each delivery must run alone (on a database thread).
RUN_ALONE: Any = object()


async def _apply_batch_on_loop(handler: Handler, deliveries: list[Delivery]) -> list[Applied] | None:
    """`_apply_batch` through the type's `apply_recorded_many_async`, on the event
    loop; None where it has no form there, `RUN_ALONE` after a unique violation."""
    assert handler.apply_recorded_many_async is not None
    entries = _batch_entries(handler, deliveries)
    try:
        results = await handler.apply_recorded_many_async(entries)
    except IntegrityError:
        return RUN_ALONE
    except Exception as exc:
        return _batch_failed(handler, deliveries, exc)
    return None if results is None else _batch_applied(entries, results)


def _batch_entries(handler: Handler, deliveries: list[Delivery]) -> BatchEntries:
    contexts = [CommandContext(user=d.user, command_id=d.command.id, type=handler.type) for d in deliveries]
    return [(ctx, d.data, d.fingerprint) for ctx, d in zip(contexts, deliveries)]


def _batch_failed(handler: Handler, deliveries: list[Delivery], exc: Exception) -> list[Applied]:
    """Every delivery of a batch whose statement failed is `unavailable` (nothing applied)."""
    if isinstance(exc, DatabaseError):
        log.warning("storage failed for a batch of %d %s: %s", len(deliveries), handler.type, exc)
    else:
        log.error("handler failed for a batch of %d %s", len(deliveries), handler.type, exc_info=exc)
    return [(Unavailable(), None) for _ in deliveries]


def _batch_applied(entries: BatchEntries, results: list) -> list[Applied]:
    applied: list[Applied] = []
    for (ctx, _, fingerprint), result in zip(entries, results, strict=True):
        if isinstance(result, CommandError):
            applied.append((result, None))
        else:
            outcome = Outcome.applied(result, ctx)
            applied.append((outcome, Stored(fingerprint, result)))
    return applied


def _one_statement() -> AbstractContextManager:
    """One statement is its own transaction in autocommit mode; inside a
    caller's transaction a savepoint keeps a unique violation local."""
    return transaction.atomic() if connection.in_atomic_block else nullcontext()


@contextmanager
def _unexpected_as_unavailable(user: Any, command: Command) -> Iterator[None]:
    """Unexpected failures inside, logged, become `Unavailable`; refusals and IntegrityError pass."""
    try:
        yield
    except (CommandError, IntegrityError):
        raise
    except DatabaseError as exc:
        log.warning("storage failed for %s %s by user %s: %s", command.t, command.id, user.pk, exc)
        raise Unavailable() from exc
    except Exception as exc:
        log.exception("handler failed for %s %s by user %s", command.t, command.id, user.pk)
        raise Unavailable() from exc


def _guarded(apply: Any, user: Any, command: Command, handler: Handler, data: Any, **kwargs: Any) -> Outcome:
    """Run `apply`, turning unexpected failures into `Unavailable` (IntegrityError passes)."""
    with _unexpected_as_unavailable(user, command):
        return apply(user, command, handler, data, **kwargs)


def _apply(user: Any, command: Command, handler: Handler, data: Any, *, fingerprint: str | None = None) -> Outcome:
    ctx = CommandContext(user=user, command_id=command.id, type=handler.type)
    if fingerprint is not None and handler.apply_recorded is not None:
        with _one_statement():
            result = handler.apply_recorded(ctx, data, fingerprint)
        if result is not None:
            return Outcome.applied(result, ctx)
    with transaction.atomic():
        result = handler.apply(ctx, data)
        if fingerprint is not None:
            CommandRecord.objects.create(
                user=user, command_id=command.id, type=handler.type, fingerprint=fingerprint, result=result
            )
    return Outcome.applied(result, ctx)


def _recall(user: Any, command_id: str) -> Stored | None:
    try:
        row = CommandRecord.objects.filter(user=user, command_id=command_id).values_list("fingerprint", "result").first()
    except DatabaseError as exc:
        raise Unavailable() from exc
    return Stored(*row) if row else None


def _replay_or_refuse(stored: Stored, fingerprint: str, *, source: str) -> Outcome | IdReused:
    if stored.fingerprint != fingerprint:
        return IdReused()
    return Outcome(data=stored.data, dup=True, source=source)


_db_threads: ThreadPoolExecutor | None = None
_db_thread_count = 0


async def run_in_db_thread(func: Any, *args: Any) -> Any:
    """Run `func(*args)` where database work runs: channels' one thread, or a pool.

    With `DB_THREADS` = 0 every call of the process queues for one thread
    (channels' thread-sensitive mode), so the round trips of all commands are
    paid one after another. A pool of N threads, each with its own persistent
    connection, lets N commands wait on PostgreSQL and Redis at once.
    """
    threads = get_settings().DB_THREADS
    if not threads:
        return await database_sync_to_async(func)(*args)
    global _db_threads, _db_thread_count
    if _db_threads is None:
        _db_threads = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="messaging-db")
        _db_thread_count = threads
    # Still channels' wrapper: it keeps each thread's connection upkeep
    # (CONN_MAX_AGE, broken connections) around every call.
    return await database_sync_to_async(func, thread_sensitive=False, executor=_db_threads)(*args)


def close_db_threads() -> None:
    """Close the pool threads' connections and the pool (tests, shutdown)."""
    global _db_threads
    pool, _db_threads = _db_threads, None
    if pool is None:
        return
    # One task per thread: the barrier keeps each task on a thread of its own.
    barrier = threading.Barrier(_db_thread_count)

    def close() -> None:
        barrier.wait(timeout=10)
        connections.close_all()

    for future in [pool.submit(close) for _ in range(_db_thread_count)]:
        future.result()
    pool.shutdown()


# Most commands one batch carries: the statement of a batch grows with it.
BATCH_LIMIT = 64
# How long a batch runs alone before the next may start beside it.
BATCH_OVERLAP_AFTER = 0.02

_batchers: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Batcher[Delivery]] = weakref.WeakKeyDictionary()


def _batcher() -> Batcher[Delivery]:
    """This event loop's batcher: one batch at a time, more (up to half the
    database threads) only while the running ones are slow.

    Posts to the same rooms gain nothing from batches running at once: they
    queue for the rooms' row locks, and the batches are smaller. With two at
    once from the start, the benchmark's 16 sockets made batches of 5.5
    commands; one at a time made them larger and the full path faster, two
    processes by 1.4x (docs/PERFORMANCE.md). A batch that runs longer than
    `BATCH_OVERLAP_AFTER` (a slow statement, a lock held elsewhere) no longer
    holds up the rest: the next one starts beside it. The other threads
    serve the commands that are neither batched nor run on the loop (room.join)
    and the session checks.
    """
    loop = asyncio.get_running_loop()
    batcher = _batchers.get(loop)
    if batcher is None:
        runners = max(1, get_settings().DB_THREADS // 2)
        batcher = _batchers[loop] = Batcher(
            _run_batch, runners=runners, limit=BATCH_LIMIT, overlap_after=BATCH_OVERLAP_AFTER
        )
    return batcher


async def _run_batch(deliveries: list[Delivery]) -> list[Outcome | Exception]:
    metrics.BATCH_SIZE.observe(len(deliveries))
    return await execute_many_async(deliveries)


async def execute_async(user: Any, command: Command, handler: Handler, data: Any) -> Outcome:
    """`execute` from async code.

    Exactly-once commands that arrive together run as one batch on one thread
    hop (`execute_many`); other commands take a hop each. A duplicate that
    finds the first attempt still running polls for its result for up to
    `IN_PROGRESS_WAIT` seconds, then gets `in_progress`. Each poll is a full
    attempt, so if the first one failed and released its claim, this delivery
    takes over and applies the command itself.
    """
    if not handler.exactly_once:
        if handler.apply_async is not None:
            outcome = await _apply_on_loop(user, command, handler, data)
            if outcome is not None:
                return outcome
        return await run_in_db_thread(execute, user, command, handler, data)
    [result] = await execute_together([Delivery(user, command, handler, data, contextvars.copy_context())])
    if isinstance(result, BaseException):
        raise result
    return result


async def _apply_on_loop(user: Any, command: Command, handler: Handler, data: Any) -> Outcome | None:
    """`handler.apply_async` of a command that is not exactly-once, failures
    handled as `_guarded` does; None where it has no loop form."""
    ctx = CommandContext(user=user, command_id=command.id, type=handler.type)
    with _unexpected_as_unavailable(user, command):
        result = await handler.apply_async(ctx, data)
    if result is None:
        return None
    return Outcome.applied(result, ctx)


async def execute_together(deliveries: list[Delivery]) -> list[Outcome | Exception]:
    """Exactly-once deliveries that must take effect in this order (one sender's
    consecutive posts): per delivery its `Outcome` or the exception for its caller.

    They run in one batch, in order, so a room's seqs follow their order. One
    that finds its command's first attempt still running polls as in
    `execute_async`, and if that attempt failed, applies after the others.
    """
    deadline = time.monotonic() + get_settings().IN_PROGRESS_WAIT
    results = await _batcher().submit_many(deliveries)
    busy = [i for i, result in enumerate(results) if isinstance(result, ClaimBusy)]
    if busy:
        polled = await asyncio.gather(*(_poll(deliveries[i], deadline) for i in busy), return_exceptions=True)
        for i, result in zip(busy, polled):
            results[i] = result
    return results


async def _poll(delivery: Delivery, deadline: float) -> Outcome:
    """Submit `delivery` again until its command's other attempt is done, or raise `InProgress` at `deadline`."""
    batcher = _batcher()
    pause = 0.01
    while True:
        if time.monotonic() >= deadline:
            raise InProgress()
        await asyncio.sleep(pause)
        pause = min(pause * 2, 0.1)
        try:
            return await batcher.submit(delivery)
        except ClaimBusy:
            pass
