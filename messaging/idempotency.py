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
"""
from __future__ import annotations

import asyncio
import logging
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from contextlib import nullcontext
from dataclasses import dataclass, field
from typing import Any

import orjson
import redis
from channels.db import database_sync_to_async
from django.db import DatabaseError, IntegrityError, connection, connections, transaction

from .conf import get_settings
from .exceptions import CommandError, IdReused, InProgress, Unavailable
from .handlers import CommandContext, Handler
from .models import CommandRecord
from .protocol import Command

log = logging.getLogger(__name__)

CLAIM_PREFIX = b"c:"
RESULT_PREFIX = b"r:"

# Returns the current value if the key exists, else sets the claim and nil.
_CLAIM = """
local v = redis.call('GET', KEYS[1])
if v then return v end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return false
"""
# Deletes the key only if it still holds this owner's claim.
_RELEASE = """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
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


class ClaimBusy(Exception):
    """Another attempt holds the claim on this command; ask again shortly."""


@dataclass(frozen=True)
class Stored:
    fingerprint: str
    data: dict


class ClaimStore:
    """The fast window. The base class knows nothing: every command goes to the database."""

    def claim(self, key: str, owner: str) -> Stored | bool | None:
        """True: claimed. A `Stored`: the result. False: someone else's claim. None: unknown."""
        return None

    def store(self, key: str, stored: Stored) -> None:
        pass

    def release(self, key: str, owner: str) -> None:
        pass


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
        self._claim = self.client.register_script(_CLAIM)
        self._release = self.client.register_script(_RELEASE)

    def _available(self) -> bool:
        return time.monotonic() >= self._down_until

    def _failed(self, action: str, exc: Exception) -> None:
        self._down_until = time.monotonic() + self.cooldown
        log.warning("redis %s failed, using the database path: %s", action, exc)

    def claim(self, key: str, owner: str) -> Stored | bool | None:
        if not self._available():
            return None
        try:
            current = self._claim(keys=[key], args=[CLAIM_PREFIX + owner.encode(), self.lease_ms])
        except redis.RedisError as exc:
            self._failed("claim", exc)
            return None
        if current is None:
            return True
        if current.startswith(RESULT_PREFIX):
            fingerprint, data = orjson.loads(current[len(RESULT_PREFIX):])
            return Stored(fingerprint, data)
        return False

    def store(self, key: str, stored: Stored) -> None:
        # Written whatever claim is there now: the result is committed, so it
        # is the truth for every attempt, the owner's or a newer one's.
        if not self._available():
            return
        try:
            self.client.set(key, RESULT_PREFIX + orjson.dumps([stored.fingerprint, stored.data]), ex=self.window)
        except redis.RedisError as exc:
            self._failed("store", exc)

    def release(self, key: str, owner: str) -> None:
        try:
            self._release(keys=[key], args=[CLAIM_PREFIX + owner.encode()])
        except redis.RedisError as exc:
            # The lease frees the id when it runs out.
            self._failed("release", exc)


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


def execute(user: Any, command: Command, handler: Handler, data: Any) -> Outcome:
    """Apply one delivery of `command` (already validated into `data`), at most once.

    Raises `CommandError` for refusals and `ClaimBusy` while another attempt
    runs; any other failure is released, logged and raised as `Unavailable`.
    """
    if not handler.exactly_once:
        return _guarded(_apply, user, command, handler, data)

    store = get_claim_store()
    key = claim_key(user.pk, command.id)
    fingerprint = command.fingerprint
    owner = uuid.uuid4().hex
    claimed = store.claim(key, owner)
    if isinstance(claimed, Stored):
        return _replay(claimed, fingerprint, source="redis")
    if claimed is False:
        raise ClaimBusy()

    try:
        outcome = _guarded(_apply, user, command, handler, data, fingerprint=fingerprint)
    except IntegrityError:
        # Applied before, where Redis does not remember it: the durable
        # record answers, and the rollback took our attempt's effect back.
        stored = _recall(user, command.id)
        if stored is None:
            if claimed:
                store.release(key, owner)
            log.exception("integrity error without a record for %s %s", command.t, command.id)
            raise Unavailable() from None
        store.store(key, stored)
        return _replay(stored, fingerprint, source="database")
    except BaseException:
        if claimed:
            store.release(key, owner)
        raise
    store.store(key, Stored(fingerprint, outcome.data))
    return outcome


def _guarded(apply: Any, user: Any, command: Command, handler: Handler, data: Any, **kwargs: Any) -> Outcome:
    """Run `apply`, turning unexpected failures into `Unavailable` (IntegrityError passes)."""
    try:
        return apply(user, command, handler, data, **kwargs)
    except (CommandError, IntegrityError):
        raise
    except DatabaseError as exc:
        log.warning("storage failed for %s %s by user %s: %s", command.t, command.id, user.pk, exc)
        raise Unavailable() from exc
    except Exception as exc:
        log.exception("handler failed for %s %s by user %s", command.t, command.id, user.pk)
        raise Unavailable() from exc


def _apply(user: Any, command: Command, handler: Handler, data: Any, *, fingerprint: str | None = None) -> Outcome:
    ctx = CommandContext(user=user, command_id=command.id, type=handler.type)
    if fingerprint is not None and handler.apply_recorded is not None:
        # One statement is its own transaction in autocommit mode; inside a
        # caller's transaction a savepoint keeps a unique violation local.
        with transaction.atomic() if connection.in_atomic_block else nullcontext():
            result = handler.apply_recorded(ctx, data, fingerprint)
        if result is not None:
            return Outcome(data=result, replies=ctx.replies, broadcasts=ctx.broadcasts)
    with transaction.atomic():
        result = handler.apply(ctx, data)
        if fingerprint is not None:
            CommandRecord.objects.create(
                user=user, command_id=command.id, type=handler.type, fingerprint=fingerprint, result=result
            )
    return Outcome(data=result, replies=ctx.replies, broadcasts=ctx.broadcasts)


def _recall(user: Any, command_id: str) -> Stored | None:
    try:
        row = CommandRecord.objects.filter(user=user, command_id=command_id).values_list("fingerprint", "result").first()
    except DatabaseError as exc:
        raise Unavailable() from exc
    return Stored(*row) if row else None


def _replay(stored: Stored, fingerprint: str, *, source: str) -> Outcome:
    if stored.fingerprint != fingerprint:
        raise IdReused()
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


async def execute_async(user: Any, command: Command, handler: Handler, data: Any) -> Outcome:
    """`execute` from async code: one thread hop per attempt.

    A duplicate that finds the first attempt still running polls for its
    result for up to `IN_PROGRESS_WAIT` seconds, then gets `in_progress`. Each
    poll is a full attempt, so if the first one failed and released its
    claim, this delivery takes over and applies the command itself.
    """
    deadline = time.monotonic() + get_settings().IN_PROGRESS_WAIT
    pause = 0.01
    while True:
        try:
            return await run_in_db_thread(execute, user, command, handler, data)
        except ClaimBusy:
            if time.monotonic() >= deadline:
                raise InProgress() from None
        await asyncio.sleep(pause)
        pause = min(pause * 2, 0.1)
