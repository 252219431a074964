"""Operating the events: /healthz reports a stuck relay, /metrics the backlog, the admin the outbox and dead letters."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from messaging.events.models import DeadLetter, Event

from ..support.events import join_rooms, post_many

pytestmark = [pytest.mark.django_db(transaction=True)]


@pytest.fixture
def posted(django_user_model):
    user = django_user_model.objects.create_user(username="poster")
    join_rooms(user, ["lobby"])
    post_many(user, ["lobby"], 3)
    return user


def test_healthz_says_nothing_of_events_while_the_relay_keeps_up(client, posted):
    assert client.get("/healthz").json() == {"status": "ok", "checks": {"database": "ok", "redis": "ok"}}


def test_healthz_reports_a_stuck_relay_without_failing(client, posted, settings):
    Event.objects.update(created_at=timezone.now() - timedelta(seconds=120))
    response = client.get("/healthz")
    assert response.status_code == 200
    events = response.json()["events"]
    assert events["relay"] == "stuck" and events["unpublished"] == 3 and events["lag_seconds"] >= 120
    settings.MESSAGING = {**settings.MESSAGING, "EVENTS_STUCK_AFTER": 300}
    assert "events" not in client.get("/healthz").json()


def test_metrics_show_the_backlog_and_its_age(client, posted, settings):
    settings.MESSAGING = {**settings.MESSAGING, "METRICS_TOKEN": "t"}
    Event.objects.update(created_at=timezone.now() - timedelta(seconds=50))
    text = client.get("/metrics", HTTP_AUTHORIZATION="Bearer t").content.decode()
    assert "messaging_events_unpublished 3.0" in text
    lag = next(line for line in text.splitlines() if line.startswith("messaging_events_lag_seconds "))
    assert float(lag.split()[1]) >= 50
    Event.objects.update(published_at=timezone.now())
    text = client.get("/metrics", HTTP_AUTHORIZATION="Bearer t").content.decode()
    assert "messaging_events_unpublished 0.0" in text and "messaging_events_lag_seconds 0.0" in text


@pytest.fixture
def staff(client, django_user_model):
    user = django_user_model.objects.create_superuser("boss", "boss@example.com", "pw")
    client.force_login(user)
    return client


def test_the_admin_lists_events_and_dead_letters_read_only(staff, posted):
    event = Event.objects.order_by("position").first()
    DeadLetter.objects.create(
        group="mailer",
        event_id=event.event_id,
        event={"event_id": str(event.event_id)},
        attempts=5,
        error="ValueError: no",
    )
    page = staff.get("/admin/messaging/event/").content.decode()
    assert str(event.event_id) in page and "message.posted" in page
    page = staff.get(f"/admin/messaging/event/{event.pk}/change/").content.decode()
    assert "&quot;body&quot;: &quot;m0&quot;" in page
    page = staff.get("/admin/messaging/deadletter/").content.decode()
    assert "mailer" in page and str(event.event_id) in page
    letter = DeadLetter.objects.get()
    assert "ValueError: no" in staff.get(f"/admin/messaging/deadletter/{letter.pk}/change/").content.decode()
    assert staff.post(f"/admin/messaging/deadletter/{letter.pk}/delete/", {"post": "yes"}).status_code == 403
    assert DeadLetter.objects.filter(event_id=event.event_id).exists()
