"""Rate limits: per socket, and per user (or client address) over every socket and process.

* **Per socket, a token bucket**: `burst` commands at once, refilled at `rate`
  per second. Kept in the consumer, no I/O. What a command sends back beyond
  its ack (a join's backlog) is charged to it afterwards, in proportion to
  its size (`REPLY_BYTES_PER_TOKEN`).
* **Per user, a fixed window** of `limit` commands per `window` seconds,
  counted in Redis (`INCRBY` on a key per window, in batches: `RedisWindow`)
  so that one user's sockets on several server processes share one budget. Without Redis, or while it fails,
  each process counts on its own: the limit then holds per process.
* **The same window hit one round trip at a time** (`ahit_now`),
  exact across processes, for what is rare next to commands and must hold
  at its edge: handshakes and sign-ins per client address
  (messaging/transport/addresses.py).

A check answers how long to wait before trying again, 0 when the command may
run. Refused commands are not remembered (PROTOCOL rule 7), so the client's
retry with the same id runs afresh.

The limiters take plain arguments and never read Django settings; only
`user_limiter` builds one from them.
"""

from __future__ import annotations

import asyncio
import logging
import math
import threading
import time
from collections.abc import Callable
from typing import Any

import redis.asyncio as aioredis

from ..conf import get_settings
from ..core.redis_clients import REDIS_FAILED
from ..core.runtime import runtime

log = logging.getLogger(__name__)

Clock = Callable[[], float]


class TokenBucket:
    """`burst` commands at once, then `rate` per second."""

    __slots__ = ("rate", "burst", "clock", "tokens", "at")

    def __init__(self, rate: float, burst: int, clock: Clock = time.monotonic) -> None:
        if rate <= 0 or burst < 1:
            raise ValueError("a token bucket needs rate > 0 and burst >= 1")
        self.rate = rate
        self.burst = burst
        self.clock = clock
        self.tokens = float(burst)
        self.at = clock()

    def refill(self) -> None:
        now = self.clock()
        self.tokens = min(self.burst, self.tokens + (now - self.at) * self.rate)
        self.at = now

    def take(self) -> float:
        """Take a token: 0 if there was one, else the seconds until there is."""
        self.refill()
        if self.tokens >= 1:
            self.tokens -= 1
            return 0.0
        return (1 - self.tokens) / self.rate

    def charge(self, tokens: float) -> None:
        """Take `tokens` more for work already done (a command's replies): the bucket may go
        below zero, and `take` refuses until it has refilled past one again."""
        self.refill()
        self.tokens -= tokens


class LocalWindow:
    """`limit` hits per key per fixed window of `window` seconds, in this process.

    It holds at most `max_keys` keys: past that, those of earlier windows go,
    and if this window's alone are too many, the half hit longest ago (so a
    flood from many client addresses costs bounded memory, and the keys that
    keep hitting are the ones kept).
    """

    def __init__(self, limit: int, window: float, clock: Clock = time.time, *, max_keys: int = 10_000) -> None:
        if limit < 1 or window <= 0 or max_keys < 2:
            raise ValueError("a window needs limit >= 1, window > 0 and max_keys >= 2")
        self.limit = limit
        self.window = window
        self.clock = clock
        self.max_keys = max_keys
        # Oldest hit first: a key hit again moves to the end.
        self.counts: dict[Any, tuple[int, int]] = {}
        # Views count from threads, the event loop from its own.
        self._lock = threading.Lock()

    def hit(self, key: Any) -> float:
        now = self.clock()
        slot = math.floor(now / self.window)
        return self._wait(self._count(key, slot, 1), slot, now)

    def _count(self, key: Any, slot: int, n: int) -> int:
        """Add `n` hits in window `slot` to this process's count of `key`; that window's count."""
        with self._lock:
            seen_slot, count = self.counts.pop(key, (slot, 0))
            if seen_slot > slot:  # hits of a window that is over
                self.counts[key] = (seen_slot, count)
                return n
            count = count + n if seen_slot == slot else n
            self.counts[key] = (slot, count)
            if len(self.counts) > self.max_keys:
                self.counts = bounded(self.counts, slot, self.max_keys)
            return count

    async def ahit(self, key: Any) -> float:
        """`hit` from the event loop; subclasses that do I/O do it without blocking."""
        return self.hit(key)

    async def ahit_now(self, key: Any) -> float:
        """`ahit`, counted where the window is shared at once, not in a batch (this process's count is already exact)."""
        return self.hit(key)

    def _wait(self, count: int, slot: int, now: float) -> float:
        return 0.0 if count <= self.limit else (slot + 1) * self.window - now


def bounded(counts: dict[Any, tuple[int, int]], slot: int, max_keys: int) -> dict[Any, tuple[int, int]]:
    """`counts` without the keys of windows before `slot`, and if this one's
    are still over half of `max_keys`, without the oldest of those: pruned to
    half, the next pruning is `max_keys // 2` new keys away."""
    current = [(k, v) for k, v in counts.items() if v[0] >= slot]
    return dict(current[-(max_keys // 2) :])


def in_slot(counts: dict[Any, tuple[int, int]], key: Any, slot: int) -> int:
    """The count of `key` in window `slot`, from a dict of (slot, count) per key."""
    seen_slot, count = counts.get(key, (slot, 0))
    return count if seen_slot == slot else 0


class RedisWindow(LocalWindow):
    """The same window counted in Redis; falls back to this process's count while Redis fails.

    Asked from the event loop (`ahit`), without a Redis round trip per
    command: each process counts a user's hits locally and adds them to the
    shared count in Redis in batches (one pipelined `INCRBY` per user with
    hits, every `flush_interval` seconds while there are hits, in the
    background). Once a user's count as this process knows it reaches half
    the limit, every hit of that user asks Redis at once (with the hits not
    yet sent), so the refusal near the limit is decided on the shared count.
    The approximation: another process's hits reach this one up to
    `flush_interval` late, and hits batched when Redis fails are lost to the
    shared count (this process still counts them).
    The client belongs to the event loop that made it, so there is one per loop.
    """

    def __init__(
        self,
        url: str,
        limit: int,
        window: float,
        *,
        prefix: str = "messaging:rate:",
        timeout: float = 0.5,
        cooldown: float = 1.0,
        flush_interval: float = 0.25,
        clock: Clock = time.time,
        max_keys: int = 10_000,
    ) -> None:
        super().__init__(limit, window, clock, max_keys=max_keys)
        self.url = url
        # Each window's keys are `<prefix><key>:<window number>`.
        self.prefix = prefix
        self.timeout = timeout
        self.cooldown = cooldown
        self.flush_interval = flush_interval
        self._down_until = 0.0
        # Hits not yet in Redis, and the shared count Redis last answered, per key: (slot, n).
        self._pending: dict[Any, tuple[int, int]] = {}
        self._known: dict[Any, tuple[int, int]] = {}
        self._flushed_at = 0.0
        self._next_flush: asyncio.Task[Any] | None = None
        self._flushes: set[asyncio.Task[Any]] = set()

    def _client(self) -> aioredis.Redis:
        return runtime().redis_client(self.url, self.timeout)

    def _name(self, key: Any, slot: int) -> str:
        return f"{self.prefix}{key}:{slot}"

    def _redis_failed(self, exc: BaseException) -> None:
        self._down_until = time.monotonic() + self.cooldown
        log.warning("redis rate limit failed, counting in this process: %s", exc)

    async def ahit_now(self, key: Any) -> float:
        """One hit added to the shared count at once: one round trip (`INCR`,
        `EXPIRE`), so the limit is exact across processes at its edge. While
        Redis fails the hit counts in this process (and is added to what Redis
        answers later in the same window)."""
        now, slot, name = self._hit_now_of(key)
        if name is None:
            return self._counted_here(key, slot, now)
        try:
            async with self._client().pipeline(transaction=False) as pipe:
                pipe.incr(name)
                pipe.expire(name, math.ceil(self.window) + 1)
                count, _ = await pipe.execute()
        except REDIS_FAILED as exc:
            self._redis_failed(exc)
            return self._counted_here(key, slot, now)
        return self._wait(count + in_slot(self.counts, key, slot), slot, now)

    def _hit_now_of(self, key: Any) -> tuple[float, int, str | None]:
        """A hit's time, window, and Redis key (None while Redis is taken for down)."""
        now = self.clock()
        slot = math.floor(now / self.window)
        return now, slot, None if time.monotonic() < self._down_until else self._name(key, slot)

    def _counted_here(self, key: Any, slot: int, now: float) -> float:
        return self._wait(self._count(key, slot, 1), slot, now)

    async def ahit(self, key: Any) -> float:
        if time.monotonic() < self._down_until:
            return self.hit(key)
        now = self.clock()
        slot = math.floor(now / self.window)
        seen_slot, pending = self._pending.get(key, (slot, 0))
        pending = pending + 1 if seen_slot == slot else 1
        self._pending[key] = (slot, pending)
        known = in_slot(self._known, key, slot)
        # Hits of this window that Redis lost (it failed meanwhile) still count here.
        lost = in_slot(self.counts, key, slot)
        if known + lost + pending >= max(1, self.limit // 2):
            counts = await self._flush([key])
            if counts is None:
                # This hit was in the failed batch, so among the lost ones now.
                return self._wait(in_slot(self.counts, key, slot), slot, now)
            return self._wait(counts.get(key, known + pending) + lost, slot, now)
        task = self._next_flush
        if task is None or task.done() or task.get_loop() is not asyncio.get_running_loop():
            # A hit with none to follow must reach Redis too: the next batch is
            # due `flush_interval` after the last one, whether more hits come or not.
            delay = max(0.0, self._flushed_at + self.flush_interval - time.monotonic())
            task = self._next_flush = asyncio.ensure_future(self._flush_later(delay))
            self._flushes.add(task)
            task.add_done_callback(self._flushes.discard)
            # A loop that closes first would never run that batch: its runtime sends it at the close.
            runtime().part(f"rate-window-flush:{id(self)}", lambda: self, close=RedisWindow._flush_at_close)
        return 0.0

    async def _flush_at_close(self) -> None:
        """At the close of a loop that has a batch due: the pending hits go to
        Redis now, before its Redis clients close, so a stopping process leaves
        none of them out of the shared count."""
        task = self._next_flush
        if task is not None and not task.done() and task.get_loop() is asyncio.get_running_loop():
            task.cancel()
            self._next_flush = None
        await self._flush(None)

    async def _flush_later(self, delay: float) -> None:
        await asyncio.sleep(delay)
        # Hits from here on wait for the batch after this one.
        self._next_flush = None
        self._flushed_at = time.monotonic()
        await self._flush(None)

    async def _flush(self, keys: list[Any] | None) -> dict[Any, int] | None:
        """Add the pending hits of `keys` (None: all) to Redis; the shared counts, or None if Redis failed."""
        if keys is None:
            batch, self._pending = self._pending, {}
        else:
            batch = {key: self._pending.pop(key) for key in keys if key in self._pending}
        if not batch:
            return {}
        try:
            async with self._client().pipeline(transaction=False) as pipe:
                for key, (slot, n) in batch.items():
                    name = self._name(key, slot)
                    pipe.incrby(name, n)
                    pipe.expire(name, math.ceil(self.window) + 1)
                replies = await pipe.execute()
        except REDIS_FAILED as exc:
            # The batch is lost to Redis, not to this process: its own count
            # takes the hits, or each cooldown would let half the limit more in.
            for key, (slot, n) in batch.items():
                self._count(key, slot, n)
            self._redis_failed(exc)
            return None
        counts = {}
        for (key, (slot, _)), count in zip(batch.items(), replies[::2]):
            known_slot, known = self._known.get(key, (slot, 0))
            # Replies may land out of order: keep the highest count of the newest slot.
            self._known[key] = (slot, max(count, known) if known_slot == slot else count)
            counts[key] = self._known[key][1]
        if len(self._known) > self.max_keys:
            self._known = bounded(self._known, math.floor(self.clock() / self.window), self.max_keys)
        return counts


_user_limiter: tuple[Any, LocalWindow] | None = None


def user_limiter() -> LocalWindow:
    """The per-user window of this process, rebuilt when the settings change."""
    global _user_limiter
    conf = get_settings()
    if _user_limiter is None or _user_limiter[0] is not conf:
        if conf.REDIS_URL:
            limiter: LocalWindow = RedisWindow(
                conf.REDIS_URL,
                conf.USER_RATE_LIMIT,
                conf.USER_RATE_WINDOW,
                timeout=conf.REDIS_TIMEOUT,
                max_keys=conf.RATE_WINDOW_KEYS,
            )
        else:
            limiter = LocalWindow(conf.USER_RATE_LIMIT, conf.USER_RATE_WINDOW, max_keys=conf.RATE_WINDOW_KEYS)
        _user_limiter = (conf, limiter)
    return _user_limiter[1]
