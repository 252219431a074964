"""Invitations are requests (PROTOCOL.md 1.2): `room.invite` and `dm.open` make an
invitation, not a membership; the invitee is nobody in the room until it accepts
with `room.join`, and declines with `room.leave`. On the real consumer, with
real PostgreSQL and Redis."""

from __future__ import annotations

import pytest
from channels.db import database_sync_to_async

from messaging.events.mentions import notify
from messaging.events.models import Event, Notification
from messaging.models import Invitation, Membership, ModerationAction

from .conftest import apply_command

pytestmark = [pytest.mark.django_db(transaction=True)]


@database_sync_to_async
def members_of(slug: str) -> set:
    return set(Membership.objects.filter(room__slug=slug).values_list("user_id", flat=True))


@database_sync_to_async
def invitation(slug: str, user) -> Invitation | None:
    return Invitation.objects.filter(room__slug=slug, user=user).first()


@database_sync_to_async
def make_staff(user) -> None:
    user.is_staff = True
    user.save(update_fields=["is_staff"])


async def club(open_clients, make_user):
    """ana owns the private room `club`, cat is in it (she accepted), bob is invited and has not answered."""
    ana, bob, cat = [await open_clients(await make_user(name)) for name in ("ana", "bob", "cat")]
    assert (await ana.call("room.create", {"room": "club", "private": True}))["ok"]
    for guest in (bob, cat):
        ack = await ana.call("room.invite", {"room": "club", "user": guest.user.pk})
        assert ack["ok"] and ack["d"] == {"room": "club", "user": guest.user.pk}
        [invited] = await guest.frames("invited", 1)
        assert invited["d"] == {"room": "club", "by": {"id": ana.user.pk, "name": "ana"}}
    for member in (ana, cat):
        await member.join("club")
    return ana, bob, cat


async def test_an_invitee_is_nobody_in_the_room_and_hears_none_of_it(make_user, open_clients):
    ana, bob, cat = await club(open_clients, make_user)
    assert await members_of("club") == {ana.user.pk, cat.user.pk}
    # Not in the members' lists...
    listed = [m["user"] for m in (await ana.join("club"))["d"]["members"]]
    paged = [m["user"] for m in (await cat.call("room.members", {"room": "club"}))["d"]["members"]]
    assert bob.user.pk not in listed and bob.user.pk not in paged
    # ...and none of the room's frames: a post, a receipt's status, typing, a reaction, an edit, a delete.
    assert (await ana.call("room.post", {"room": "club", "body": "members only"}))["ok"]
    assert (await cat.call("receipt", {"room": "club", "read": 1}))["ok"]
    assert (await ana.call("typing", {"room": "club", "typing": True}))["ok"]
    assert (await cat.call("reaction.add", {"room": "club", "seq": 1}))["ok"]
    assert (await ana.call("message.edit", {"room": "club", "seq": 1, "body": "edited"}))["ok"]
    assert (await ana.call("message.delete", {"room": "club", "seq": 1}))["ok"]
    await cat.frames("msg.delete", 1)
    # A user who is a member of nothing opens their first socket: presence of theirs reaches nobody,
    # and a member's presence does not reach the invitee.
    dan = await open_clients(await make_user("dan"))
    await dan.close()
    cat_again = await open_clients(cat.user)
    await cat.close()
    await cat_again.close()
    for t, d in (
        ("room.post", {"room": "club", "body": "let me in"}),
        ("receipt", {"room": "club", "read": 1}),
        ("typing", {"room": "club", "typing": True}),
        ("room.members", {"room": "club"}),
        ("room.history", {"room": "club", "before": 2}),
    ):
        assert (await bob.call(t, d))["error"]["code"] == "forbidden", t
    assert not [f for f in bob.inbox if f["t"] != "ack"]
    assert await bob.nothing_more(0.5)


async def test_members_see_nothing_of_an_invitees_presence(make_user, open_clients):
    ana, bob, cat = await club(open_clients, make_user)
    await bob.close()
    bob_again = await open_clients(bob.user)
    await bob_again.close()
    # Presence goes only to rooms where the user is a member: bob is a member of none.
    assert not [f for f in ana.inbox + cat.inbox if f["t"] == "presence"]
    assert await ana.nothing_more(0.5) and await cat.nothing_more(0.1)
    members = (await ana.call("room.members", {"room": "club"}))["d"]["members"]
    assert {m["user"] for m in members} == {ana.user.pk, cat.user.pk}


async def test_presence_goes_to_the_rooms_a_user_is_a_member_of_not_those_they_are_invited_to(make_user, open_clients):
    ana, bob, cat = await club(open_clients, make_user)
    dan = await open_clients(await make_user("dan"))
    for client in (bob, dan):
        await client.join("lobby")
    await bob.close()
    [offline] = await dan.frames("presence", 1)
    assert offline["d"] == {"user": bob.user.pk, "room": "lobby", "online": False}
    assert not [f for f in ana.inbox + cat.inbox if f["t"] == "presence"]
    assert await ana.nothing_more(0.5) and await cat.nothing_more(0.1)


async def test_rooms_list_shows_an_invitation_and_nothing_of_the_room(make_user, open_clients):
    ana, bob, _ = await club(open_clients, make_user)
    assert (await ana.call("room.post", {"room": "club", "body": "activity"}))["ok"]
    await bob.join("lobby")
    rooms = (await bob.call("rooms.list", {}))["d"]["rooms"]
    assert [r["room"] for r in rooms] == ["lobby", "club"]
    assert rooms[1] == {"room": "club", "private": True, "invited": True, "by": {"id": ana.user.pk, "name": "ana"}}


async def test_accepting_with_a_join_makes_a_member(make_user, open_clients):
    ana, bob, cat = await club(open_clients, make_user)
    assert (await ana.call("room.post", {"room": "club", "body": "before bob"}))["ok"]
    assert bob.user.pk not in await members_of("club")
    ack = await bob.join("club")
    assert bob.user.pk in [m["user"] for m in ack["d"]["members"]]
    assert await members_of("club") == {ana.user.pk, bob.user.pk, cat.user.pk}
    assert await invitation("club", bob.user) is None
    [entry] = [r for r in (await bob.call("rooms.list", {}))["d"]["rooms"] if r["room"] == "club"]
    assert "invited" not in entry and entry["last_seq"] == 1
    assert (await cat.call("room.post", {"room": "club", "body": "welcome"}))["ok"]
    assert (await bob.messages_until("club", 2))[2]["d"]["body"] == "welcome"


async def test_declining_with_a_leave_tells_every_socket_and_closes_the_room_again(make_user, open_clients):
    ana, bob, cat = await club(open_clients, make_user)
    bob_elsewhere = await open_clients(bob.user)
    ack = await bob.call("room.leave", {"room": "club"})
    assert ack["ok"] and ack["d"] == {"room": "club"}
    for client in (bob, bob_elsewhere):
        [left] = await client.frames("room.left", 1)
        assert left["d"] == {"room": "club", "user": bob.user.pk, "by": None}
    declined = await invitation("club", bob.user)
    assert declined is not None and declined.declined_at is not None
    assert (await bob.call("rooms.list", {}))["d"]["rooms"] == []
    assert (await bob.call("room.join", {"room": "club"}))["error"]["code"] == "forbidden"
    assert (await bob.call("room.leave", {"room": "club"}))["error"]["code"] == "forbidden"
    assert await members_of("club") == {ana.user.pk, cat.user.pk}


async def test_who_declined_or_left_is_not_asked_again_for_a_while(make_user, open_clients, settings):
    ana, bob, cat = await club(open_clients, make_user)
    assert (await bob.call("room.leave", {"room": "club"}))["ok"]
    assert (await cat.call("room.leave", {"room": "club"}))["ok"]
    for client in (bob, cat):
        await client.frames("room.left", 1)
        ack = await ana.call("room.invite", {"room": "club", "user": client.user.pk})
        assert ack["error"]["code"] == "forbidden" and ack["error"]["retry"] is False, ack
    assert await bob.nothing_more(0.5) and await cat.nothing_more(0.1)
    # Once REINVITE_AFTER has passed (0 here: at once), one new invitation, which counts as one.
    settings.MESSAGING = {**settings.MESSAGING, "REINVITE_AFTER": 0}
    assert (await ana.call("room.invite", {"room": "club", "user": bob.user.pk}))["ok"]
    [invited] = await bob.frames("invited", 1)
    assert invited["d"]["room"] == "club"
    assert (await ana.call("room.invite", {"room": "club", "user": bob.user.pk}))["ok"]
    assert await bob.nothing_more(0.5)
    invites = await ModerationAction.objects.filter(kind="invite", target=bob.user).acount()
    assert invites == 2


async def test_staff_cannot_invite_themselves_into_a_private_room_nor_read_it(make_user, open_clients):
    ana, bob, _ = await club(open_clients, make_user)
    assert (await ana.call("room.post", {"room": "club", "body": "not for staff"}))["ok"]
    staff = await open_clients(await make_user("mod"))
    await make_staff(staff.user)
    ack = await staff.call("room.invite", {"room": "club", "user": staff.user.pk})
    assert ack["error"]["code"] == "forbidden", ack
    for t, d in (
        ("room.join", {"room": "club"}),
        ("room.history", {"room": "club", "before": 2}),
        ("room.members", {"room": "club"}),
    ):
        assert (await staff.call(t, d))["error"]["code"] == "forbidden", t
    assert staff.user.pk not in await members_of("club") and await invitation("club", staff.user) is None
    assert not [f for f in staff.inbox if f["t"] == "msg"]
    # Inviting another user stays theirs to do.
    dan = await open_clients(await make_user("dan"))
    assert (await staff.call("room.invite", {"room": "club", "user": dan.user.pk}))["ok"]


async def test_a_moderator_withdraws_an_invitation_with_room_remove(make_user, open_clients):
    ana, bob, _ = await club(open_clients, make_user)
    assert bob.user.pk not in await members_of("club")
    ack = await ana.call("room.remove", {"room": "club", "user": bob.user.pk})
    assert ack["ok"] and ack["d"] == {"room": "club", "user": bob.user.pk}
    [left] = await bob.frames("room.left", 1)
    assert left["d"] == {"room": "club", "user": bob.user.pk, "by": {"id": ana.user.pk, "name": "ana"}}
    assert await invitation("club", bob.user) is None
    assert (await bob.call("room.join", {"room": "club"}))["error"]["code"] == "forbidden"
    # Withdrawn is not declined: she may ask again at once.
    assert (await ana.call("room.invite", {"room": "club", "user": bob.user.pk}))["ok"]
    await bob.frames("invited", 1)


async def test_the_invitations_rooms_list_shows_are_bounded(make_user, open_clients, settings):
    settings.MESSAGING = {**settings.MESSAGING, "INVITATIONS_LIST_LIMIT": 2}
    ana, bob = await open_clients(await make_user("ana")), await open_clients(await make_user("bob"))
    for slug in ("one", "two", "three"):
        assert (await ana.call("room.create", {"room": slug, "private": True}))["ok"]
        assert (await ana.call("room.invite", {"room": slug, "user": bob.user.pk}))["ok"]
    listed = (await bob.call("rooms.list", {}))["d"]
    assert [r["room"] for r in listed["rooms"]] == ["three", "two"] and listed["more"] is True
    assert (await bob.call("room.leave", {"room": "three"}))["ok"]
    listed = (await bob.call("rooms.list", {}))["d"]
    assert [r["room"] for r in listed["rooms"]] == ["two", "one"] and listed["more"] is False


async def test_either_user_of_a_direct_room_joins_it_again_and_nobody_else(make_user, open_clients):
    ana, bob, eve = [await open_clients(await make_user(name)) for name in ("ana", "bob", "eve")]
    room = (await ana.call("dm.open", {"user": bob.user.pk}))["d"]["room"]
    await bob.frames("invited", 1)
    assert (await bob.call("room.leave", {"room": room}))["ok"]
    assert (await ana.call("room.leave", {"room": room}))["ok"]
    assert await members_of(room) == set()
    # Neither is asked back by the other's open; each comes back by their own join.
    assert (await ana.call("dm.open", {"user": bob.user.pk}))["ok"]
    await ana.frames("room.left", 1)
    await bob.frames("room.left", 1)
    assert await bob.nothing_more(0.5)
    await bob.join(room)
    assert await members_of(room) == {ana.user.pk, bob.user.pk}
    assert (await eve.call("room.join", {"room": room}))["error"]["code"] == "forbidden"


def test_a_mention_of_an_invitee_notifies_them_of_nothing(django_user_model):
    ana, bob, cat = (
        django_user_model.objects.create_user(username=f"guest-{n}", first_name=n.title(), email=f"{n}@example.com")
        for n in ("ana", "bob", "cat")
    )
    apply_command(ana, "room.create", {"room": "club", "private": True})
    for guest in (bob, cat):
        apply_command(ana, "room.invite", {"room": "club", "user": guest.pk})
    apply_command(cat, "room.join", {"room": "club"})
    apply_command(ana, "room.post", {"room": "club", "body": "@bob @cat look"})
    event = Event.objects.get(room="club", type="message.posted")
    notify({"event_id": str(event.event_id), "type": event.type, "room": event.room, "data": event.data})
    # cat accepted and is told; bob, only invited, is nobody there.
    assert set(Notification.objects.values_list("user__first_name", flat=True)) == {"Cat"}
