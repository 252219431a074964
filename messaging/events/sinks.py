"""Where the relay publishes: the sink contract.

A sink publishes a batch in the given order and returns only once the whole
batch is stored; any exception means "not all of it": the relay publishes the
batch again (the same `event_id`s), so a sink never needs to be atomic.
`aclose` lets go of its connections; a `publish` after it connects again.
Sinks take plain values; their `from_settings` reads the settings. Which
class the relay uses: `EVENTS_SINK`, else `EVENTS_URL`'s scheme
(messaging/backends.py). tests/contracts/test_sinks.py is the contract.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol, TypedDict

import orjson

if TYPE_CHECKING:
    from ..conf import MessagingSettings


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
    @classmethod
    def from_settings(cls, conf: MessagingSettings) -> Sink: ...

    async def publish(self, entries: list[Entry]) -> None: ...

    async def aclose(self) -> None: ...
