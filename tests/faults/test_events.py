"""Faults of the events downstream, with real processes: the relay killed, two relays,
the sink (Redis, NATS) down and back, a consumer killed before it acknowledges.

The relays and consumers are `manage.py` processes of the demo project over
the test database; the sinks are a Redis and a nats-server of the test's own,
so stopping them harms nothing else (`fault_redis` is the fault suite's own Redis).
"""

from __future__ import annotations

import asyncio
import signal
import threading
import time

import nats
import orjson
import pytest
import redis
from django.contrib.auth import get_user_model

from messaging.events.models import DeadLetter, Event, InboxRecord
from messaging.testing import SocketClient
from messaging_client import sign_in

from ..support.events import Process, check_order_and_completeness, join_rooms, outbox_by_id, post_many, stream_entries
from ..support.nats import NatsServer
from ..support.servers import wait_until

pytestmark = [pytest.mark.e2e]

ROOMS = ["ra", "rb", "rc", "rd"]


@pytest.fixture
def processes(server_env, tmp_path):
    """`processes(*args, **env)`: a `manage.py` command as a process, over the test database; all stopped at the end."""
    started: list[Process] = []

    def start(*args: str, **env: str) -> Process:
        process = Process(list(args), {**server_env, **env}, tmp_path / f"{args[0]}-{len(started)}.log")
        started.append(process)
        return process

    yield start
    for process in started:
        process.stop()


@pytest.fixture
def poster(server_env):
    user = get_user_model().objects.create_user(username="poster")
    join_rooms(user, ROOMS)
    return user


def unpublished() -> int:
    return Event.objects.filter(published_at__isnull=True).count()


def relay_env(url: str, **more: str) -> dict[str, str]:
    return {"EVENTS_URL": url, "MESSAGING_EVENTS_POLL_INTERVAL": "0.05", "MESSAGING_EVENTS_PARTITIONS": "8", **more}


def test_a_relay_killed_mid_batch_loses_nothing_and_republishes_identically(processes, poster, fault_redis):
    post_many(poster, ROOMS, 500)
    client = redis.Redis(port=fault_redis.port)
    env = relay_env(fault_redis.url, MESSAGING_EVENTS_BATCH="10")
    kills = 0
    for threshold in (1, 300, 900):
        relay = processes("messaging_relay", **env)
        wait_until(lambda threshold=threshold: client.xlen("messaging:events") >= threshold, 30, f"{threshold} entries")
        relay.kill()
        if unpublished():
            kills += 1
    assert kills >= 2, "the relay finished before it could be killed mid-way"
    processes("messaging_relay", **env)
    wait_until(lambda: unpublished() == 0, 60, "the outbox to drain")
    check_order_and_completeness(stream_entries(client), outbox_by_id())


def test_two_relays_at_once_lose_nothing_and_keep_each_rooms_order(processes, poster, fault_redis):
    client = redis.Redis(port=fault_redis.port)
    env = relay_env(fault_redis.url, MESSAGING_EVENTS_BATCH="20")
    first, second = processes("messaging_relay", **env), processes("messaging_relay", **env)
    writer = threading.Thread(target=post_many, args=(poster, ROOMS, 300))
    writer.start()
    # One of them dies while events still come: the other takes its partitions over.
    wait_until(lambda: client.xlen("messaging:events") >= 200, 30, "some entries")
    first.kill()
    writer.join()
    wait_until(lambda: unpublished() == 0, 60, "the outbox to drain")
    check_order_and_completeness(stream_entries(client), outbox_by_id())
    assert second.process.poll() is None


async def ws_post(client: SocketClient, count: int, label: str) -> None:
    for n in range(count):
        ack = await client.call("room.post", {"room": "ra", "body": f"{label}{n}"})
        assert ack["ok"], ack


def test_redis_down_commands_keep_working_the_outbox_grows_and_drains(processes, start_daphne, fault_redis):
    server = start_daphne()
    client = SocketClient(server.url, sign_in(server.url, "ana"))

    async def scenario() -> None:
        await client.connect()
        await client.call("room.join", {"room": "ra"})
        await ws_post(client, 10, "before")
        fault_redis.stop()
        await ws_post(client, 30, "while-down")
        await client.close()

    processes("messaging_relay", **relay_env(fault_redis.url))
    wait_until(lambda: True, 1, "")
    asyncio.run(scenario())
    # Every post while the sink was down waits in the outbox.
    assert unpublished() >= 30
    fault_redis.start()
    wait_until(lambda: unpublished() == 0, 60, "the outbox to drain")
    entries = stream_entries(redis.Redis(port=fault_redis.port))
    expected = outbox_by_id()
    assert len(expected) == 40
    # The entries published before Redis went away were lost with it (it keeps
    # nothing on disk here); every event published since is there, in order.
    lost = {k: v for k, v in expected.items() if k not in {e["event_id"] for e in entries}}
    check_order_and_completeness(entries, {k: v for k, v in expected.items() if k not in lost})
    assert all(v["data"]["body"].startswith("before") for v in lost.values())


async def nats_entries(url: str) -> list[dict]:
    client = await nats.connect(url)
    sub = await client.jetstream().pull_subscribe("messaging.events.>", stream="MESSAGING_EVENTS")
    found = []
    while True:
        try:
            batch = await sub.fetch(200, timeout=1)
        except (TimeoutError, nats.errors.TimeoutError):
            break
        for message in batch:
            payload = orjson.loads(message.data)
            assert message.headers["Nats-Msg-Id"] == payload["event_id"]
            found.append({**payload, "data": orjson.loads(payload["data"])})
    await client.close()
    return found


def test_nats_down_the_outbox_grows_and_drains_with_one_message_per_event(processes, poster, tmp_path):
    server = NatsServer(tmp_path / "nats").start()
    try:
        env = relay_env(server.url, MESSAGING_EVENTS_BATCH="10")
        post_many(poster, ROOMS, 50)
        relay = processes("messaging_relay", **env)
        wait_until(lambda: unpublished() == 0, 60, "the first events to be published")
        server.stop()
        post_many(poster, ROOMS, 50, body="down")
        assert unpublished() == 200
        server.start()  # the same store: what was published before is still there
        wait_until(lambda: unpublished() == 0, 60, "the outbox to drain")
        # Killed and the rows marked unpublished again, as if it died before marking:
        # JetStream's duplicate window drops every republish by its Nats-Msg-Id.
        relay.kill()
        Event.objects.filter(data__body__startswith="down").update(published_at=None)
        processes("messaging_relay", **env)
        wait_until(lambda: unpublished() == 0, 60, "the republish")
        entries = asyncio.run(nats_entries(server.url))
        assert len(entries) == 400
        assert check_order_and_completeness(entries, outbox_by_id()) == 0
    finally:
        server.stop()


# Consumers -------------------------------------------------------------------

EFFECTS = "events_test_effect"


def create_effects_table() -> None:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(f"CREATE TABLE IF NOT EXISTS {EFFECTS} (grp text NOT NULL, event_id uuid NOT NULL, body text)")
        cursor.execute(f"DELETE FROM {EFFECTS}")


def effects() -> dict[str, int]:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(f"SELECT event_id::text, count(*) FROM {EFFECTS} GROUP BY event_id")
        return dict(cursor.fetchall())


def consumer(processes, url: str, **env: str) -> Process:
    return processes(
        "messaging_consume",
        "tests.support.event_handlers.record_effect",
        "--group",
        "effects",
        "--claim-after",
        "1",
        **{"EVENTS_URL": url, **env},
    )


def test_a_consumer_killed_before_it_acknowledges_has_its_entries_reclaimed_and_applied_once(
    processes, poster, fault_redis
):
    create_effects_table()
    post_many(poster, ["ra"], 5, body="before")
    post_many(poster, ["ra"], 1, body="hang")  # the handler hangs: killed inside its transaction
    post_many(poster, ["ra"], 1, body="die")  # dies after its commit, before XACK
    post_many(poster, ["ra"], 5, body="after")
    processes("messaging_relay", **relay_env(fault_redis.url))
    wait_until(lambda: unpublished() == 0, 60, "the events to be published")
    first = consumer(processes, fault_redis.url, TEST_HANG_ON="hang0")
    wait_until(lambda: len(effects()) == 5, 60, "the first five effects")
    time.sleep(0.5)
    first.kill()  # hanging in the "hang" handler, its transaction open
    # The next one reclaims what the first left pending, and kills itself
    # after committing the "die" event's effect, before its XACK.
    second = consumer(processes, fault_redis.url, TEST_DIE_ON="die0")
    assert second.process.wait(60) == -signal.SIGKILL
    assert len(effects()) == 7
    third = consumer(processes, fault_redis.url)
    wait_until(lambda: len(effects()) == 12, 60, "every effect")
    client = redis.Redis(port=fault_redis.port)
    wait_until(lambda: client.xpending("messaging:events", "effects")["pending"] == 0, 60, "every entry acked")
    assert third.process.poll() is None
    counts = effects()
    assert len(counts) == 12 and set(counts.values()) == {1}, counts
    assert InboxRecord.objects.filter(group="effects").count() == 12


def test_a_poison_event_goes_to_the_dead_letters_and_the_rest_are_applied(processes, poster, fault_redis):
    create_effects_table()
    post_many(poster, ["ra"], 2, body="ok")
    post_many(poster, ["ra"], 1, body="poison")
    post_many(poster, ["ra"], 2, body="fine")
    processes("messaging_relay", **relay_env(fault_redis.url))
    consumer(processes, fault_redis.url, MESSAGING_EVENTS_MAX_ATTEMPTS="3")
    wait_until(lambda: DeadLetter.objects.exists(), 60, "a dead letter")
    [dead] = DeadLetter.objects.all()
    assert dead.group == "effects" and dead.attempts == 3
    assert dead.event["data"]["body"] == "poison0" and "poisoned" in dead.error
    wait_until(lambda: len(effects()) == 4, 60, "the other effects")
    client = redis.Redis(port=fault_redis.port)
    wait_until(lambda: client.xpending("messaging:events", "effects")["pending"] == 0, 60, "every entry acked")


def test_a_nats_consumer_group_reclaims_from_a_killed_consumer_and_applies_once(processes, poster, tmp_path):
    server = NatsServer(tmp_path / "nats").start()
    try:
        create_effects_table()
        post_many(poster, ["ra"], 3, body="before")
        post_many(poster, ["ra"], 1, body="hang")
        post_many(poster, ["ra"], 1, body="die")
        post_many(poster, ["ra"], 3, body="after")
        processes("messaging_relay", **relay_env(server.url))
        wait_until(lambda: unpublished() == 0, 60, "the events to be published")
        first = consumer(processes, server.url, TEST_HANG_ON="hang0")
        wait_until(lambda: len(effects()) == 3, 60, "the first three effects")
        time.sleep(0.5)
        first.kill()
        # JetStream redelivers what the first never acknowledged once `--claim-after` (its ack wait) runs out.
        second = consumer(processes, server.url, TEST_DIE_ON="die0")
        assert second.process.wait(60) == -signal.SIGKILL
        consumer(processes, server.url)
        wait_until(lambda: len(effects()) == 8, 60, "every effect")
        time.sleep(2)  # past another ack wait: nothing applied twice meanwhile
        counts = effects()
        assert len(counts) == 8 and set(counts.values()) == {1}, counts
        assert InboxRecord.objects.filter(group="effects").count() == 8
    finally:
        server.stop()


def test_webhooks_through_the_processes_reach_a_failing_receiver_once(processes, poster, fault_redis, settings):
    from messaging.events.models import WebhookDelivery, WebhookEndpoint

    from ..support.webhooks import SECRET, Receiver

    # The receiver is on 127.0.0.1: allowed here, and in the processes.
    settings.MESSAGING = {**settings.MESSAGING, "WEBHOOKS_ALLOW_PRIVATE": True}
    receiver = Receiver(["fail", "slow", "fail"])
    try:
        WebhookEndpoint.objects.create(url=receiver.url, secret=SECRET, types=["message.posted"])
        post_many(poster, ["ra"], 3, body="hook")
        env = {
            "EVENTS_URL": fault_redis.url,
            "MESSAGING_WEBHOOK_TIMEOUT": "0.5",
            "MESSAGING_WEBHOOK_BACKOFF": "0.05",
            "WEBHOOKS_ALLOW_PRIVATE": "1",
        }
        processes("messaging_relay", **relay_env(fault_redis.url))
        processes("messaging_consume", "messaging.events.webhooks.enqueue", "--group", "webhooks", **env)
        processes("messaging_webhooks", **env)
        wait_until(lambda: WebhookDelivery.objects.filter(state="delivered").count() == 3, 60, "the deliveries")
        assert len(receiver.effects) == 3
        assert {e["data"]["body"] for e in receiver.effects.values()} == {"hook0", "hook1", "hook2"}
        assert len(receiver.requests) >= 5 and all(r["signed"] for r in receiver.requests)
    finally:
        receiver.close()


def test_a_consumer_whose_database_goes_away_mid_handler_waits_and_applies_once(
    processes, poster, fault_redis, tmp_path
):
    from django.db import connection

    create_effects_table()
    post_many(poster, ["ra"], 1, body="slow")
    post_many(poster, ["ra"], 2, body="after")
    processes("messaging_relay", **relay_env(fault_redis.url))
    wait_until(lambda: unpublished() == 0, 60, "the events to be published")
    # One attempt only: an outage must not use it up.
    consumer(
        processes,
        fault_redis.url,
        TEST_SLOW_ON="slow0",
        TEST_SLOW_MARKER=str(tmp_path / "slowed"),
        MESSAGING_EVENTS_MAX_ATTEMPTS="1",
    )
    wait_until(lambda: _in_handler(), 30, "the consumer inside its handler")
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE datname = current_database() AND pid <> pg_backend_pid()"
        )
    wait_until(lambda: len(effects()) == 3, 60, "every effect")
    counts = effects()
    assert set(counts.values()) == {1}, counts
    assert not DeadLetter.objects.exists()


def _in_handler() -> bool:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
            "AND query LIKE '%%pg_sleep%%' AND pid <> pg_backend_pid()"
        )
        return cursor.fetchone()[0] > 0
