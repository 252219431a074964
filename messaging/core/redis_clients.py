"""One `redis.asyncio` client per event loop and Redis, shared by the app's parts.

An asyncio client and its connections belong to the loop they were made on
(a server process has one; tests have one per test). The claim store and the
per-user window talk to the same Redis with the same timeout, so they share
one client, and its connection pool, per loop.
"""
from __future__ import annotations

import asyncio
import weakref

import redis.asyncio as aioredis

_clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[tuple[str, float], aioredis.Redis]] = (
    weakref.WeakKeyDictionary()
)


def loop_client(url: str, timeout: float) -> aioredis.Redis:
    """This event loop's client of `url`, giving up on a call after `timeout` seconds."""
    clients = _clients.setdefault(asyncio.get_running_loop(), {})
    client = clients.get((url, timeout))
    if client is None:
        client = clients[(url, timeout)] = aioredis.Redis.from_url(
            url, socket_timeout=timeout, socket_connect_timeout=timeout
        )
    return client
