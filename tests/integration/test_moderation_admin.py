"""The admin's moderation audit: who removed or invited whom, where; read-only."""
from __future__ import annotations

import pytest
from django.contrib.auth.models import Permission
from django.urls import reverse

from messaging.models import ModerationAction

from .conftest import apply_command

pytestmark = [pytest.mark.django_db(transaction=True)]

AUDIT = reverse("admin:messaging_moderationaction_changelist")


@pytest.fixture
def staff(client, django_user_model):
    user = django_user_model.objects.create_user(username="operator", is_staff=True)
    user.user_permissions.set(Permission.objects.filter(content_type__app_label="messaging", codename__startswith="view_"))
    client.force_login(user)
    return client


def test_the_audit_shows_who_removed_whom_and_changes_nothing(staff, django_user_model):
    ana, bob = (django_user_model.objects.create_user(username=n, first_name=n) for n in ("ana-owner", "bob-member"))
    apply_command(ana, "room.create", {"room": "club", "private": True})
    apply_command(ana, "room.invite", {"room": "club", "user": bob.pk})
    apply_command(ana, "room.remove", {"room": "club", "user": bob.pk})
    page = staff.get(AUDIT)
    assert page.status_code == 200
    text = page.content.decode()
    assert "removed a member" in text and "invited a member" in text and "club" in text
    assert "ana-owner" in text and "bob-member" in text
    action = ModerationAction.objects.get(kind="remove")
    detail = staff.get(reverse("admin:messaging_moderationaction_change", args=[action.pk]))
    assert detail.status_code == 200
    assert staff.post(reverse("admin:messaging_moderationaction_delete", args=[action.pk])).status_code == 403
    assert staff.get(reverse("admin:messaging_moderationaction_add")).status_code == 403
    assert ModerationAction.objects.count() == 2


def test_a_moderator_deleting_another_members_message_is_audited_and_their_own_is_not(staff, django_user_model):
    ana, bob = (django_user_model.objects.create_user(username=n, first_name=n) for n in ("ana-owner", "bob-member"))
    apply_command(ana, "room.create", {"room": "club", "private": False})
    apply_command(bob, "room.join", {"room": "club"})
    bobs = apply_command(bob, "room.post", {"room": "club", "body": "spam"}).data
    anas = apply_command(ana, "room.post", {"room": "club", "body": "mine"}).data
    assert apply_command(ana, "message.delete", {"room": "club", "seq": bobs["seq"]}).data["version"] == 2
    assert apply_command(ana, "message.delete", {"room": "club", "seq": anas["seq"]}).data["version"] == 2
    [action] = ModerationAction.objects.all()
    assert (action.kind, action.actor_id, action.target_id, action.seq) == ("delete", ana.pk, bob.pk, bobs["seq"])
    text = staff.get(AUDIT).content.decode()
    assert "deleted a message" in text and "bob-member" in text
