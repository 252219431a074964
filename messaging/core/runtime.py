"""One runtime per event loop: what the app keeps for a loop, created and closed together.

An asyncio object belongs to the loop it was made on (a server process has
one loop; a test, or each `async_to_sync` call, has its own). The runtime of
a loop holds its gateway (the loop's database connections), its batcher (the
pipeline's queue), its Redis clients, and what the layers above attach to it
(the transport's fan-out hub), and closes all of it when the loop closes:
`loop.close` is wrapped, as channels_redis does for its layers, so nothing
of a loop that is gone stays open.

With `REDIS_CLUSTER` the URL names one node of a Redis Cluster and the
clients are cluster clients: they learn the slots from that node and send
each command to the master of its key's slot (docs/OPERATIONS.md).
"""

from __future__ import annotations

import asyncio
import logging
import types
import weakref
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import redis.asyncio as aioredis
from redis.asyncio.retry import Retry as AsyncRetry
from redis.backoff import NoBackoff
from redis.crc import key_slot

from ..conf import get_settings
from ..ops.loopwatch import watch_loop
from .gateway import Gateway
from .redis_clients import Client, Cluster

log = logging.getLogger(__name__)

T = TypeVar("T")


def clustered() -> bool:
    return get_settings().REDIS_CLUSTER


def async_client(url: str, *, timeout: float | None, connect_timeout: float) -> aioredis.Redis:
    """A new asyncio client of `url` (a cluster client with `REDIS_CLUSTER`)
    that fails only with `REDIS_FAILED` (`redis_clients`)."""
    if clustered():
        # One retry, no backoff: a call fails over to the database path within
        # about two timeouts instead of waiting out a failover, and the retry
        # is what makes the client learn the slots anew after one. (A claim
        # script whose reply was lost and that runs again finds its own claim:
        # that command is answered `in_progress`, retry true, until its lease
        # ends; nothing is applied twice.)
        # A cluster client serves the app's commands as one Redis's does; redis-py types them apart.
        return Cluster.from_url(  # type: ignore[return-value]
            url, socket_timeout=timeout, socket_connect_timeout=connect_timeout, retry=AsyncRetry(NoBackoff(), 1)
        )
    return Client.from_url(url, socket_timeout=timeout, socket_connect_timeout=connect_timeout)


def by_slot(keys: list[str]) -> dict[int, list[int]]:
    """The indexes of `keys` grouped by their cluster slot, in order: a
    script may touch only keys of one slot."""
    groups: dict[int, list[int]] = {}
    for i, key in enumerate(keys):
        groups.setdefault(key_slot(key.encode()), []).append(i)
    return groups


class Runtime:
    """One event loop's gateway, Redis clients and attached parts, closed together by `close`."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.gateway = Gateway()
        self.redis: dict[tuple[str, float, bool], aioredis.Redis] = {}
        self.parts: dict[str, Any] = {}
        # Called at close, newest first: each part's `(close)` coroutine function or function.
        self.closers: list[Callable[[], Any]] = []

    def part(self, name: str, make: Callable[[], T], close: Callable[[T], Any] | None = None) -> T:
        """The loop's `name` part, made by `make()` the first time; `close(part)` runs when the runtime closes."""
        try:
            # What `make` made for this name.
            made: T = self.parts[name]
            return made
        except KeyError:
            part = self.parts[name] = make()
            if close is not None:
                self.closers.append(lambda: close(part))
            return part

    def redis_client(self, url: str, timeout: float) -> aioredis.Redis:
        """This loop's client of `url`, giving up on a call after `timeout` seconds.

        The claim store and the per-user window talk to the same Redis with
        the same timeout, so they share one client and its connection pool.
        """
        key = (url, timeout, clustered())
        client = self.redis.get(key)
        if client is None:
            client = self.redis[key] = async_client(url, timeout=timeout, connect_timeout=timeout)
        return client

    async def aclose(self) -> None:
        """Close the attached parts (newest first), the Redis clients, then the gateway."""
        closers, self.closers = self.closers[::-1], []
        for close in closers:
            try:
                result = close()
                if isinstance(result, Awaitable):
                    await result
            except Exception:
                log.warning("closing a part of an event loop's runtime failed", exc_info=True)
        clients, self.redis = list(self.redis.values()), {}
        for client in clients:
            try:
                await client.aclose()
            except Exception:
                log.warning("closing a Redis client failed", exc_info=True)
        self.parts.clear()
        self.gateway.close()


_runtimes: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Runtime] = weakref.WeakKeyDictionary()


def runtime() -> Runtime:
    """The running event loop's runtime, made on first use and closed with the loop."""
    loop = asyncio.get_running_loop()
    found = _runtimes.get(loop)
    if found is None:
        found = _runtimes[loop] = Runtime(loop)
        _close_with(loop)
        # How late the loop runs its callbacks (docs/OPERATIONS.md, "Loop stalls"), for as long as the runtime.
        settings = get_settings()
        sampler = watch_loop(loop, settings.LOOP_LAG_INTERVAL, settings.STALL_LOG_AFTER)
        if sampler is not None:
            found.closers.append(sampler.stop)
    return found


def _close_with(loop: asyncio.AbstractEventLoop) -> None:
    """Have `loop.close()` close the loop's runtime first, while the loop can still run it."""
    original = loop.close

    def close(self: asyncio.AbstractEventLoop) -> None:
        self.close = original  # type: ignore[method-assign]
        found = _runtimes.pop(self, None)
        if found is not None and not self.is_closed():
            try:
                self.run_until_complete(found.aclose())
            except Exception:
                log.warning("closing an event loop's runtime failed", exc_info=True)
                found.gateway.close()
        original()

    loop.close = types.MethodType(close, loop)  # type: ignore[method-assign]


async def close_runtime() -> None:
    """Close the running loop's runtime now (a server's shutdown, a test); the next use makes a new one."""
    found = _runtimes.pop(asyncio.get_running_loop(), None)
    if found is not None:
        await found.aclose()


def close_all_runtimes() -> None:
    """Close what every loop's runtime holds that needs no loop (its database connections)."""
    for found in list(_runtimes.values()):
        found.gateway.close()
