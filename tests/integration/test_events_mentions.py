"""Mentions: a notification per member named, and one e-mail through a real SMTP server (aiosmtpd)."""

from __future__ import annotations

import time
from datetime import timedelta

import pytest
import redis
from django.core.mail.utils import DNS_NAME
from django.utils import timezone

from messaging.events import mention_emails
from messaging.events.consumers import Consumer
from messaging.events.mentions import mentioned_names, notify
from messaging.events.models import Event, Notification

from ..support.events import Process, join_rooms, post_many, publish_outbox
from ..support.mail import SmtpServer
from ..support.servers import wait_until

pytestmark = [pytest.mark.django_db(transaction=True)]


@pytest.fixture
def smtp(settings):
    server = SmtpServer()
    server.start()
    settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
    settings.EMAIL_HOST, settings.EMAIL_PORT, settings.EMAIL_TIMEOUT = "127.0.0.1", server.port, 5
    yield server.mailbox, server
    server.stop()


@pytest.fixture
def people(django_user_model):
    made = {
        name: django_user_model.objects.create_user(
            username=f"guest-{name}", first_name=name.title(), email=f"{name}@example.com"
        )
        for name in ("ana", "bob", "cat")
    }
    made["dan"] = django_user_model.objects.create_user(username="dan", first_name="Dan")  # no address
    for user in made.values():
        join_rooms(user, ["lobby"])
    return made


def mentions_consumer(client, claim_after: float = 0.2) -> Consumer:
    return Consumer(
        client,
        "messaging:events",
        "mentions",
        notify,
        name="test",
        claim_after=claim_after,
        max_attempts=5,
        batch=100,
        block=0.05,
    )


@pytest.fixture
def stream(settings):
    client = redis.Redis.from_url(settings.MESSAGING["REDIS_URL"], decode_responses=True)
    yield client
    client.close()


def hold_a_socket(user_id, settings) -> tuple[redis.Redis, redis.client.PubSub]:
    """Be a server process holding a socket of the user: subscribed to the user's channel.
    The client is returned too: collected, it would close the subscription's connection."""
    client = redis.Redis.from_url(settings.MESSAGING["REDIS_URL"])
    db = client.connection_pool.connection_kwargs.get("db", 0)
    pubsub = client.pubsub()
    pubsub.subscribe(f"messaging:{db}:user:{user_id}")
    pubsub.get_message(timeout=1)
    return client, pubsub


def test_names_are_found_once_each_not_in_addresses_and_bounded():
    assert mentioned_names("@Bob hi @bob, (@cat) and mail x@dan.org @eve.", 20) == ["bob", "cat", "eve"]
    assert mentioned_names(" ".join(f"@u{n}" for n in range(50)), 20) == [f"u{n}" for n in range(20)]


def test_one_notification_and_one_email_per_member_mentioned_whatever_the_redeliveries(people, smtp, stream, settings):
    mailbox, _ = smtp
    cat_online = hold_a_socket(people["cat"].pk, settings)
    post_many(people["ana"], ["lobby"], 1, body="@bob @Cat @dan @ana @nobody look ")
    publish_outbox(settings.MESSAGING["REDIS_URL"])
    consumer = mentions_consumer(stream)
    consumer.ensure_group()
    consumer.step()
    # Every entry delivered to the group again, from the start: the inbox stops each.
    stream.xgroup_setid("messaging:events", "mentions", id="0")
    consumer.step()
    # And the handler run again on the same event by itself (the seen-set shape's crash window).
    event = Event.objects.get()
    notify({"event_id": str(event.event_id), "type": event.type, "room": event.room, "data": event.data})
    notes = {n.user.first_name: n for n in Notification.objects.select_related("user")}
    assert set(notes) == {"Bob", "Cat", "Dan"}  # not the sender, not a stranger
    assert {k: n.email for k, n in notes.items()} == {"Bob": "sent", "Cat": "online", "Dan": "no address"}
    assert notes["Bob"].seq == 1 and notes["Bob"].sender_name == "Ana" and notes["Bob"].read_at is None
    [message] = mailbox.messages
    assert message["To"] == "bob@example.com"
    assert message["Message-ID"] == f"<{event.event_id}@{DNS_NAME}>"
    assert "@bob @Cat" in message.get_payload()
    cat_online[1].close()
    cat_online[0].close()


def test_with_smtp_down_the_email_is_retried_and_sent_once(people, smtp, stream, settings):
    mailbox, server = smtp
    server.stop()
    post_many(people["ana"], ["lobby"], 1, body="@bob are you there ")
    publish_outbox(settings.MESSAGING["REDIS_URL"])
    consumer = mentions_consumer(stream)
    consumer.ensure_group()
    consumer.step()  # the handler fails: left pending
    [note] = Notification.objects.all()
    assert note.email == "sending" and mailbox.messages == []  # counted in the hour, to be sent
    server.start()
    deadline = time.monotonic() + 30
    while not mailbox.messages:
        assert time.monotonic() < deadline, "the e-mail was never retried"
        time.sleep(0.25)
        consumer.step()  # reclaims it after claim_after
    for _ in range(3):
        time.sleep(0.25)
        consumer.step()
    assert len(mailbox.messages) == 1
    assert Notification.objects.get().email == "sent"
    assert stream.xpending("messaging:events", "mentions")["pending"] == 0


def test_the_badge_endpoint_counts_unread_mentions_and_marks_them_read(people, smtp, stream, settings, client):
    post_many(people["ana"], ["lobby"], 2, body="@bob ping ")
    publish_outbox(settings.MESSAGING["REDIS_URL"])
    consumer = mentions_consumer(stream)
    consumer.ensure_group()
    consumer.step()
    assert client.get("/mentions").status_code == 401
    client.force_login(people["bob"])
    answer = client.get("/mentions").json()
    assert answer["unread"] == 2
    assert [(m["room"], m["seq"], m["sender"]) for m in answer["mentions"]] == [
        ("lobby", 2, "Ana"),
        ("lobby", 1, "Ana"),
    ]
    assert client.get("/mentions/read").status_code == 405
    assert client.post("/mentions/read").json() == {"unread": 0}
    assert client.get("/mentions").json() == {"unread": 0, "mentions": []}
    client.force_login(people["cat"])
    assert client.get("/mentions").json()["unread"] == 0


# The hourly bound and the digest (PROTOCOL 1.2, "Mention e-mails are bounded").


@pytest.fixture
def clock(monkeypatch):
    """The time mention_emails decides by, moved by the test instead of waiting an hour."""

    class Clock:
        at = timezone.now()

        def move(self, **delta) -> None:
            self.at += timedelta(**delta)

    moved = Clock()
    monkeypatch.setattr(mention_emails, "now", lambda: moved.at)
    return moved


def digest_round(consumer: Consumer) -> None:
    """One step of the consumer with its digest round due now (it runs every few seconds by itself)."""
    consumer.periodic_at = float("-inf")
    consumer.step()


def published_to_a_consumer(stream, settings) -> Consumer:
    """The outbox's events published to the stream, and a mentions consumer to read them."""
    publish_outbox(settings.MESSAGING["REDIS_URL"])
    consumer = mentions_consumer(stream)
    consumer.ensure_group()
    return consumer


def to(mailbox, address: str) -> list:
    return [m for m in mailbox.messages if m["To"] == address]


def test_twelve_mentions_in_an_hour_send_ten_emails_then_one_digest_after_the_hour(
    people, smtp, stream, settings, clock
):
    mailbox, _ = smtp
    post_many(people["ana"], ["lobby"], 12, body="@bob look ")
    consumer = published_to_a_consumer(stream, settings)
    digest_round(consumer)
    assert len(to(mailbox, "bob@example.com")) == 10  # MENTION_EMAILS_PER_HOUR, the default
    assert sorted(Notification.objects.values_list("email", flat=True)) == ["held"] * 2 + ["sent"] * 10
    clock.move(minutes=59, seconds=59)
    digest_round(consumer)
    assert len(mailbox.messages) == 10  # still within the hour of the first ten
    clock.move(seconds=2)
    digest_round(consumer)
    *singles, digest = to(mailbox, "bob@example.com")
    assert len(singles) == 10 and {m["Subject"] for m in singles} == {"Ana mentioned you in lobby"}
    assert digest["Subject"] == "2 mentions in lobby"
    text = digest.get_payload()
    assert "> @bob look 10" in text and "> @bob look 11" in text and "look 9" not in text
    held = Notification.objects.filter(seq__in=[11, 12])
    assert digest["Message-ID"] == f"<{held[0].digest}@{DNS_NAME}>" and {n.digest for n in held} == {held[0].digest}
    assert set(Notification.objects.values_list("email", flat=True)) == {"sent"}
    for _ in range(3):
        clock.move(minutes=30)
        digest_round(consumer)
    assert len(mailbox.messages) == 11


def test_a_digest_quotes_at_most_its_limit_and_a_deleted_message_as_deleted(people, smtp, stream, settings, clock):
    settings.MESSAGING = {**settings.MESSAGING, "MENTION_EMAILS_PER_HOUR": 1, "MENTION_DIGEST_ITEMS": 3}
    mailbox, _ = smtp
    post_many(people["ana"], ["lobby"], 6, body="@bob see ")
    consumer = published_to_a_consumer(stream, settings)
    digest_round(consumer)
    assert len(mailbox.messages) == 1
    # Deleted since: its text is gone from the mention too.
    Notification.objects.filter(seq=2).update(body="")
    clock.move(hours=1, seconds=1)
    digest_round(consumer)
    [_, digest] = mailbox.messages
    text = digest.get_payload()
    assert digest["Subject"] == "5 mentions in lobby"
    assert text.count("Ana in lobby:") == 3 and "... and 2 more." in text
    assert "> (a message since deleted)" in text and "> @bob see 2" in text and "see 4" not in text
    assert "> \n" not in text  # no empty quote


def test_mentions_go_only_to_members_who_got_the_message(people, smtp, stream, settings, django_user_model):
    from .conftest import apply_command

    mailbox, _ = smtp
    eve = django_user_model.objects.create_user(username="eve", first_name="Eve", email="eve@example.com")
    fay = django_user_model.objects.create_user(username="fay", first_name="Fay", email="fay@example.com")
    post_many(people["ana"], ["lobby"], 1, body="@bob @eve @fay hello ")
    # Eve joins after the message, before the consumer reads it; Fay never joins.
    apply_command(eve, "room.join", {"room": "lobby"})
    publish_outbox(settings.MESSAGING["REDIS_URL"])
    consumer = mentions_consumer(stream)
    consumer.ensure_group()
    consumer.step()
    assert list(Notification.objects.values_list("user__username", flat=True)) == ["guest-bob"]
    assert [m["To"] for m in mailbox.messages] == ["bob@example.com"]
    assert fay.pk and eve.memberships.exists()


@pytest.mark.e2e
def test_a_consumer_killed_between_sending_a_digest_and_marking_it_sends_it_once_in_effect(
    people, smtp, stream, settings, server_env, tmp_path
):
    """The digest's time is reached by moving the mentions' own times back an hour (the consumers are
    processes: no clock of theirs to move). The SMTP server SIGKILLs the consumer as the digest arrives."""
    settings.MESSAGING = {**settings.MESSAGING, "MENTION_EMAILS_PER_HOUR": 1}
    mailbox, server = smtp
    post_many(people["ana"], ["lobby"], 3, body="@bob again ")
    consumer = published_to_a_consumer(stream, settings)
    consumer.step()
    assert len(mailbox.messages) == 1 and Notification.objects.filter(email="held").count() == 2
    hour_ago = timezone.now() - timedelta(hours=1, seconds=1)
    Notification.objects.update(emailed_at=hour_ago, due_at=hour_ago)
    env = {"EMAIL_URL": f"smtp://127.0.0.1:{server.port}", "MENTION_EMAILS_PER_HOUR": "1"}
    args = ["messaging_consume", "messaging.events.mentions.notify", "--group", "mentions"]
    # Killed once the server has the digest, before the consumer can mark it sent.
    mailbox.on_message = lambda message: first.process.kill()
    first = Process(args, {**server_env, **env}, tmp_path / "first.log")
    try:
        wait_until(lambda: first.process.poll() is not None, 60, "the first consumer's digest")
        mailbox.on_message = None
        assert len(mailbox.messages) == 2 and set(Notification.objects.values_list("email", flat=True)) == {
            "sent",
            "sending",
        }
        # Two consumers now: the digest is sent again by one of them, once.
        others = [Process(args, {**server_env, **env}, tmp_path / f"other{n}.log") for n in range(2)]
        try:
            wait_until(lambda: not Notification.objects.exclude(email="sent").exists(), 60, "the digest marked sent")
            time.sleep(5)  # two more rounds of each: nothing more
        finally:
            for process in others:
                process.stop()
    finally:
        first.stop()
    single, digest, again = mailbox.messages
    assert single["Message-ID"] != digest["Message-ID"] == again["Message-ID"]
    assert digest.get_payload() == again.get_payload() and "> @bob again 1" in digest.get_payload()
    assert digest["Subject"] == "2 mentions in lobby"
