"""The Redis Streams sink: `XADD` to one stream, trimmed to about `maxlen` entries."""

from __future__ import annotations

from typing import Any

import redis.asyncio as aioredis

from ..backends import required_events_url
from ..conf import MessagingSettings
from .sinks import Entry


def redis_client(url: str) -> aioredis.Redis:
    # A timeout, so a Redis that hangs fails the batch (republished later)
    # instead of stalling the relay; not the app's 0.5 s: a batch is larger.
    return aioredis.Redis.from_url(url, socket_timeout=10, socket_connect_timeout=5)


class RedisStreamSink:
    @classmethod
    def from_settings(cls, conf: MessagingSettings) -> RedisStreamSink:
        return cls(required_events_url(conf), conf.EVENTS_STREAM, conf.EVENTS_STREAM_MAXLEN)

    def __init__(self, url: str, stream: str, maxlen: int) -> None:
        self.client = redis_client(url)
        self.stream = stream
        self.maxlen = maxlen

    async def publish(self, entries: list[Entry]) -> None:
        # One round trip per batch; the entries keep their order in the stream.
        # `MAXLEN ~` bounds the stream at a cost of O(1) per XADD.
        pipe = self.client.pipeline(transaction=False)
        for item in entries:
            fields: dict[Any, Any] = dict(item)  # str keys and values: redis-py types them wider
            pipe.xadd(self.stream, fields, maxlen=self.maxlen, approximate=True)
        await pipe.execute()

    async def aclose(self) -> None:
        await self.client.aclose()
