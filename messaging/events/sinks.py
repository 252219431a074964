"""Where the relay publishes: the sink contract and the choice by `EVENTS_URL`.

A sink publishes a batch in the given order and returns only once the whole
batch is stored; any exception means "not all of it": the relay publishes the
batch again (the same `event_id`s), so a sink never needs to be atomic.
Sinks take plain values, never settings (`sink_for` reads those).
"""

from __future__ import annotations

from typing import Protocol, TypedDict

import orjson


class Entry(TypedDict):
    """An event as it leaves: PROTOCOL.md 1.1's fields (`data` is JSON text)."""

    event_id: str
    type: str
    room: str
    data: str


def entry(event_id: object, type: str, room: str, data: object) -> Entry:
    # The outbox stores data as jsonb; psycopg hands it back decoded.
    text = data if isinstance(data, str) else orjson.dumps(data).decode()
    return {"event_id": str(event_id), "type": type, "room": room, "data": text}


class Sink(Protocol):
    async def publish(self, entries: list[Entry]) -> None: ...

    async def close(self) -> None: ...


def sink_for(url: str | None, redis_url: str | None, stream: str, maxlen: int) -> Sink:
    """The sink `EVENTS_URL` names: None for the Redis stream on the app's `REDIS_URL`."""
    url = url or redis_url
    if not url:
        raise ValueError("events need a sink: set MESSAGING['EVENTS_URL'] or MESSAGING['REDIS_URL']")
    if url.startswith("nats://") or url.startswith("tls://"):
        from .nats import NatsSink

        return NatsSink(url)
    if url.startswith(("redis://", "rediss://", "unix://")):
        from .redis_streams import RedisStreamSink

        return RedisStreamSink(url, stream, maxlen)
    raise ValueError(f"EVENTS_URL must be redis://... or nats://..., not {url.split(':', 1)[0]}:...")
