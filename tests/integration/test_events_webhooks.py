"""Webhooks against a real local HTTP receiver that fails, times out and is sent the same event twice."""

from __future__ import annotations

import time
import uuid

import pytest

from messaging.events import webhooks
from messaging.events.models import DeadLetter, WebhookAttempt, WebhookDelivery, WebhookEndpoint

from ..support.webhooks import SECRET, Receiver

pytestmark = [pytest.mark.django_db(transaction=True)]


@pytest.fixture(autouse=True)
def local_endpoints(settings):
    """The receivers here are on 127.0.0.1: a deployment allows that with WEBHOOKS_ALLOW_PRIVATE."""
    settings.MESSAGING = {**settings.MESSAGING, "WEBHOOKS_ALLOW_PRIVATE": True}


@pytest.fixture
def fast_retries(settings):
    settings.MESSAGING = {
        **settings.MESSAGING,
        "WEBHOOK_TIMEOUT": 0.5,
        "WEBHOOK_BACKOFF": 0.01,
        "WEBHOOK_MAX_ATTEMPTS": 4,
    }


def event(type: str = "message.posted") -> dict:
    return {"event_id": str(uuid.uuid4()), "type": type, "room": "lobby", "data": {"room": "lobby", "seq": 1}}


def deliver_until_finished(timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while WebhookDelivery.objects.filter(state=WebhookDelivery.State.PENDING).exists():
        assert time.monotonic() < deadline, "deliveries still pending"
        WebhookDelivery.objects.filter(state="pending").update(next_attempt_at=webhooks.timezone.now())
        webhooks.deliver_due()


def test_a_failing_slow_receiver_sent_an_event_twice_applies_it_once(fast_retries):
    receiver = Receiver(["fail", "slow", "ok"])
    try:
        WebhookEndpoint.objects.create(url=receiver.url, secret=SECRET)
        posted = event()
        with webhooks.transaction.atomic():
            webhooks.enqueue(posted)
            webhooks.enqueue(posted)  # the event delivered twice to the group: one delivery
        deliver_until_finished()
        [delivery] = WebhookDelivery.objects.all()
        assert delivery.state == "delivered" and delivery.attempts == 3
        # Sent once more after it was delivered (an operator's retry): the receiver answers again.
        WebhookDelivery.objects.update(state="pending")
        deliver_until_finished()
        keys = [r["key"] for r in receiver.requests]
        assert keys == [posted["event_id"]] * 4 and all(r["signed"] for r in receiver.requests)
        assert receiver.effects == {posted["event_id"]: posted}
        attempts = list(WebhookAttempt.objects.order_by("at").values_list("status", "error"))
        assert attempts[0] == (500, "HTTP 500")
        assert attempts[1][0] is None and "timed out" in attempts[1][1]
        assert attempts[2:] == [(200, ""), (200, "")]
    finally:
        receiver.close()


def test_a_receiver_that_always_fails_ends_in_the_dead_letters(fast_retries):
    receiver = Receiver(["fail"] * 10)
    try:
        endpoint = WebhookEndpoint.objects.create(url=receiver.url, secret=SECRET)
        posted = event()
        webhooks.enqueue(posted)
        deliver_until_finished()
        [delivery] = WebhookDelivery.objects.all()
        assert delivery.state == "dead" and delivery.attempts == 4
        assert WebhookAttempt.objects.count() == 4 and len(receiver.requests) == 4
        [dead] = DeadLetter.objects.all()
        assert dead.group == f"webhook:{endpoint.pk}" and str(dead.event_id) == posted["event_id"]
        assert receiver.effects == {}
    finally:
        receiver.close()


def test_endpoints_get_only_the_types_they_want_and_inactive_ones_nothing():
    wants_states = WebhookEndpoint.objects.create(url="http://127.0.0.1:9/a", secret="s", types=["message.state"])
    WebhookEndpoint.objects.create(url="http://127.0.0.1:9/b", secret="s", active=False)
    everything = WebhookEndpoint.objects.create(url="http://127.0.0.1:9/c", secret="s")
    webhooks.enqueue(event("message.posted"))
    webhooks.enqueue(event("message.state"))
    assert sorted(WebhookDelivery.objects.values_list("endpoint_id", flat=True)) == sorted(
        [everything.pk, everything.pk, wants_states.pk]
    )


def test_a_signature_is_checked_over_timestamp_and_body():
    body = b'{"a":1}'
    header = webhooks.sign(SECRET, 1_000_000, body)
    assert webhooks.verify(SECRET, header, body, now=1_000_010)
    assert not webhooks.verify(SECRET, header, body + b" ", now=1_000_010)
    assert not webhooks.verify("other", header, body, now=1_000_010)
    assert not webhooks.verify(SECRET, header, body, now=1_000_000 + 301)  # replayed too late
    assert not webhooks.verify(SECRET, "garbage", body)


def test_the_backoff_grows_with_jitter_under_its_cap(settings):
    settings.MESSAGING = {**settings.MESSAGING, "WEBHOOK_BACKOFF": 1.0, "WEBHOOK_BACKOFF_CAP": 10.0}
    for attempts, cap in ((1, 1.0), (3, 4.0), (20, 10.0)):
        waits = [webhooks.backoff(attempts) for _ in range(200)]
        assert all(0 <= w <= cap for w in waits) and len(set(waits)) > 1


def test_finished_deliveries_are_pruned_after_the_retention():
    endpoint = WebhookEndpoint.objects.create(url="http://127.0.0.1:9/c", secret="s")
    webhooks.enqueue(event())
    WebhookDelivery.objects.update(state="delivered", finished_at=webhooks.timezone.now())
    assert webhooks.prune(3600) == 0
    assert webhooks.prune(0) >= 1
    assert not WebhookDelivery.objects.exists() and WebhookEndpoint.objects.filter(pk=endpoint.pk).exists()
