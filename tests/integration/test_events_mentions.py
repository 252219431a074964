"""Mentions: a notification per member named, and one e-mail through a real SMTP server (aiosmtpd)."""
from __future__ import annotations

import email
import time

import pytest
import redis
from aiosmtpd.controller import Controller
from django.core.mail.utils import DNS_NAME

from messaging.events.consumers import Consumer
from messaging.events.mentions import mentioned_names, notify
from messaging.events.models import Event, Notification

from ..support.events import join_rooms, post_many, publish_outbox
from ..support.servers import free_port

pytestmark = [pytest.mark.django_db(transaction=True)]


class Mailbox:
    def __init__(self) -> None:
        self.messages: list[email.message.Message] = []

    async def handle_DATA(self, server, session, envelope):
        self.messages.append(email.message_from_bytes(envelope.content))
        return "250 OK"


class SmtpServer:
    """aiosmtpd on a port of its own, stopped and started again (a controller runs once: a new one each time)."""

    def __init__(self) -> None:
        self.mailbox = Mailbox()
        self.port = free_port()
        self.controller: Controller | None = None

    def start(self) -> None:
        self.controller = Controller(self.mailbox, hostname="127.0.0.1", port=self.port)
        self.controller.start()

    def stop(self) -> None:
        if self.controller is not None:
            self.controller.stop()
            self.controller = None


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
    made = {name: django_user_model.objects.create_user(username=f"guest-{name}", first_name=name.title(),
                                                         email=f"{name}@example.com")
            for name in ("ana", "bob", "cat")}
    made["dan"] = django_user_model.objects.create_user(username="dan", first_name="Dan")  # no address
    for user in made.values():
        join_rooms(user, ["lobby"])
    return made


def mentions_consumer(client, claim_after: float = 0.2) -> Consumer:
    return Consumer(client, "messaging:events", "mentions", notify, name="test", claim_after=claim_after,
                    max_attempts=5, batch=100, block=0.05)


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


def test_one_notification_and_one_email_per_member_mentioned_whatever_the_redeliveries(
        people, smtp, stream, settings):
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
    assert note.email == "pending" and mailbox.messages == []
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
    assert [(m["room"], m["seq"], m["sender"]) for m in answer["mentions"]] == [("lobby", 2, "Ana"), ("lobby", 1, "Ana")]
    assert client.get("/mentions/read").status_code == 405
    assert client.post("/mentions/read").json() == {"unread": 0}
    assert client.get("/mentions").json() == {"unread": 0, "mentions": []}
    client.force_login(people["cat"])
    assert client.get("/mentions").json()["unread"] == 0
