"""prune_command_records deletes old records of custom types only; messages and post records stay.
prune_watermark_moves deletes old receipt times, and the admin's times never move to a later receipt;
prune_moderation_actions deletes the moderation audit past its retention; prune_empty_rooms deletes
rooms that never had a message, are old and were joined by nobody lately."""

from __future__ import annotations

import uuid
from datetime import timedelta
from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.utils import timezone

from messaging.chat.receipts import recipient_receipts
from messaging.models import (
    CommandRecord,
    DirectRoom,
    Invitation,
    Membership,
    Message,
    ModerationAction,
    Room,
    WatermarkMove,
)

from .conftest import apply_command

# Commands run through the pipeline, whose database work is on its own connections: committed data.
pytestmark = [pytest.mark.django_db(transaction=True)]


@pytest.fixture
def records(django_user_model):
    user = django_user_model.objects.create_user(username="ana")
    room = Room.objects.create(slug="lobby", last_seq=1)
    Message.objects.create(room=room, seq=1, sender=user, client_msg_id="old-post", body="hi", sent_at=timezone.now())
    made = {}
    for command_id, type, age_days in [
        ("old-post", "room.post", 90),
        ("old-reaction", "reaction.add", 90),
        ("old-credit", "wallet.credit", 31),
        ("new-reaction", "reaction.add", 1),
        ("new-post", "room.post", 1),
    ]:
        record = CommandRecord.objects.create(user=user, command_id=command_id, type=type, fingerprint="f", result={})
        # created_at is auto_now_add: move it back afterwards.
        CommandRecord.objects.filter(pk=record.pk).update(created_at=timezone.now() - timedelta(days=age_days))
        made[command_id] = record
    return made


def remaining() -> set[str]:
    return set(CommandRecord.objects.values_list("command_id", flat=True))


def test_prunes_old_custom_records_and_keeps_the_rest(records):
    out = StringIO()
    call_command("prune_command_records", "--batch", "1", stdout=out)
    assert remaining() == {"old-post", "new-reaction", "new-post"}
    assert "deleted 2 command records" in out.getvalue() and "never pruned: room.post" in out.getvalue()
    assert Message.objects.filter(client_msg_id="old-post").exists()


def test_retention_setting_and_override(records, settings):
    settings.MESSAGING = {**settings.MESSAGING, "RECORD_RETENTION": 60 * 24 * 3600}
    call_command("prune_command_records", stdout=StringIO())
    assert remaining() == {"old-post", "old-credit", "new-reaction", "new-post"}
    call_command("prune_command_records", "--older-than", str(12 * 3600), stdout=StringIO())
    assert remaining() == {"old-post", "new-post"}


def test_dry_run_deletes_nothing(records):
    out = StringIO()
    call_command("prune_command_records", "--dry-run", stdout=out)
    assert "would delete 2 command records" in out.getvalue()
    assert len(remaining()) == 5


@pytest.mark.parametrize("args", [["--older-than", "0"], ["--older-than", "-5"], ["--batch", "0"]])
def test_nonsense_arguments_are_refused(records, args):
    with pytest.raises(CommandError):
        call_command("prune_command_records", *args, stdout=StringIO())
    assert len(remaining()) == 5


@pytest.fixture
def receipts(django_user_model):
    """Ana posts 1-6 in the lobby; Bob's receipts date them: 1-2 delivered 100 days ago,
    3-4 delivered and 1-2 read 50 days ago, 5-6 delivered and read today. Cat delivered 1, 100 days ago."""
    ana, bob, cat = (django_user_model.objects.create_user(username=name) for name in ("ana", "bob", "cat"))
    for user in (ana, bob, cat):
        apply_command(user, "room.join", {"room": "lobby"})
    for n in range(6):
        apply_command(ana, "room.post", {"room": "lobby", "body": f"m{n}"})
    for age, delivered, read in [(100, 2, None), (50, 4, 2), (0, 6, 6)]:
        apply_command(bob, "receipt", {"room": "lobby", "delivered": delivered, **({"read": read} if read else {})})
        move = WatermarkMove.objects.filter(membership__user=bob).latest("pk")
        WatermarkMove.objects.filter(pk=move.pk).update(at=timezone.now() - timedelta(days=age))
    apply_command(cat, "receipt", {"room": "lobby", "delivered": 1})
    WatermarkMove.objects.filter(membership__user=cat).update(at=timezone.now() - timedelta(days=100))
    return {"ana": ana, "bob": bob, "cat": cat}


def bobs_times() -> dict[int, tuple]:
    """Per seq: (delivered, read) times of Bob's receipts as the admin shows them, as ages in whole days."""
    times = {}
    for message in Message.objects.filter(room__slug="lobby").order_by("seq"):
        (bob,) = [m for m in recipient_receipts(message) if m.user.username == "bob"]
        times[message.seq] = tuple(
            None if at is None else (timezone.now() - at).days for at in (bob.delivered_at, bob.read_at)
        )
    return times


def test_pruned_receipt_times_read_as_unknown_never_as_a_later_receipt(receipts):
    assert bobs_times() == {1: (100, 50), 2: (100, 50), 3: (50, 0), 4: (50, 0), 5: (0, 0), 6: (0, 0)}
    states = list(Message.objects.order_by("seq").values_list("state", "delivered_at", "read_at"))
    out = StringIO()
    call_command("prune_watermark_moves", "--older-than", str(60 * 24 * 3600), "--batch", "1", stdout=out)
    assert "deleted 2 watermark moves" in out.getvalue(), "bob's oldest and cat's"
    # The first move left that reached 1 and 2 is the one 50 days ago: it would
    # have dated their delivery 50 days too late.
    assert bobs_times() == {1: (None, 50), 2: (None, 50), 3: (50, 0), 4: (50, 0), 5: (0, 0), 6: (0, 0)}
    bob = Membership.objects.get(user=receipts["bob"])
    assert (bob.delivered, bob.read, bob.pruned_delivered, bob.pruned_read) == (6, 6, 2, 0)
    assert Membership.objects.get(user=receipts["cat"]).pruned_delivered == 1
    assert list(Message.objects.order_by("seq").values_list("state", "delivered_at", "read_at")) == states

    call_command("prune_watermark_moves", "--older-than", str(30 * 24 * 3600), stdout=StringIO())
    assert bobs_times() == {1: (None, None), 2: (None, None), 3: (None, 0), 4: (None, 0), 5: (0, 0), 6: (0, 0)}
    bob.refresh_from_db()
    assert (bob.pruned_delivered, bob.pruned_read) == (4, 2)
    # Later receipts are dated as before; the pruned watermarks only grow.
    apply_command(receipts["ana"], "room.post", {"room": "lobby", "body": "m7"})
    apply_command(receipts["bob"], "receipt", {"room": "lobby", "delivered": 7, "read": 7})
    assert bobs_times()[7] == (0, 0)
    call_command("prune_watermark_moves", stdout=StringIO())
    bob.refresh_from_db()
    assert (bob.pruned_delivered, bob.pruned_read) == (4, 2)


def test_receipt_times_retention_setting_and_dry_run(receipts, settings):
    out = StringIO()
    call_command("prune_watermark_moves", "--dry-run", stdout=out)
    assert "would delete 2 watermark moves" in out.getvalue()
    assert WatermarkMove.objects.count() == 4
    settings.MESSAGING = {**settings.MESSAGING, "RECEIPT_TIMES_RETENTION": 40 * 24 * 3600}
    call_command("prune_watermark_moves", stdout=StringIO())
    assert sorted(WatermarkMove.objects.values_list("delivered", flat=True)) == [6]


@pytest.mark.parametrize("args", [["--older-than", "0"], ["--older-than", "-5"], ["--batch", "0"]])
def test_nonsense_arguments_prune_no_receipt_times(receipts, args):
    with pytest.raises(CommandError):
        call_command("prune_watermark_moves", *args, stdout=StringIO())
    assert WatermarkMove.objects.count() == 4


def test_prune_moderation_actions_deletes_the_audit_older_than_its_retention_in_batches(django_user_model):
    ana, bob = (django_user_model.objects.create_user(username=name) for name in ("ana", "bob"))
    room = Room.objects.create(slug="lobby")
    for age_days, kind in [(400, "remove"), (366, "delete"), (30, "invite"), (0, "remove")]:
        action = ModerationAction.objects.create(room=room, room_slug="lobby", actor=ana, target=bob, kind=kind)
        ModerationAction.objects.filter(pk=action.pk).update(at=timezone.now() - timedelta(days=age_days))
    out = StringIO()
    call_command("prune_moderation_actions", "--dry-run", stdout=out)
    assert out.getvalue().startswith("would delete 2 ") and ModerationAction.objects.count() == 4
    out = StringIO()
    call_command("prune_moderation_actions", "--batch", "1", stdout=out)
    assert out.getvalue().startswith("deleted 2 ")
    assert sorted(ModerationAction.objects.values_list("kind", flat=True)) == ["invite", "remove"]
    call_command("prune_moderation_actions", "--older-than", str(7 * 24 * 3600), stdout=StringIO())
    assert list(ModerationAction.objects.values_list("kind", flat=True)) == ["remove"]
    with pytest.raises(CommandError):
        call_command("prune_moderation_actions", "--older-than", "0", stdout=StringIO())


def test_prune_notifications_deletes_mentions_past_their_retention(django_user_model, settings):
    from messaging.events.models import Notification

    user = django_user_model.objects.create_user(username="bob")
    for seq, age_days, email in [(1, 40, "sent"), (2, 31, "held"), (3, 29, "sent"), (4, 0, "pending")]:
        note = Notification.objects.create(
            user=user, event_id=uuid.uuid4(), room="lobby", seq=seq, sender_name="Ana", body="@bob hi", email=email
        )
        Notification.objects.filter(pk=note.pk).update(created_at=timezone.now() - timedelta(days=age_days))
    out = StringIO()
    call_command("prune_notifications", "--dry-run", stdout=out)
    assert "would delete 2 mentions" in out.getvalue() and Notification.objects.count() == 4
    call_command("prune_notifications", "--batch", "1", stdout=out)
    assert "deleted 2 mentions" in out.getvalue()
    assert sorted(Notification.objects.values_list("seq", flat=True)) == [3, 4]  # NOTIFICATION_RETENTION: 30 days
    settings.MESSAGING = {**settings.MESSAGING, "NOTIFICATION_RETENTION": 24 * 3600}
    call_command("prune_notifications", stdout=out)
    assert list(Notification.objects.values_list("seq", flat=True)) == [4]


def aged(room: Room, days: float) -> Room:
    Room.objects.filter(pk=room.pk).update(created_at=timezone.now() - timedelta(days=days))
    return room


def joined(room: Room, user, days_ago: float) -> None:
    membership = Membership.objects.create(room=room, user=user)
    Membership.objects.filter(pk=membership.pk).update(joined_at=timezone.now() - timedelta(days=days_ago))


def test_prune_empty_rooms_deletes_only_old_rooms_never_written_in_nor_joined_lately(django_user_model):
    ana, bob = (django_user_model.objects.create_user(username=name) for name in ("ana", "bob"))
    unused = aged(Room.objects.create(slug="unused", created_by=ana, created_from="203.0.113.7"), 40)
    joined(unused, ana, 40)
    joined(unused, bob, 35)
    ModerationAction.objects.create(room=unused, room_slug="unused", actor=ana, target=bob, kind="invite")
    direct = aged(Room.objects.create(slug="dm-0123", private=True), 40)
    DirectRoom.objects.create(room=direct, low=ana, high=bob)
    joined(direct, ana, 40)
    Invitation.objects.create(room=direct, user=bob, invited_by=ana, created_at=timezone.now() - timedelta(days=40))
    joined(aged(Room.objects.create(slug="joined-lately"), 40), bob, 2)
    invited_lately = aged(Room.objects.create(slug="invited-lately", private=True, owner=ana), 40)
    joined(invited_lately, ana, 40)
    Invitation.objects.create(
        room=invited_lately, user=bob, invited_by=ana, created_at=timezone.now() - timedelta(days=3)
    )
    aged(Room.objects.create(slug="young"), 20)
    written = aged(Room.objects.create(slug="written", last_seq=1, last_rev=1), 400)
    Message.objects.create(room=written, seq=1, sender=ana, client_msg_id="m1", body="hi", sent_at=timezone.now())
    # Changed without a seq, or a message its counter does not show: used, kept.
    aged(Room.objects.create(slug="revised", last_rev=3), 40)
    odd = aged(Room.objects.create(slug="odd"), 40)
    Message.objects.create(room=odd, seq=1, sender=ana, client_msg_id="m2", body="hi", sent_at=timezone.now())

    out = StringIO()
    call_command("prune_empty_rooms", "--dry-run", stdout=out)
    assert out.getvalue().startswith("would delete 2 unused empty rooms") and Room.objects.count() == 8
    out = StringIO()
    call_command("prune_empty_rooms", "--batch", "1", stdout=out)
    assert out.getvalue().startswith("deleted 2 unused empty rooms")
    assert set(Room.objects.values_list("slug", flat=True)) == {
        "joined-lately",
        "invited-lately",
        "young",
        "written",
        "revised",
        "odd",
    }
    # What hung on them went with them; the audit keeps its row, by slug.
    assert not Membership.objects.filter(room_id__in=[unused.pk, direct.pk]).exists()
    assert not DirectRoom.objects.exists()
    assert list(Invitation.objects.values_list("room__slug", flat=True)) == ["invited-lately"]
    assert ModerationAction.objects.get().room_id is None
    # The slug is free: joining it makes a new room.
    apply_command(bob, "room.join", {"room": "unused"})
    assert Room.objects.get(slug="unused").created_by == bob

    # A shorter retention, given or set, reaches younger rooms.
    call_command("prune_empty_rooms", "--older-than", str(10 * 24 * 3600), stdout=StringIO())
    assert not Room.objects.filter(slug="young").exists()


def test_prune_empty_rooms_follows_its_setting_and_refuses_nonsense(settings):
    aged(Room.objects.create(slug="week-old"), 7)
    call_command("prune_empty_rooms", stdout=StringIO())
    assert Room.objects.filter(slug="week-old").exists()
    settings.MESSAGING = {**settings.MESSAGING, "EMPTY_ROOM_RETENTION": 6 * 24 * 3600}
    call_command("prune_empty_rooms", stdout=StringIO())
    assert not Room.objects.exists()
    for args in (["--older-than", "0"], ["--batch", "0"]):
        with pytest.raises(CommandError):
            call_command("prune_empty_rooms", *args, stdout=StringIO())
