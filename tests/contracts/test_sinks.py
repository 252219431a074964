"""The sink's contract (messaging/events/sinks.py `Sink`), run by every sink the app ships:
`RedisStreamSink` (a Redis stream) and `NatsSink` (NATS JetStream).

`publish` returns once the whole batch is stored, in the order given, each
entry as it was handed over; an exception otherwise (the relay publishes the
batch again). `aclose` lets go of the connections, and a later `publish`
connects again.
"""

from __future__ import annotations

import uuid

import nats
import orjson
import pytest
import redis
from django.core.exceptions import ImproperlyConfigured

from messaging.backends import SINKS, sink_path
from messaging.conf import get_settings
from messaging.events.nats import STREAM
from messaging.events.settings import configured_sink
from messaging.events.sinks import Entry, entry

from .conftest import using


@pytest.fixture(params=["redis", "nats"])
def kind(request, settings):
    if request.param == "redis":
        using(settings, EVENTS_URL=request.getfixturevalue("redis_url"), EVENTS_STREAM=f"contract:{uuid.uuid4()}")
    else:
        using(settings, EVENTS_URL=request.getfixturevalue("nats_server").url)
    assert sink_path(get_settings()) == SINKS[request.param]
    return request.param


@pytest.fixture
async def sink(kind):
    made = configured_sink()
    yield made
    await made.aclose()


async def stored(kind: str, room: str) -> list[dict]:
    """What the sink's service holds for `room`, in its order, as the entries were handed over."""
    conf = get_settings()
    if kind == "redis":
        client = redis.Redis.from_url(conf.EVENTS_URL, decode_responses=True)
        try:
            return [fields for _, fields in client.xrange(conf.EVENTS_STREAM) if fields["room"] == room]
        finally:
            client.close()
    client = await nats.connect(conf.EVENTS_URL)
    try:
        subscription = await client.jetstream().pull_subscribe(f"messaging.events.{room}", stream=STREAM)
        found = []
        while True:
            try:
                found += await subscription.fetch(100, timeout=1)
            except (TimeoutError, nats.errors.TimeoutError):
                return [orjson.loads(m.data) for m in found]
    finally:
        await client.close()


def batch(room: str, count: int, start: int = 0) -> list[Entry]:
    return [entry(uuid.uuid4(), "message.posted", room, {"n": n, "body": "héllo"}) for n in range(start, start + count)]


def new_room() -> str:
    return f"r-{uuid.uuid4().hex[:12]}"


async def test_a_batch_is_stored_whole_in_its_order(kind, sink):
    room = new_room()
    entries = batch(room, 120)
    await sink.publish(entries)
    assert await stored(kind, room) == entries


async def test_batches_keep_their_order_one_after_the_other(kind, sink):
    room = new_room()
    first, second = batch(room, 10), batch(room, 10, start=10)
    await sink.publish(first)
    await sink.publish(second)
    assert await stored(kind, room) == first + second


async def test_after_aclose_a_publish_connects_again(kind, sink):
    room = new_room()
    await sink.publish(batch(room, 1))
    await sink.aclose()
    await sink.aclose()
    later = batch(room, 2, start=1)
    await sink.publish(later)
    assert (await stored(kind, room))[1:] == later


async def test_a_sink_whose_service_is_down_raises(kind, settings, nowhere):
    scheme = "redis" if kind == "redis" else "nats"
    using(settings, EVENTS_URL=f"{scheme}://127.0.0.1:{nowhere}")
    sink = configured_sink()
    try:
        with pytest.raises(Exception):  # noqa: B017 - any exception: "not all of it", published again
            await sink.publish(batch(new_room(), 3))
    finally:
        await sink.aclose()


class HostSink:
    """A host's own sink, named by its dotted path."""

    published: list[Entry] = []

    @classmethod
    def from_settings(cls, conf):
        return cls()

    async def publish(self, entries: list[Entry]) -> None:
        self.published.extend(entries)

    async def aclose(self) -> None:
        pass


async def test_a_host_names_its_own_sink_by_its_dotted_path(settings):
    using(settings, EVENTS_SINK=f"{__name__}.HostSink", EVENTS_URL="kafka://somewhere")
    sink = configured_sink()
    entries = batch(new_room(), 2)
    await sink.publish(entries)
    assert isinstance(sink, HostSink) and HostSink.published[-2:] == entries


def test_a_url_of_no_known_scheme_needs_a_sink_named(settings):
    using(settings, EVENTS_URL="kafka://somewhere")
    with pytest.raises(ValueError, match="EVENTS_URL must be redis://... or nats://..."):
        configured_sink()


def test_a_path_to_no_sink_names_what_it_lacks(settings):
    using(settings, EVENTS_SINK="messaging.events.sinks.Entry")
    with pytest.raises(ImproperlyConfigured, match="EVENTS_SINK.*has no from_settings, publish, aclose"):
        configured_sink()
