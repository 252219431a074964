"""Redis clients whose every failure is a Redis error: `REDIS_FAILED`.

The app's uses of Redis are best effort: the claims' fast window, presence,
rate windows, fan-out. Each catches Redis failing and carries on without it
(the database path, this process's own sockets, frames caught up by seq).
redis-py reports a Redis that fails as its own errors (`ConnectionError`,
`TimeoutError`, ...), but its asyncio clients also leak errors that are not,
mostly while a cluster fails over:

- `'NoneType' object has no attribute 'writelines'`: a command written to a
  connection that a concurrent command's failure just closed (a cluster
  pipeline that fails closes every connection of its client, the other
  coroutines' too, before it retries);
- `'NoneType' object has no attribute 'name'`: a node the slot map lost
  (redis/redis-py#3835);
- `'NoneType' object is not callable`: a transport closed under a write
  (redis/redis-py#3546).

Such an error escaped every handler, and ended a socket with 1011 for a join
whose answer needed Redis only to say who else is online. The clients here
turn an error of those types raised inside redis-py into `ClientBroke`, a
`redis.ConnectionError`, so that `except REDIS_FAILED` is the one notion of
"Redis failed" at every call site. An error of our own (a wrong argument) is
raised before redis-py runs and is not translated.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any, cast

import redis
import redis.asyncio as aioredis
from redis.asyncio.client import Pipeline, PubSub
from redis.asyncio.cluster import ClusterPipeline, RedisCluster

# What every best-effort call site catches: Redis is down, slow or failing over.
REDIS_FAILED: tuple[type[BaseException], ...] = (OSError, redis.RedisError)

# The types redis-py is known to leak from inside itself (above).
LEAKED = (AttributeError, TypeError, KeyError, IndexError)


class ClientBroke(redis.ConnectionError):
    """redis-py failed inside itself (its state torn by a failure elsewhere): Redis failed, for the caller."""


@contextlib.contextmanager
def translated() -> Iterator[None]:
    try:
        yield
    except LEAKED as exc:
        raise ClientBroke(f"the Redis client broke: {exc!r}") from exc
    except redis.RedisClusterException as exc:
        # Not a `RedisError`: a cluster none of whose nodes answers, or whose slots are not all served.
        raise ClientBroke(f"the Redis Cluster failed: {exc}") from exc


class Client(aioredis.Redis):
    """One Redis's client (`redis.asyncio.Redis`), failing only with Redis errors."""

    async def execute_command(self, *args: Any, **options: Any) -> Any:
        with translated():
            return await super().execute_command(*args, **options)  # type: ignore[no-untyped-call]  # untyped in redis-py

    def pipeline(self, transaction: bool = True, shard_hint: str | None = None) -> ClientPipeline:
        return ClientPipeline(self.connection_pool, self.response_callbacks, transaction, shard_hint)

    def pubsub(self, **kwargs: Any) -> ClientPubSub:
        return ClientPubSub(self.connection_pool, event_dispatcher=self._event_dispatcher, **kwargs)


class ClientPipeline(Pipeline):
    async def execute(self, raise_on_error: bool = True) -> list[Any]:
        with translated():
            return await super().execute(raise_on_error)


class ClientPubSub(PubSub):
    async def connect(self) -> None:
        with translated():
            await super().connect()  # type: ignore[no-untyped-call]  # untyped in redis-py

    async def execute_command(self, *args: Any) -> Any:
        with translated():
            return await super().execute_command(*args)

    async def parse_response(self, block: bool = True, timeout: float = 0) -> Any:
        with translated():
            return await super().parse_response(block, timeout)


class Cluster(RedisCluster):
    """A Redis Cluster's client (`redis.asyncio.RedisCluster`), failing only with Redis errors."""

    async def execute_command(self, *args: Any, **kwargs: Any) -> Any:
        with translated():
            return await super().execute_command(*args, **kwargs)

    def pipeline(self, transaction: Any | None = None, shard_hint: Any | None = None) -> ClusterClientPipeline:
        if shard_hint:
            # What `RedisCluster.pipeline` refuses too.
            raise redis.RedisClusterException("shard_hint is deprecated in cluster mode")
        # redis-py declares `_event_dispatcher` abstract on the cluster's pipeline; its instances work.
        return ClusterClientPipeline(self, transaction)  # type: ignore[abstract]

    async def initialize(self, *args: Any, **kwargs: Any) -> Cluster:
        with translated():
            # RedisCluster.initialize returns the client itself.
            return cast(Cluster, await super().initialize(*args, **kwargs))

    async def read_slots(self) -> None:
        """Read the slots from the cluster now (`initialize` does only once a failure has asked it to)."""
        with translated():
            await self.nodes_manager.initialize()


class ClusterClientPipeline(ClusterPipeline):
    async def execute(self, raise_on_error: bool = True, allow_redirections: bool = True) -> list[Any]:
        with translated():
            return await super().execute(raise_on_error, allow_redirections)
