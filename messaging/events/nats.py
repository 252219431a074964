"""The NATS JetStream sink: stream `MESSAGING_EVENTS`, subject `messaging.events.<room>`.

`Nats-Msg-Id` is the `event_id`, so JetStream's duplicate window (2 minutes
by default) drops what a restarted relay publishes again.
"""

from __future__ import annotations

from typing import cast

import nats
import orjson
from nats.aio.client import Client
from nats.js import JetStreamContext
from nats.js.errors import NotFoundError

from ..backends import required_events_url
from ..conf import MessagingSettings
from .sinks import Entry

STREAM = "MESSAGING_EVENTS"
SUBJECTS = "messaging.events.>"


async def connect(url: str) -> Client:
    """A client of `url` that tries once: a NATS that is down fails the call within `connect_timeout`.

    (nats-py's first connect otherwise tries 60 times, 2 seconds apart,
    whatever `allow_reconnect` says; the callers back off on their own.)
    """
    return await nats.connect(
        url, allow_reconnect=False, connect_timeout=5, max_reconnect_attempts=1, reconnect_time_wait=0.5
    )


def subject(room: str) -> str:
    # Room slugs are [a-z0-9-]: always one subject token.
    return f"messaging.events.{room}"


class NatsSink:
    @classmethod
    def from_settings(cls, conf: MessagingSettings) -> NatsSink:
        return cls(required_events_url(conf))

    def __init__(self, url: str) -> None:
        self.url = url
        self.client: Client | None = None
        self.js: JetStreamContext | None = None

    async def connect(self) -> None:
        # No reconnect loop of the client's own: a failure fails the batch,
        # and the relay connects again on the next one.
        self.client = await connect(self.url)
        self.js = self.client.jetstream(timeout=10)
        try:
            await self.js.stream_info(STREAM)
        except NotFoundError:
            await self.js.add_stream(name=STREAM, subjects=[SUBJECTS])

    async def publish(self, entries: list[Entry]) -> None:
        if self.client is None or not self.client.is_connected:
            await self.aclose()
            await self.connect()
        js = cast(JetStreamContext, self.js)  # set by `connect`, with the client
        try:
            # One at a time, each acknowledged, so the stream holds them in order.
            for item in entries:
                await js.publish(subject(item["room"]), orjson.dumps(item), headers={"Nats-Msg-Id": item["event_id"]})
        except Exception:
            await self.aclose()
            raise

    async def aclose(self) -> None:
        if self.client is not None:
            client, self.client = self.client, None
            try:
                await client.close()
            except Exception:
                pass
