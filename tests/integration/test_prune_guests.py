"""prune_guests deletes the guest accounts of /login/ that have been idle past
the retention and never posted; everything else stays, and a post racing the
prune keeps its guest. On real PostgreSQL."""

from __future__ import annotations

import threading
import time
from datetime import timedelta
from io import StringIO

import psycopg
import pytest
from django.contrib.auth import get_user_model
from django.contrib.sessions.models import Session
from django.core.management import CommandError, call_command
from django.db import connection
from django.test import Client
from django.utils import timezone

from messaging.models import CommandRecord, Membership, Message, Room, WatermarkMove

from .conftest import apply_command

pytestmark = [pytest.mark.django_db(transaction=True)]

DAYS = 24 * 3600


def guest(name: str) -> get_user_model():
    """A guest made by the real sign-in form, its session then ended as a browser's would expire."""
    browser = Client()
    browser.get("/login/")
    browser.post("/login/", {"name": name, "csrfmiddlewaretoken": browser.cookies["csrftoken"].value})
    user = get_user_model().objects.get(first_name=name)
    Session.objects.filter(session_key=browser.cookies["sessionid"].value).update(expire_date=timezone.now())
    return user


def age(user, days: int) -> None:
    """Move everything the user did `days` back."""
    then = timezone.now() - timedelta(days=days)
    get_user_model().objects.filter(pk=user.pk).update(last_login=then, date_joined=then)
    Membership.objects.filter(user=user).update(joined_at=then)
    WatermarkMove.objects.filter(membership__user=user).update(at=then)
    CommandRecord.objects.filter(user=user).update(created_at=then)


def remaining() -> set[str]:
    return set(get_user_model().objects.values_list("first_name", flat=True))


@pytest.fixture
def lobby():
    """A room with one message by a regular (non-guest) user, so guests have something to read."""
    host = get_user_model().objects.create_user(username="host", first_name="host", password="a password")
    apply_command(host, "room.join", {"room": "lobby"})
    apply_command(host, "room.post", {"room": "lobby", "body": "welcome"})
    return host


@pytest.fixture
def guests(lobby):
    made = {name: guest(name) for name in ("lurker", "reader", "poster", "recent", "reactor", "signed-in", "admin-ish")}
    apply_command(made["lurker"], "room.join", {"room": "lobby"})
    apply_command(made["poster"], "room.join", {"room": "lobby"})
    apply_command(made["poster"], "room.post", {"room": "lobby", "body": "I was here"})
    apply_command(made["reader"], "room.join", {"room": "lobby"})
    for user in made.values():
        age(user, 40)
    # Activity inside the retention keeps a guest, whatever it was.
    apply_command(made["reader"], "receipt", {"room": "lobby", "read": 1})
    get_user_model().objects.filter(pk=made["recent"].pk).update(last_login=timezone.now() - timedelta(days=3))
    apply_command(made["reactor"], "room.join", {"room": "lobby"})
    Membership.objects.filter(user=made["reactor"]).update(joined_at=timezone.now() - timedelta(days=40))
    apply_command(made["reactor"], "reaction.add", {"room": "lobby", "seq": 1})
    # Still signed in (a session saved later, say): never deleted.
    browser = Client()
    browser.force_login(made["signed-in"])
    age(made["signed-in"], 40)
    # Made a staff user by hand: not the demo's guest any more.
    get_user_model().objects.filter(pk=made["admin-ish"].pk).update(is_staff=True)
    return made


def test_idle_guests_who_never_posted_are_deleted_and_everyone_else_stays(guests, lobby):
    out = StringIO()
    call_command("prune_guests", stdout=out)
    assert remaining() == {"host", "reader", "poster", "recent", "reactor", "signed-in", "admin-ish"}
    assert "deleted 1 guest accounts" in out.getvalue() and "1 idle guests who posted are kept" in out.getvalue()
    # The lurker's membership went with it; the room, its messages and the poster's post stay.
    assert not Membership.objects.filter(user_id=guests["lurker"].pk).exists()
    assert list(Message.objects.order_by("seq").values_list("body", flat=True)) == ["welcome", "I was here"]
    assert Room.objects.get(slug="lobby").last_seq == 2


def test_a_poster_is_kept_however_long_idle(guests):
    call_command("prune_guests", "--older-than", str(1 * DAYS), stdout=StringIO())
    assert "poster" in remaining() and Message.objects.filter(sender=guests["poster"]).exists()
    # The guest who signed in 3 days ago is idle for a day's retention; those who acted today are not.
    assert remaining() == {"host", "poster", "reader", "reactor", "signed-in", "admin-ish"}


def test_the_retention_setting_and_its_override(guests, settings):
    settings.MESSAGING = {**settings.MESSAGING, "GUEST_RETENTION": 60 * DAYS}
    call_command("prune_guests", stdout=StringIO())
    assert "lurker" in remaining()
    call_command("prune_guests", "--older-than", str(20 * DAYS), stdout=StringIO())
    assert "lurker" not in remaining()


def test_small_batches_delete_the_same(guests):
    for name in ("one", "two", "three"):
        age(guest(name), 40)
    out = StringIO()
    call_command("prune_guests", "--batch", "1", stdout=out)
    assert "deleted 4 guest accounts" in out.getvalue()
    assert not remaining() & {"lurker", "one", "two", "three"}


def test_dry_run_counts_and_deletes_nothing(guests):
    before = remaining()
    out = StringIO()
    call_command("prune_guests", "--dry-run", stdout=out)
    assert "would delete 1 guest accounts" in out.getvalue()
    assert remaining() == before


@pytest.mark.parametrize("args", [["--older-than", "0"], ["--older-than", "-5"], ["--batch", "0"]])
def test_nonsense_arguments_are_refused(guests, args):
    before = remaining()
    with pytest.raises(CommandError):
        call_command("prune_guests", *args, stdout=StringIO())
    assert remaining() == before


def test_sessions_it_cannot_list_need_a_retention_past_their_lifetime(guests, settings):
    settings.SESSION_ENGINE = "django.contrib.sessions.backends.signed_cookies"
    before = remaining()
    with pytest.raises(CommandError, match="SESSION_COOKIE_AGE"):
        call_command("prune_guests", "--older-than", str(settings.SESSION_COOKIE_AGE - 60), stdout=StringIO())
    assert remaining() == before
    call_command("prune_guests", "--older-than", str(settings.SESSION_COOKIE_AGE), stdout=StringIO())
    # Without a list of sessions, the signed-in guest cannot be told apart: the retention covers it.
    assert "lurker" not in remaining()


def other_connection() -> psycopg.Connection:
    db = connection.settings_dict
    return psycopg.connect(
        host=db["HOST"] or "127.0.0.1", port=db["PORT"] or 5432, user=db["USER"] or "postgres", dbname=db["NAME"]
    )


RACING_POST = (
    "INSERT INTO messaging_message (room_id, seq, sender_id, client_msg_id, body, state, sent_at)"
    " VALUES (%s, 99, %s, 'racing', 'just in time', 'sent', now())"
)


def test_a_post_that_locked_its_user_first_keeps_the_guest(guests, lobby):
    """The racing insert checks its foreign key at once, which key-share locks
    the user's row: the prune's batch waits for it, then sees the post."""
    lurker = guests["lurker"]
    with other_connection() as other:
        other.execute("SET CONSTRAINTS ALL IMMEDIATE")
        other.execute(RACING_POST, [Room.objects.get(slug="lobby").pk, lurker.pk])
        out = StringIO()
        prune = threading.Thread(target=call_command, args=("prune_guests",), kwargs={"stdout": out})
        prune.start()
        wait_until_a_statement_waits_for_a_lock(connection.settings_dict["NAME"])
        other.commit()
        prune.join(60)
        assert not prune.is_alive()
    assert "lurker" in remaining()
    assert Message.objects.filter(client_msg_id="racing", sender=lurker).exists()
    assert "deleted 0 guest accounts" in out.getvalue()


def test_a_post_that_commits_after_the_prune_fails_and_deletes_nothing_else(guests, lobby):
    """Django's foreign keys are checked at commit: a post still open while the
    guest is deleted fails then, rather than leaving a message without a sender."""
    lurker = guests["lurker"]
    with other_connection() as other:
        other.execute(RACING_POST, [Room.objects.get(slug="lobby").pk, lurker.pk])
        call_command("prune_guests", stdout=StringIO())
        with pytest.raises(psycopg.errors.ForeignKeyViolation):
            other.commit()
    assert "lurker" not in remaining()
    assert not Message.objects.filter(client_msg_id="racing").exists()
    assert list(Message.objects.order_by("seq").values_list("body", flat=True)) == ["welcome", "I was here"]


def wait_until_a_statement_waits_for_a_lock(database: str, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    with connection.cursor() as cursor:
        while time.monotonic() < deadline:
            cursor.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = %s AND wait_event_type = 'Lock'", [database]
            )
            if cursor.fetchone()[0]:
                return
            time.sleep(0.05)
    raise AssertionError("the prune never waited for the racing post's lock")
