"""Deleted means gone while the rest runs: a delete against the relay's batches, edits, consumers and
prunes, in real threads on real PostgreSQL and Redis (the lock order of messaging/events/redaction.py)."""

from __future__ import annotations

import asyncio
import logging
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor

import psycopg
import pytest
import redis
from django.db import connection, connections

from messaging.core.exceptions import Invalid
from messaging.events import mentions, webhooks
from messaging.events.consumers import Consumer
from messaging.events.models import Event, WebhookEndpoint
from messaging.events.redis_streams import RedisStreamSink
from messaging.events.relay import Relay
from messaging.events.settings import connection_params
from messaging.models import Message

from ..support.events import publish_outbox, stream_entries
from ..support.traces import where_found
from ..support.webhooks import SECRET, Receiver
from .conftest import apply_command, wait_until

pytestmark = [pytest.mark.django_db(transaction=True)]

STREAM = "messaging:events"


@pytest.fixture
def people(django_user_model, settings):
    # The webhook receivers here are on 127.0.0.1: a deployment allows that with WEBHOOKS_ALLOW_PRIVATE.
    settings.MESSAGING = {
        **settings.MESSAGING,
        "WEBHOOK_TIMEOUT": 2,
        "WEBHOOK_BACKOFF": 0.01,
        "WEBHOOKS_ALLOW_PRIVATE": True,
    }
    ana = django_user_model.objects.create_user(username=f"ana-{uuid.uuid4().hex[:6]}", first_name="Ana")
    bob = django_user_model.objects.create_user(username=f"bob-{uuid.uuid4().hex[:6]}", first_name="Bob")
    for user in (ana, bob):
        apply_command(user, "room.join", {"room": "lobby"})
    return ana, bob


def redis_url() -> str:
    from django.conf import settings

    return settings.MESSAGING["REDIS_URL"]


class GatedSink(RedisStreamSink):
    """The Redis stream sink, holding each batch until the test opens the gate: meanwhile the relay's
    transaction, which marked the batch, stays open."""

    def __init__(self) -> None:
        super().__init__(redis_url(), STREAM, 10_000)
        self.holding = threading.Event()
        self.gate = threading.Event()

    async def publish(self, entries) -> None:
        self.holding.set()
        await asyncio.to_thread(self.gate.wait, 120)
        await super().publish(entries)


def relay_round(sink) -> int:
    """One round of a relay (claim its partitions, publish a batch), in a loop of its own."""

    async def one() -> int:
        relay = Relay(connection_params(), sink, partitions=4, batch=500, poll_interval=0.05, retention=3600)
        try:
            return await relay.step()
        finally:
            await relay.disconnect()
            await sink.aclose()

    return asyncio.run(one())


def waiting_for_locks() -> int:
    """The database's sessions waiting for a lock another holds."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'"
        )
        return cursor.fetchone()[0]


def post(user, body: str) -> int:
    return apply_command(user, "room.post", {"room": "lobby", "body": body}).data["seq"]


def delete(user, seq: int) -> dict:
    try:
        return apply_command(user, "message.delete", {"room": "lobby", "seq": seq}).data
    finally:
        connections.close_all()


def test_a_delete_waits_for_the_relay_batch_holding_its_event_then_blanks_it(people, redis_client):
    ana, _ = people
    marker = f"gone-{uuid.uuid4().hex}"
    seq = post(ana, marker)
    sink = GatedSink()
    with ThreadPoolExecutor(2) as pool:
        relaying = pool.submit(relay_round, sink)
        try:
            assert sink.holding.wait(60), "the relay never reached its sink"
            deleting = pool.submit(delete, ana, seq)
            wait_until(lambda: waiting_for_locks() >= 1, timeout=60, what="the delete to wait for the batch's rows")
            assert not deleting.done()
        finally:
            sink.gate.set()
        assert relaying.result(timeout=60) == 1
        deleting.result(timeout=60)
    # Published while the delete waited, before it committed: that copy left with its body (out of reach).
    [published] = stream_entries(redis_client)
    assert published["data"]["body"] == marker
    # And the row it left from is blank now.
    assert Event.objects.get(type="message.posted").published_at is not None
    assert where_found(marker) == set()


def test_a_relay_batch_waits_for_a_delete_that_blanked_its_events_and_publishes_them_blank(people, redis_client):
    ana, _ = people
    marker = f"gone-{uuid.uuid4().hex}"
    seq = post(ana, marker)
    apply_command(ana, "message.edit", {"room": "lobby", "seq": seq, "body": f"{marker} edited"})
    # Holding the room's row stops the delete at its last lock (`next_rev`), its events blanked and locked.
    with ThreadPoolExecutor(2) as pool, psycopg.connect(**connection_params()) as holder:  # released first
        holder.execute("SELECT id FROM messaging_room WHERE slug = 'lobby' FOR UPDATE")
        deleting = pool.submit(delete, ana, seq)
        wait_until(lambda: waiting_for_locks() >= 1, timeout=60, what="the delete to wait for the room's row")
        relaying = pool.submit(relay_round, RedisStreamSink(redis_url(), STREAM, 10_000))
        wait_until(lambda: waiting_for_locks() >= 2, timeout=60, what="the relay to wait for the delete's rows")
        assert not relaying.done()
        holder.rollback()
        deleting.result(timeout=60)
        relaying.result(timeout=60)
    publish_outbox(redis_url())  # the delete's own event, after it
    entries = stream_entries(redis_client)
    assert [e["type"] for e in entries] == ["message.posted", "message.edited", "message.deleted"]
    assert [e["data"].get("body") for e in entries] == ["", "", None]
    assert where_found(marker) == set()


def test_a_prune_passes_by_the_mentions_a_delete_holds_and_takes_them_next_time(people, settings):
    """`prune_notifications` deleting old mentions while a delete blanks them: it skips the rows the delete
    holds instead of waiting for them with others held (a cycle), and the next run takes them."""
    from datetime import timedelta

    from django.core.management import call_command
    from django.utils import timezone

    from messaging.events import mentions
    from messaging.events.models import Notification

    ana, _ = people
    seq = post(ana, "@bob an old mention")
    publish_outbox(redis_url())
    client = redis.Redis.from_url(redis_url(), decode_responses=True)
    consumer = Consumer(client, STREAM, "mentions", mentions.notify, name="test", block=0.05)
    consumer.ensure_group()
    wait_until(lambda: consumer.step() >= 0 and Notification.objects.exists(), timeout=60, what="the mention")
    client.close()
    Notification.objects.update(created_at=timezone.now() - timedelta(days=1))
    with ThreadPoolExecutor(1) as pool, psycopg.connect(**connection_params()) as holder:  # released first
        holder.execute("SELECT id FROM messaging_room WHERE slug = 'lobby' FOR UPDATE")
        deleting = pool.submit(delete, ana, seq)
        wait_until(lambda: waiting_for_locks() >= 1, timeout=60, what="the delete to hold the mention")
        with connection.cursor() as cursor:
            cursor.execute("SET lock_timeout = '10s'")  # a prune that waited would fail, not hang
        try:
            call_command("prune_notifications", "--older-than", "3600")
        finally:
            with connection.cursor() as cursor:
                cursor.execute("RESET lock_timeout")
        assert Notification.objects.count() == 1, "the held mention is left for the next run"
        holder.rollback()
        deleting.result(timeout=60)
    assert Notification.objects.get().body == ""
    call_command("prune_notifications", "--older-than", "3600")
    assert not Notification.objects.exists()


class Loop(threading.Thread):
    """A thread calling `step` until stopped; what it raised is kept (a deadlock would be one)."""

    def __init__(self, step) -> None:
        super().__init__(daemon=True)
        self.step = step
        self.stopping = threading.Event()
        self.errors: list[BaseException] = []

    def run(self) -> None:
        try:
            while not self.stopping.is_set():
                try:
                    self.step()
                except Exception as exc:
                    self.errors.append(exc)
        finally:
            connections.close_all()

    def stop(self) -> list[BaseException]:
        self.stopping.set()
        self.join(60)
        assert not self.is_alive(), "a loop did not stop"
        return self.errors


class RelayLoop(Loop):
    """A relay publishing and pruning (events published more than a second ago) over and over."""

    def __init__(self) -> None:
        super().__init__(self.round)
        self.loop = asyncio.new_event_loop()
        self.relay = Relay(
            connection_params(),
            RedisStreamSink(redis_url(), STREAM, 100_000),
            partitions=4,
            batch=20,
            poll_interval=0.05,
            retention=1.0,
        )

    def round(self) -> None:
        self.loop.run_until_complete(self.relay.step())
        self.loop.run_until_complete(self.relay.prune())
        time.sleep(0.02)

    def stop(self) -> list[BaseException]:
        errors = super().stop()
        self.loop.run_until_complete(self.relay.disconnect())
        self.loop.run_until_complete(self.relay.sink.aclose())
        self.loop.close()
        return errors


def group_loop(name: str, handler) -> Loop:
    client = redis.Redis.from_url(redis_url(), decode_responses=True)
    consumer = Consumer(
        client, STREAM, name, handler, name="test", claim_after=0.2, max_attempts=3, batch=20, block=0.05
    )
    consumer.ensure_group()
    return Loop(consumer.step)


def test_deletes_racing_edits_posts_relay_rounds_and_consumers_never_deadlock_and_keep_no_body(people, caplog):
    ana, bob = people
    receiver = Receiver(["fail"] * 10_000)
    WebhookEndpoint.objects.create(url=receiver.url, secret=SECRET)
    marker = f"gone-{uuid.uuid4().hex}"
    seqs = [post(ana, f"@bob {marker} {n}") for n in range(12)]
    publish_outbox(redis_url())  # some events out before the race, the rest during it
    caplog.set_level(logging.WARNING)
    errors: list[BaseException] = []

    def edits() -> None:
        try:
            for round in range(3):
                for seq in seqs:
                    try:
                        apply_command(
                            ana,
                            "message.edit",
                            {"room": "lobby", "seq": seq, "body": f"@bob {marker} {seq} edit {round}"},
                        )
                    except Invalid:
                        pass  # deleted already
        except Exception as exc:
            errors.append(exc)
        finally:
            connections.close_all()

    def deletes() -> None:
        try:
            for seq in reversed(seqs):  # against the edits' order, to meet each one of them
                delete(ana, seq)
        except Exception as exc:
            errors.append(exc)

    def posts() -> None:
        try:
            for n in range(30):
                post(bob, f"bob's own {n}")
        except Exception as exc:
            errors.append(exc)
        finally:
            connections.close_all()

    loops = [
        RelayLoop(),
        group_loop("webhooks", webhooks.enqueue),
        group_loop("mentions", mentions.notify),
        Loop(lambda: webhooks.deliver_due() or time.sleep(0.05)),
    ]
    try:
        for loop in loops:
            loop.start()
        workers = [threading.Thread(target=work) for work in (edits, deletes, posts)]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join(240)
            assert not worker.is_alive(), "a command never finished"
    finally:
        for loop in loops:
            errors += loop.stop()
        receiver.close()
    assert errors == []
    assert "deadlock" not in caplog.text
    assert Message.objects.filter(room__slug="lobby", sender=ana, deleted_at__isnull=True).count() == 0
    assert where_found(marker) == set()
