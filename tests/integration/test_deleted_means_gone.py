"""Deleted means gone (PROTOCOL.md 1.2): after `message.delete` commits, the message's body is in no table
of the database, whatever copies the events made of it (messaging/events/redaction.py).

Real PostgreSQL, the relay's code against the real Redis stream (and NATS),
consumer groups on that stream, a real local HTTP server for the webhooks;
each test looks for a marker of its own in every text and JSON column of
every table (tests/support/traces.py).
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import uuid
from datetime import timedelta

import nats
import orjson
import pytest
import redis
from django.db import connection
from django.test.utils import CaptureQueriesContext

from messaging.core import handlers
from messaging.events import mention_emails, mentions, webhooks
from messaging.events.consumers import Consumer
from messaging.events.models import DeadLetter, Event, InboxRecord, Notification, WebhookDelivery, WebhookEndpoint
from messaging.events.nats import STREAM, NatsSink
from messaging.events.relay import Relay
from messaging.events.settings import connection_params
from messaging.models import Message, MessageVersion

from ..support.events import join_rooms, publish_outbox, stream_entries
from ..support.traces import unscanned_model_columns, where_found
from ..support.webhooks import SECRET, Receiver
from .conftest import apply_command, wait_until

pytestmark = [pytest.mark.django_db(transaction=True)]

NATS_URL = "nats://127.0.0.1:4222"


@pytest.fixture(params=["postgresql", "portable"])
def form(request, monkeypatch):
    """How posts are stored: `room.post`'s statement on PostgreSQL, or its portable `apply` alone."""
    if request.param == "portable":
        monkeypatch.setitem(
            handlers._registry, "room.post", dataclasses.replace(handlers.lookup("room.post"), batch={})
        )
    return request.param


@pytest.fixture
def people(django_user_model, settings):
    """ana, who posts, and bob, a member with no socket and no address (mentions of him are kept, not mailed)."""
    # The webhook receivers here are on 127.0.0.1: a deployment allows that with WEBHOOKS_ALLOW_PRIVATE.
    settings.MESSAGING = {
        **settings.MESSAGING,
        "EDIT_HISTORY_RETENTION": 3600,
        "WEBHOOK_TIMEOUT": 2,
        "WEBHOOK_BACKOFF": 0.01,
        "WEBHOOK_MAX_ATTEMPTS": 2,
        "WEBHOOKS_ALLOW_PRIVATE": True,
    }
    ana = django_user_model.objects.create_user(username=f"ana-{uuid.uuid4().hex[:6]}", first_name="Ana")
    bob = django_user_model.objects.create_user(username=f"bob-{uuid.uuid4().hex[:6]}", first_name="Bob")
    for user in (ana, bob):
        apply_command(user, "room.join", {"room": "lobby"})
    return ana, bob


@pytest.fixture
def stream(settings):
    client = redis.Redis.from_url(settings.MESSAGING["REDIS_URL"], decode_responses=True)
    yield client
    client.close()


@pytest.fixture
def failing_endpoint():
    """A webhook endpoint whose server answers every POST with 500."""
    receiver = Receiver(["fail"] * 100)
    WebhookEndpoint.objects.create(url=receiver.url, secret=SECRET)
    yield receiver
    receiver.close()


def refuse(event: dict) -> None:
    raise RuntimeError("this handler refuses every event")


def group(client, name: str, handler) -> Consumer:
    consumer = Consumer(
        client, "messaging:events", name, handler, name="test", claim_after=0.05, max_attempts=2, batch=100, block=0.05
    )
    consumer.ensure_group()
    return consumer


def consume_until(consumer: Consumer, done, what: str) -> None:
    """Step the group (reading, and reclaiming what failed) until `done()`."""

    def stepped() -> bool:
        consumer.step()
        return done()

    wait_until(stepped, timeout=60, what=what)


def deliver_until_dead() -> None:
    def attempted() -> bool:
        WebhookDelivery.objects.filter(state="pending").update(next_attempt_at=webhooks.timezone.now())
        webhooks.deliver_due()
        return not WebhookDelivery.objects.filter(state="pending").exists()

    wait_until(attempted, timeout=60, what="the deliveries to die")


def post(user, body: str) -> int:
    return apply_command(user, "room.post", {"room": "lobby", "body": body}).data["seq"]


def edit(user, seq: int, body: str) -> None:
    apply_command(user, "message.edit", {"room": "lobby", "seq": seq, "body": body})


def delete(user, seq: int, id: str | None = None) -> dict:
    return apply_command(user, "message.delete", {"room": "lobby", "seq": seq}, id=id).data


def copies_everywhere(stream) -> None:
    """The outbox published to the stream (a post and its edit), and every copy the app makes of its
    events: bob's mention, webhook deliveries that die into dead letters, a group's dead letters."""
    publish_outbox(redis_url())
    consume_until(group(stream, "mentions", mentions.notify), Notification.objects.exists, "bob's mention")
    consume_until(
        group(stream, "webhooks", webhooks.enqueue), lambda: WebhookDelivery.objects.count() == 2, "the deliveries"
    )
    deliver_until_dead()
    consume_until(
        group(stream, "refusing", refuse),
        lambda: DeadLetter.objects.filter(group="refusing").count() == 2,
        "the group's dead letters",
    )


def redis_url() -> str:
    from django.conf import settings

    return settings.MESSAGING["REDIS_URL"]


# Where each copy of a body lives before a delete: the scan must see each of them.
COPIES = {
    "messaging_message.body",
    "messaging_messageversion.previous_body",
    "messaging_event.data",
    "messaging_notification.body",
    "messaging_webhookdelivery.event",
    "messaging_deadletter.event",
}


def test_after_a_delete_its_body_is_in_no_table_of_the_database(people, stream, redis_client, failing_endpoint, form):
    ana, bob = people
    marker = f"gone-{uuid.uuid4().hex}"
    seq = post(ana, f"@bob {marker} lunch?")
    edit(ana, seq, f"@bob {marker} lunch at one?")
    copies_everywhere(stream)
    # The scan reads every column where any app keeps text, and finds every copy made.
    assert unscanned_model_columns() == set()
    assert where_found(marker) == COPIES
    assert [e["type"] for e in stream_entries(redis_client)] == ["message.posted", "message.edited"]

    deleted = delete(ana, seq)

    assert where_found(marker) == set()
    # What the copies say instead: an empty body, and that the message is deleted.
    for data in Event.objects.filter(type__in=["message.posted", "message.edited"]).values_list("data", flat=True):
        assert data["body"] == "" and data["deleted"] is True and data["seq"] == seq
    for copy in [
        *WebhookDelivery.objects.values_list("event", flat=True),
        *DeadLetter.objects.values_list("event", flat=True),
    ]:
        assert copy["data"]["body"] == "" and copy["data"]["deleted"] is True
    [note] = Notification.objects.all()
    assert note.body == "" and note.user_id == bob.pk and note.seq == seq
    # The delete's own event, for consumers downstream to do the same.
    [gone] = Event.objects.filter(type="message.deleted").values_list("data", flat=True)
    assert gone["seq"] == seq and gone["deleted_at"] == deleted["deleted_at"] and "body" not in gone


def test_deleting_twice_changes_nothing_the_first_did_not(people, stream, failing_endpoint):
    ana, _ = people
    marker = f"gone-{uuid.uuid4().hex}"
    seq = post(ana, f"@bob {marker}")
    edit(ana, seq, f"@bob {marker} again")
    copies_everywhere(stream)
    first = delete(ana, seq, id="first")
    assert where_found(marker) == set()
    tables = (Event, WebhookDelivery, DeadLetter, Notification, Message, MessageVersion)
    before = {model.__name__: list(model.objects.order_by("pk").values()) for model in tables}

    again = delete(ana, seq, id="second")

    assert again == first
    assert {model.__name__: list(model.objects.order_by("pk").values()) for model in tables} == before


def test_a_group_reading_the_streams_old_entries_after_the_delete_keeps_no_body(
    people, stream, redis_client, failing_endpoint
):
    """The stream still holds the entries published before the delete, body and all; what the app's
    groups make of them afterwards (a mention, a delivery, a dead letter) is blank."""
    ana, bob = people
    marker = f"gone-{uuid.uuid4().hex}"
    seq = post(ana, f"@bob {marker}")
    edit(ana, seq, f"@bob {marker} too")
    publish_outbox(redis_url())
    delete(ana, seq)
    assert where_found(marker) == set()
    # Out of reach: published before the delete, the stream's entries keep the body.
    assert sum(marker in e["data"].get("body", "") for e in stream_entries(redis_client)) == 2

    consume_until(
        group(stream, "mentions", mentions.notify),
        lambda: InboxRecord.objects.filter(group="mentions").count() == 2,
        "the mentions group to apply both",
    )
    consume_until(
        group(stream, "webhooks", webhooks.enqueue), lambda: WebhookDelivery.objects.count() == 2, "the deliveries"
    )
    deliver_until_dead()
    consume_until(
        group(stream, "refusing", refuse),
        lambda: DeadLetter.objects.filter(group="refusing").count() == 2,
        "the group's dead letters",
    )

    assert where_found(marker) == set()
    assert not Notification.objects.exists()  # a mention of a deleted message is not kept
    assert DeadLetter.objects.count() == 4 and WebhookDelivery.objects.count() == 2


def test_a_delivery_leased_before_the_delete_dies_into_a_blank_dead_letter(people, stream, failing_endpoint, settings):
    ana, _ = people
    settings.MESSAGING = {**settings.MESSAGING, "WEBHOOK_MAX_ATTEMPTS": 1}
    marker = f"gone-{uuid.uuid4().hex}"
    seq = post(ana, marker)
    publish_outbox(redis_url())
    consume_until(group(stream, "webhooks", webhooks.enqueue), WebhookDelivery.objects.exists, "the delivery")
    [leased] = webhooks.lease_due(10)  # in the sender's memory, body and all

    delete(ana, seq)
    webhooks.attempt(leased)  # its one attempt fails: dead

    assert WebhookDelivery.objects.get().state == "dead"
    assert DeadLetter.objects.get().event["data"]["body"] == ""
    assert where_found(marker) == set()


async def nats_entries(room: str) -> list[dict]:
    """The JetStream messages of `room`'s subject, payloads decoded."""
    client = await nats.connect(NATS_URL)
    try:
        sub = await client.jetstream().pull_subscribe(f"messaging.events.{room}", stream=STREAM)
        found = []
        while True:
            try:
                found += await sub.fetch(100, timeout=1)
            except (TimeoutError, nats.errors.TimeoutError):
                return [{**(p := orjson.loads(m.data)), "data": orjson.loads(p["data"])} for m in found]
    finally:
        await client.close()


def published_to_nats() -> None:
    async def drain() -> None:
        relay = Relay(
            connection_params(), NatsSink(NATS_URL), partitions=4, batch=500, poll_interval=0.05, retention=3600
        )
        for _ in range(20):
            await relay.step()
        await relay.disconnect()
        await relay.sink.aclose()

    asyncio.run(drain())


@pytest.mark.parametrize("sink", ["redis", "nats"])
def test_an_event_published_after_the_delete_carries_the_empty_body(people, redis_client, sink, form):
    ana, _ = people
    room = f"gone-{uuid.uuid4().hex[:12]}"  # a subject of its own on the shared NATS server
    join_rooms(ana, [room])
    marker = f"gone-{uuid.uuid4().hex}"
    seq = apply_command(ana, "room.post", {"room": room, "body": f"{marker} first"}).data["seq"]
    apply_command(ana, "message.edit", {"room": room, "seq": seq, "body": f"{marker} second"})
    apply_command(ana, "message.delete", {"room": room, "seq": seq})
    assert Event.objects.filter(room=room, published_at__isnull=True).count() == 3

    if sink == "redis":
        publish_outbox(redis_url())
        entries = [e for e in stream_entries(redis_client) if e["room"] == room]
    else:
        published_to_nats()
        entries = asyncio.run(nats_entries(room))

    assert [e["type"] for e in entries] == ["message.posted", "message.edited", "message.deleted"]
    posted, edited, _ = entries
    assert posted["data"]["body"] == edited["data"]["body"] == ""
    assert posted["data"]["deleted"] is edited["data"]["deleted"] is True
    assert marker not in orjson.dumps(entries).decode()
    assert where_found(marker) == set()


# The tables where a delete looks for copies.
SEARCHED = (
    "messaging_event",
    "messaging_webhookdelivery",
    "messaging_deadletter",
    "messaging_notification",
    "messaging_messageversion",
)


def table_scans(sql: str) -> list[str]:
    """The tables `sql`'s plan reads whole even with sequential scans priced out: those no index serves."""
    with connection.cursor() as cursor:
        cursor.execute("SET enable_seqscan = off")
        try:
            cursor.execute(f"EXPLAIN (FORMAT JSON) {sql}")
            [(plan,)] = cursor.fetchall()
        finally:
            cursor.execute("RESET enable_seqscan")

    def nodes(node: dict):
        yield node
        for child in node.get("Plans", []):
            yield from nodes(child)

    plan = json.loads(plan) if isinstance(plan, str) else plan
    return [n["Relation Name"] for n in nodes(plan[0]["Plan"]) if n["Node Type"] == "Seq Scan"]


@pytest.mark.parametrize("ids_kept", [True, False], ids=["event ids kept", "posted before they were"])
def test_a_delete_finds_every_copy_by_an_index(people, stream, failing_endpoint, on_this_thread, ids_kept):
    ana, _ = people
    seq = post(ana, "@bob a body to find")
    edit(ana, seq, "@bob a body to find, edited")
    copies_everywhere(stream)
    if not ids_kept:
        Message.objects.update(posted_event_id=None)
        MessageVersion.objects.update(event_id=None)
    with CaptureQueriesContext(connection) as queries:
        delete(ana, seq)
    searches = [
        q["sql"]
        for q in queries
        if q["sql"].startswith(("SELECT", "UPDATE")) and any(f'"{table}"' in q["sql"] for table in SEARCHED)
    ]
    assert {table for table in SEARCHED if any(f'FROM "{table}"' in sql for sql in searches)} == set(SEARCHED)
    assert {sql: table_scans(sql) for sql in searches if table_scans(sql)} == {}


def test_a_message_posted_before_its_events_ids_were_kept_is_found_in_its_rooms_outbox(people):
    """A message of the version before (or posted by one of its processes during a rolling deploy)
    has no event ids on it: its events are looked up in its room's outbox."""
    ana, _ = people
    marker = f"gone-{uuid.uuid4().hex}"
    seq = post(ana, marker)
    edit(ana, seq, f"{marker} edited")
    post(ana, "another message, which keeps its body")
    Message.objects.update(posted_event_id=None)
    MessageVersion.objects.update(event_id=None)

    delete(ana, seq)

    assert where_found(marker) == set()
    assert Event.objects.filter(data__body="another message, which keeps its body").exists()


def test_a_mention_of_a_deleted_message_waiting_for_its_digest_shows_it_as_deleted(
    people, stream, mailoutbox, client, settings, monkeypatch
):
    """The mention's row keeps no body: the page lists it blank, and the digest it waits for (past
    `MENTION_EMAILS_PER_HOUR`) shows a deleted message there (messaging/events/mention_emails.py)."""
    ana, bob = people
    bob.email = "bob@example.com"
    bob.save()
    settings.MESSAGING = {**settings.MESSAGING, "MENTION_EMAILS_PER_HOUR": 1}
    marker = f"gone-{uuid.uuid4().hex}"
    post(ana, "@bob the first of the hour")
    seq = post(ana, f"@bob {marker}")
    publish_outbox(redis_url())
    consume_until(
        group(stream, "mentions", mentions.notify),
        Notification.objects.filter(email="held").exists,
        "the second mention to wait for a digest",
    )
    assert len(mailoutbox) == 1
    delete(ana, seq)
    later = mention_emails.now() + timedelta(hours=1, seconds=1)
    monkeypatch.setattr(mention_emails, "now", lambda: later)
    assert mention_emails.send_due_digests() == 1
    [_, digest] = mailoutbox
    assert f"> {mention_emails.DELETED}" in digest.body and marker not in digest.body
    client.force_login(bob)
    listed = {m["seq"]: m["body"] for m in client.get("/mentions").json()["mentions"]}
    assert listed[seq] == ""
