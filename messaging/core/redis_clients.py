"""One `redis.asyncio` client per event loop and Redis, shared by the app's parts.

An asyncio client and its connections belong to the loop they were made on
(a server process has one; tests have one per test). The claim store and the
per-user window talk to the same Redis with the same timeout, so they share
one client, and its connection pool, per loop.

With `REDIS_CLUSTER` the URL names one node of a Redis Cluster and the
clients are cluster clients: they learn the slots from that node and send
each command to the master of its key's slot (docs/OPERATIONS.md).
"""
from __future__ import annotations

import asyncio
import weakref
from typing import Any

import redis
import redis.asyncio as aioredis
from redis.asyncio.cluster import RedisCluster as AsyncCluster
from redis.asyncio.retry import Retry as AsyncRetry
from redis.backoff import NoBackoff
from redis.cluster import RedisCluster as SyncCluster
from redis.crc import key_slot
from redis.retry import Retry

from ..conf import get_settings

_clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[tuple[str, float, bool], Any]] = (
    weakref.WeakKeyDictionary()
)


def clustered() -> bool:
    return get_settings().REDIS_CLUSTER


def async_client(url: str, *, timeout: float | None, connect_timeout: float) -> aioredis.Redis:
    """A new asyncio client of `url` (a cluster client with `REDIS_CLUSTER`)."""
    if clustered():
        # One retry, no backoff: a call fails over to the database path within
        # about two timeouts instead of waiting out a failover, and the retry
        # is what makes the client learn the slots anew after one. (A claim
        # script whose reply was lost and that runs again finds its own claim:
        # that command is answered `in_progress`, retry true, until its lease
        # ends; nothing is applied twice.)
        return AsyncCluster.from_url(url, socket_timeout=timeout, socket_connect_timeout=connect_timeout,
                                     retry=AsyncRetry(NoBackoff(), 1))
    return aioredis.Redis.from_url(url, socket_timeout=timeout, socket_connect_timeout=connect_timeout)


def sync_client(url: str, timeout: float) -> redis.Redis:
    """A new (thread-safe) client of `url` for code on threads."""
    if clustered():
        return SyncCluster.from_url(url, socket_timeout=timeout, socket_connect_timeout=timeout,
                                    retry=Retry(NoBackoff(), 1))
    return redis.Redis.from_url(url, socket_timeout=timeout, socket_connect_timeout=timeout, retry_on_timeout=False)


def loop_client(url: str, timeout: float) -> aioredis.Redis:
    """This event loop's client of `url`, giving up on a call after `timeout` seconds."""
    clients = _clients.setdefault(asyncio.get_running_loop(), {})
    cluster = clustered()
    client = clients.get((url, timeout, cluster))
    if client is None:
        client = clients[(url, timeout, cluster)] = async_client(url, timeout=timeout, connect_timeout=timeout)
    return client


def by_slot(keys: list[str]) -> dict[int, list[int]]:
    """The indexes of `keys` grouped by their cluster slot, in order: a
    script may touch only keys of one slot."""
    groups: dict[int, list[int]] = {}
    for i, key in enumerate(keys):
        groups.setdefault(key_slot(key.encode()), []).append(i)
    return groups
