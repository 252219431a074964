"""The admin's moderation audit: who removed or invited whom, where; read-only but for
the moderator's actions on a room they are not in, each recorded."""

from __future__ import annotations

import pytest
from channels.db import database_sync_to_async
from django.contrib.auth.models import Permission
from django.test import AsyncClient
from django.urls import reverse

from messaging.events.models import Event
from messaging.models import Membership, Message, ModerationAction

from .conftest import apply_command

pytestmark = [pytest.mark.django_db(transaction=True)]

AUDIT = reverse("admin:messaging_moderationaction_changelist")


@pytest.fixture
def staff(client, django_user_model):
    user = django_user_model.objects.create_user(username="operator", is_staff=True)
    user.user_permissions.set(
        Permission.objects.filter(content_type__app_label="messaging", codename__startswith="view_")
    )
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


# Moderation from the admin of a private room its moderator is not in (PROTOCOL.md 1.2: staff cannot invite themselves).

MESSAGES = reverse("admin:messaging_message_changelist")
MEMBERSHIPS = reverse("admin:messaging_membership_changelist")


@database_sync_to_async
def operator(django_user_model):
    user = django_user_model.objects.create_user(username="operator-account", is_staff=True)
    user.user_permissions.set(
        Permission.objects.filter(content_type__app_label="messaging", codename__startswith="view_")
    )
    return user


async def signed_in_operator(django_user_model) -> tuple:
    """A staff user who may view the app's models and is in no room, and their admin session."""
    staff = await operator(django_user_model)
    admin = AsyncClient()
    await admin.aforce_login(staff)
    return staff, admin


async def club_with_spam(open_clients, make_user):
    """ana owns the private room `club`; bob accepted her invitation and posted `spam`."""
    ana, bob = await open_clients(await make_user("ana")), await open_clients(await make_user("bob"))
    assert (await ana.call("room.create", {"room": "club", "private": True}))["ok"]
    assert (await ana.call("room.invite", {"room": "club", "user": bob.user.pk}))["ok"]
    for client in (ana, bob):
        await client.join("club")
    assert (await bob.call("room.post", {"room": "club", "body": "spam"}))["ok"]
    await ana.frames("msg", 1)
    return ana, bob


async def test_staff_delete_a_message_of_a_private_room_they_are_not_in_from_the_admin(
    open_clients, make_user, django_user_model
):
    ana, bob = await club_with_spam(open_clients, make_user)
    staff, admin = await signed_in_operator(django_user_model)
    message = await Message.objects.aget(room__slug="club", seq=1)
    page = await admin.get(MESSAGES)
    assert 'value="delete_as_moderator"' in page.content.decode()
    response = await admin.post(MESSAGES, {"action": "delete_as_moderator", "_selected_action": [message.pk]})
    assert response.status_code == 302
    [deleted] = await ana.frames("msg.delete", 1)
    assert deleted["d"]["seq"] == 1 and deleted["d"]["version"] == 2
    await message.arefresh_from_db()
    assert message.deleted_at is not None and message.body == ""
    action = await ModerationAction.objects.aget(kind="delete")
    assert (action.actor_id, action.target_id, action.room_slug, action.seq) == (staff.pk, bob.user.pk, "club", 1)
    assert await Event.objects.filter(room="club", type="message.deleted").aexists()
    # Staff moderated the room without being in it, and still cannot read it.
    assert not await Membership.objects.filter(room__slug="club", user=staff).aexists()
    # The rest of the admin stays read-only.
    change = reverse("admin:messaging_message_change", args=[message.pk])
    assert (await admin.post(change, {"body": "rewritten"})).status_code == 403


async def test_staff_remove_a_member_of_a_private_room_they_are_not_in_but_not_its_owner(
    open_clients, make_user, django_user_model
):
    ana, bob = await club_with_spam(open_clients, make_user)
    staff, admin = await signed_in_operator(django_user_model)
    memberships = {m.user_id: m.pk async for m in Membership.objects.filter(room__slug="club")}
    response = await admin.post(
        MEMBERSHIPS,
        {"action": "remove_as_moderator", "_selected_action": [memberships[bob.user.pk], memberships[ana.user.pk]]},
        follow=True,
    )
    text = response.content.decode()
    assert "Members removed: 1" in text and "owner cannot be removed" in text
    [left] = await bob.frames("room.left", 1)
    assert left["d"]["by"] == {"id": staff.pk, "name": f"user {staff.pk}"}
    assert {m.user_id async for m in Membership.objects.filter(room__slug="club")} == {ana.user.pk}
    actions = [(a.actor_id, a.kind, a.target_id) async for a in ModerationAction.objects.filter(kind="remove")]
    assert actions == [(staff.pk, "remove", bob.user.pk)]
