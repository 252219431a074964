"""The relay in this process against the real database, Redis and NATS JetStream (messaging/events/relay.py)."""

from __future__ import annotations

import asyncio

import nats
import orjson
import pytest
from channels.db import database_sync_to_async

from messaging.events import stats
from messaging.events.models import Event
from messaging.events.nats import STREAM
from messaging.events.redis_streams import RedisStreamSink
from messaging.events.relay import Relay
from messaging.events.settings import connection_params

from ..support.events import check_order_and_completeness, join_rooms, outbox_by_id, post_many, stream_entries

pytestmark = [pytest.mark.django_db(transaction=True)]

ROOMS = ["r1", "r2", "r3"]


@pytest.fixture
def poster(django_user_model):
    user = django_user_model.objects.create_user(username="poster")
    join_rooms(user, ROOMS)
    return user


def relay_with(sink, **options) -> Relay:
    return Relay(
        connection_params(), sink, **{"partitions": 4, "batch": 50, "poll_interval": 0.05, "retention": 3600, **options}
    )


async def run_until_published(relay: Relay) -> None:
    task = asyncio.create_task(relay.run())
    try:
        while await database_sync_to_async(Event.objects.filter(published_at__isnull=True).exists)():
            await asyncio.sleep(0.05)
    finally:
        relay.stop()
        await task


async def test_the_relay_publishes_every_event_in_room_order_and_marks_it(poster, redis_client, settings):
    await database_sync_to_async(post_many)(poster, ROOMS, 60)
    sink = RedisStreamSink(settings.MESSAGING["REDIS_URL"], "messaging:events", 10_000)
    await run_until_published(relay_with(sink))
    entries = stream_entries(redis_client)
    assert len(entries) == 180
    assert check_order_and_completeness(entries, await database_sync_to_async(outbox_by_id)()) == 0
    assert set(entries[0]) == {"event_id", "type", "room", "data"}


async def test_the_stream_is_trimmed_to_about_its_maxlen(poster, redis_client, settings):
    await database_sync_to_async(post_many)(poster, ROOMS, 400)
    sink = RedisStreamSink(settings.MESSAGING["REDIS_URL"], "messaging:events", 100)
    await run_until_published(relay_with(sink, batch=500))
    # `MAXLEN ~` trims whole radix-tree nodes (100 entries each by default): about, not exactly.
    assert 100 <= redis_client.xlen("messaging:events") < 300


async def test_published_events_are_pruned_after_the_retention(poster, redis_client, settings):
    await database_sync_to_async(post_many)(poster, ROOMS, 5)
    sink = RedisStreamSink(settings.MESSAGING["REDIS_URL"], "messaging:events", 10_000)
    await run_until_published(relay_with(sink))
    await database_sync_to_async(post_many)(poster, ["r1"], 1)
    relay = relay_with(sink, retention=0)
    await relay.step()
    await relay.prune()
    await relay.disconnect()
    await sink.aclose()
    # The published ones are gone; the one published by that step was too, being older than 0 s.
    assert await database_sync_to_async(Event.objects.count)() == 0


async def test_a_second_relay_takes_no_partition_the_first_holds(poster, settings):
    sinks = [RedisStreamSink(settings.MESSAGING["REDIS_URL"], "messaging:events", 10_000) for _ in range(2)]
    first, second = relay_with(sinks[0]), relay_with(sinks[1])
    await first.step()
    await second.step()
    assert first.owned == {0, 1, 2, 3} and second.owned == set()
    await first.disconnect()
    # The first's server process lets its locks go as it exits, a moment after the close.
    for _ in range(100):
        second.claimed_at = 0.0
        await second.step()
        if second.owned:
            break
        await asyncio.sleep(0.05)
    assert second.owned == {0, 1, 2, 3}
    await second.disconnect()
    for sink in sinks:
        await sink.aclose()


def backlog():
    return stats.backlog()


async def test_the_lag_is_the_oldest_unpublished_events_age(poster, settings):
    assert await database_sync_to_async(backlog)() == (0, 0.0)
    await database_sync_to_async(post_many)(poster, ["r1"], 3)
    count, age = await database_sync_to_async(backlog)()
    assert count == 3 and age >= 0
    sink = RedisStreamSink(settings.MESSAGING["REDIS_URL"], "messaging:events", 10_000)
    await run_until_published(relay_with(sink))
    assert await database_sync_to_async(backlog)() == (0, 0.0)
    assert stats.EVENTS_PUBLISHED._value.get() >= 3


NATS_URL = "nats://127.0.0.1:4222"


async def nats_messages() -> list:
    client = await nats.connect(NATS_URL)
    js = client.jetstream()
    sub = await js.pull_subscribe("messaging.events.>", stream=STREAM)
    found = []
    while True:
        try:
            found += await sub.fetch(100, timeout=1)
        except (TimeoutError, nats.errors.TimeoutError):
            break
    await client.close()
    return found


async def fresh_nats_stream() -> None:
    client = await nats.connect(NATS_URL)
    try:
        await client.jetstream().delete_stream(STREAM)
    except nats.js.errors.NotFoundError:
        pass
    await client.close()


async def test_the_nats_sink_publishes_with_the_event_id_as_message_id(poster):
    from messaging.events.nats import NatsSink

    await fresh_nats_stream()
    await database_sync_to_async(post_many)(poster, ROOMS, 20)
    await run_until_published(relay_with(NatsSink(NATS_URL)))
    # Published again, as by a relay killed before it marked them: JetStream drops the repeats.
    await database_sync_to_async(Event.objects.update)(published_at=None)
    await run_until_published(relay_with(NatsSink(NATS_URL)))
    messages = await nats_messages()
    assert len(messages) == 60
    entries = []
    for message in messages:
        payload = orjson.loads(message.data)
        assert message.headers["Nats-Msg-Id"] == payload["event_id"]
        assert message.subject == f"messaging.events.{payload['room']}"
        entries.append({**payload, "data": orjson.loads(payload["data"])})
    assert check_order_and_completeness(entries, await database_sync_to_async(outbox_by_id)()) == 0
