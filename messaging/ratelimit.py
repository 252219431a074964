"""Rate limits on commands: per socket, and per user over every socket and process.

* **Per socket, a token bucket**: `burst` commands at once, refilled at `rate`
  per second. Kept in the consumer, no I/O.
* **Per user, a fixed window** of `limit` commands per `window` seconds,
  counted in Redis (`INCR` on a key per window) so that one user's sockets on
  several server processes share one budget. Without Redis, or while it fails,
  each process counts on its own: the limit then holds per process.

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
import time
import weakref
from typing import Any, Callable

import redis
import redis.asyncio as aioredis

from .conf import get_settings

log = logging.getLogger(__name__)

Clock = Callable[[], float]


class TokenBucket:
    """`burst` commands at once, then `rate` per second."""

    def __init__(self, rate: float, burst: int, clock: Clock = time.monotonic) -> None:
        if rate <= 0 or burst < 1:
            raise ValueError("a token bucket needs rate > 0 and burst >= 1")
        self.rate = rate
        self.burst = burst
        self.clock = clock
        self.tokens = float(burst)
        self.at = clock()

    def take(self) -> float:
        """Take a token: 0 if there was one, else the seconds until there is."""
        now = self.clock()
        self.tokens = min(self.burst, self.tokens + (now - self.at) * self.rate)
        self.at = now
        if self.tokens >= 1:
            self.tokens -= 1
            return 0.0
        return (1 - self.tokens) / self.rate


class LocalWindow:
    """`limit` hits per key per fixed window of `window` seconds, in this process."""

    def __init__(self, limit: int, window: float, clock: Clock = time.time) -> None:
        if limit < 1 or window <= 0:
            raise ValueError("a window needs limit >= 1 and window > 0")
        self.limit = limit
        self.window = window
        self.clock = clock
        self.counts: dict[Any, tuple[int, int]] = {}

    def hit(self, key: Any) -> float:
        now = self.clock()
        slot = math.floor(now / self.window)
        seen_slot, count = self.counts.get(key, (slot, 0))
        count = count + 1 if seen_slot == slot else 1
        self.counts[key] = (slot, count)
        if len(self.counts) > 10_000:
            # Bounded memory: drop every key of an earlier window.
            self.counts = {k: v for k, v in self.counts.items() if v[0] == slot}
        return self._wait(count, slot, now)

    async def ahit(self, key: Any) -> float:
        """`hit` from the event loop; subclasses that do I/O do it without blocking."""
        return self.hit(key)

    def _wait(self, count: int, slot: int, now: float) -> float:
        return 0.0 if count <= self.limit else (slot + 1) * self.window - now


class RedisWindow(LocalWindow):
    """The same window counted in Redis; falls back to this process's count while Redis fails.

    Asked from the event loop (`ahit`), with redis-py's asyncio client: one
    round trip per command and no thread hop. The client belongs to the event
    loop that made it, so there is one per loop.
    """

    def __init__(self, url: str, limit: int, window: float, *, timeout: float = 0.5, cooldown: float = 1.0,
                 clock: Clock = time.time) -> None:
        super().__init__(limit, window, clock)
        self.url = url
        self.timeout = timeout
        self.cooldown = cooldown
        self._down_until = 0.0
        self._clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, aioredis.Redis] = weakref.WeakKeyDictionary()

    def _client(self) -> aioredis.Redis:
        loop = asyncio.get_running_loop()
        client = self._clients.get(loop)
        if client is None:
            client = aioredis.Redis.from_url(self.url, socket_timeout=self.timeout, socket_connect_timeout=self.timeout)
            self._clients[loop] = client
        return client

    async def ahit(self, key: Any) -> float:
        if time.monotonic() < self._down_until:
            return self.hit(key)
        now = self.clock()
        slot = math.floor(now / self.window)
        name = f"messaging:rate:{key}:{slot}"
        try:
            async with self._client().pipeline(transaction=False) as pipe:
                count, _ = await pipe.incr(name).expire(name, math.ceil(self.window) + 1).execute()
        except (redis.RedisError, OSError) as exc:
            self._down_until = time.monotonic() + self.cooldown
            log.warning("redis rate limit failed, counting in this process: %s", exc)
            return self.hit(key)
        return self._wait(count, slot, now)


_user_limiter: tuple[Any, LocalWindow] | None = None


def user_limiter() -> LocalWindow:
    """The per-user window of this process, rebuilt when the settings change."""
    global _user_limiter
    conf = get_settings()
    if _user_limiter is None or _user_limiter[0] is not conf:
        if conf.REDIS_URL:
            limiter: LocalWindow = RedisWindow(
                conf.REDIS_URL, conf.USER_RATE_LIMIT, conf.USER_RATE_WINDOW, timeout=conf.REDIS_TIMEOUT
            )
        else:
            limiter = LocalWindow(conf.USER_RATE_LIMIT, conf.USER_RATE_WINDOW)
        _user_limiter = (conf, limiter)
    return _user_limiter[1]
