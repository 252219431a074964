"""prune_command_records deletes old records of custom types only; messages and post records stay."""
from __future__ import annotations

from datetime import timedelta
from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.utils import timezone

from messaging.models import CommandRecord, Message, Room

pytestmark = [pytest.mark.django_db]


@pytest.fixture
def records(django_user_model):
    user = django_user_model.objects.create_user(username="ana")
    room = Room.objects.create(slug="lobby", last_seq=1)
    Message.objects.create(room=room, seq=1, sender=user, client_msg_id="old-post", body="hi", sent_at=timezone.now())
    made = {}
    for command_id, type, age_days in [
        ("old-post", "room.post", 90), ("old-reaction", "reaction.add", 90), ("old-credit", "wallet.credit", 31),
        ("new-reaction", "reaction.add", 1), ("new-post", "room.post", 1),
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
