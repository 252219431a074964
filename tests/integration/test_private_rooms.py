"""Private rooms (PROTOCOL.md 1.1): room.create, room.invite (an invitation, 1.2), invited, and the
extensions room.leave and room.remove, on the real consumer."""

from __future__ import annotations

import asyncio

import pytest
from channels.db import database_sync_to_async

from messaging.models import CommandRecord, Invitation, Membership, ModerationAction, Room

pytestmark = [pytest.mark.django_db(transaction=True)]


@database_sync_to_async
def members_of(slug: str) -> set:
    return set(Membership.objects.filter(room__slug=slug).values_list("user_id", flat=True))


@database_sync_to_async
def make_staff(user) -> None:
    user.is_staff = True
    user.save(update_fields=["is_staff"])


@database_sync_to_async
def invited_to(slug: str) -> set:
    return set(Invitation.objects.filter(room__slug=slug, declined_at__isnull=True).values_list("user_id", flat=True))


async def private_room(open_clients, make_user, slug: str = "secret"):
    """ana owns the private room `slug`; bob is a member by invitation, which he accepted; eve is not."""
    ana, bob, eve = [await open_clients(await make_user(name)) for name in ("ana", "bob", "eve")]
    assert (await ana.call("room.create", {"room": slug, "private": True}))["ok"]
    assert (await ana.call("room.invite", {"room": slug, "user": bob.user.pk}))["ok"]
    await bob.frames("invited", 1)
    await bob.join(slug)
    return ana, bob, eve


async def test_create_makes_the_sender_owner_and_first_member(make_user, open_clients):
    ana = await open_clients(await make_user("ana"))
    ack = await ana.call("room.create", {"room": "plans", "private": True}, id="create-1")
    assert ack["ok"] and ack["d"] == {"room": "plans", "private": True}
    room = await database_sync_to_async(Room.objects.get)(slug="plans")
    assert room.private and room.owner_id == ana.user.pk
    assert await members_of("plans") == {ana.user.pk}


async def test_create_is_exactly_once(make_user, open_clients):
    user = await make_user("ana")
    sockets = [await open_clients(user) for _ in range(4)]
    await asyncio.gather(
        *(s.send("room.create", {"room": "once", "private": False}, id="create-once") for s in sockets)
    )
    acks = await asyncio.gather(*(s.ack("create-once") for s in sockets))
    assert all(a["ok"] for a in acks), acks
    assert sorted(a["dup"] for a in acks) == [False, True, True, True]
    # A retry long after still gets the first ack, not "exists".
    again = await sockets[0].call("room.create", {"room": "once", "private": False}, id="create-once")
    assert again["ok"] and again["dup"]
    assert await database_sync_to_async(Room.objects.filter(slug="once").count)() == 1
    assert await database_sync_to_async(CommandRecord.objects.filter(type="room.create").count)() == 1


async def test_create_of_an_existing_slug_is_invalid_and_changes_nothing(make_user, open_clients):
    ana, bob = await open_clients(await make_user("ana")), await open_clients(await make_user("bob"))
    await ana.join("lobby")
    ack = await bob.call("room.create", {"room": "lobby", "private": True})
    assert ack["error"]["code"] == "invalid"
    room = await database_sync_to_async(Room.objects.get)(slug="lobby")
    assert not room.private and room.owner_id is None
    for bad in ({"room": "x", "private": "yes"}, {"room": "Bad Slug"}):
        assert (await bob.call("room.create", bad))["error"]["code"] == "invalid"


async def test_create_answers_every_taken_slug_alike_whoever_it_is_and_whatever_it_is(make_user, open_clients):
    ana, bob, eve = [await open_clients(await make_user(name)) for name in ("ana", "bob", "eve")]
    await ana.join("lobby")
    assert (await ana.call("room.create", {"room": "secret", "private": True}))["ok"]
    dm = (await ana.call("dm.open", {"user": bob.user.pk}))["d"]["room"]
    # A private room, a direct one and a public one: one answer, which tells nothing of which.
    answers = [
        (await eve.call("room.create", {"room": slug, "private": private}))["error"]
        for slug in ("secret", dm, "lobby")
        for private in (True, False)
    ]
    assert answers == [{"code": "invalid", "message": "this slug is taken", "retry": False}] * 6


async def test_a_non_member_is_refused_on_every_command_of_a_private_room(make_user, open_clients):
    ana, bob, eve = await private_room(open_clients, make_user)
    await ana.join("secret")
    assert (await ana.call("room.post", {"room": "secret", "body": "hidden"}))["ok"]
    commands = [
        ("room.join", {"room": "secret"}),
        ("room.join", {"room": "secret", "since": 0}),
        ("room.post", {"room": "secret", "body": "let me in"}),
        ("receipt", {"room": "secret", "delivered": 1}),
        ("reaction.add", {"room": "secret", "seq": 1}),
        ("room.members", {"room": "secret"}),
        ("typing", {"room": "secret", "typing": True}),
        ("room.invite", {"room": "secret", "user": eve.user.pk}),
        ("room.leave", {"room": "secret"}),
        ("room.remove", {"room": "secret", "user": bob.user.pk}),
    ]
    for t, d in commands:
        ack = await eve.call(t, d)
        assert ack["ok"] is False and ack["error"]["code"] == "forbidden", (t, ack)
    # Nothing of the room reached eve, and nothing changed.
    assert not [f for f in eve.inbox if f["t"] != "ack"]
    assert await members_of("secret") == {ana.user.pk, bob.user.pk}
    assert await eve.nothing_more()


async def test_a_private_room_is_not_told_apart_from_a_missing_one(make_user, open_clients):
    _, _, eve = await private_room(open_clients, make_user)
    hidden = await eve.call("room.invite", {"room": "secret", "user": eve.user.pk})
    missing = await eve.call("room.invite", {"room": "nowhere", "user": eve.user.pk})
    assert hidden["error"] == missing["error"]


async def test_invited_member_joins_posts_and_hears_the_room(make_user, open_clients):
    ana, bob, _ = await private_room(open_clients, make_user)
    for client in (ana, bob):
        await client.join("secret")
    assert (await bob.call("room.post", {"room": "secret", "body": "thanks"}))["ok"]
    for client in (ana, bob):
        [msg] = await client.frames("msg", 1)
        assert msg["d"]["body"] == "thanks"


async def test_invite_reaches_every_socket_of_the_user_once(make_user, open_clients):
    ana = await open_clients(await make_user("ana"))
    bob_user = await make_user("bob")
    bobs = [await open_clients(bob_user) for _ in range(3)]
    assert (await ana.call("room.create", {"room": "club", "private": True}))["ok"]
    ack = await ana.call("room.invite", {"room": "club", "user": bob_user.pk})
    assert ack["ok"] and ack["d"] == {"room": "club", "user": bob_user.pk}
    for bob in bobs:
        [invited] = await bob.frames("invited", 1)
        assert invited["d"] == {"room": "club", "by": {"id": ana.user.pk, "name": "ana"}}
    # Repeating it is fine and tells nobody again.
    assert (await ana.call("room.invite", {"room": "club", "user": bob_user.pk}))["ok"]
    for bob in bobs:
        assert await bob.nothing_more()


async def test_only_the_owner_or_staff_invites(make_user, open_clients):
    ana, bob, eve = await private_room(open_clients, make_user)
    ack = await bob.call("room.invite", {"room": "secret", "user": eve.user.pk})
    assert ack["error"]["code"] == "forbidden"
    assert eve.user.pk not in await members_of("secret")
    staff = await open_clients(await make_user("mod"))
    await make_staff(staff.user)
    assert (await staff.call("room.invite", {"room": "secret", "user": eve.user.pk}))["ok"]
    # An invitation, not a membership (PROTOCOL.md 1.2).
    assert eve.user.pk not in await members_of("secret") and eve.user.pk in await invited_to("secret")
    actions = await database_sync_to_async(
        lambda: list(ModerationAction.objects.values_list("actor_id", "kind", "target_id"))
    )()
    assert (staff.user.pk, "invite", eve.user.pk) in actions


async def test_invite_of_a_missing_user_is_invalid(make_user, open_clients):
    ana, _, _ = await private_room(open_clients, make_user)
    for bad in ({"room": "secret", "user": 10**12}, {"room": "secret", "user": "7"}, {"room": "secret"}):
        assert (await ana.call("room.invite", bad))["error"]["code"] == "invalid"


async def test_invites_past_the_hourly_limit_are_rate_limited(make_user, open_clients, settings):
    settings.MESSAGING = {**settings.MESSAGING, "INVITES_PER_HOUR": 2}
    ana = await open_clients(await make_user("ana"))
    assert (await ana.call("room.create", {"room": "busy", "private": True}))["ok"]
    others = [await make_user(f"u{n}") for n in range(3)]
    for other in others[:2]:
        assert (await ana.call("room.invite", {"room": "busy", "user": other.pk}))["ok"]
    ack = await ana.call("room.invite", {"room": "busy", "user": others[2].pk})
    assert ack["error"]["code"] == "rate_limited" and ack["error"]["retry"] is True
    assert others[2].pk not in await members_of("busy")


async def test_removed_member_stops_hearing_the_room_at_once(make_user, open_clients):
    ana, bob, _ = await private_room(open_clients, make_user)
    for client in (ana, bob):
        await client.join("secret")
    ack = await ana.call("room.remove", {"room": "secret", "user": bob.user.pk})
    assert ack["ok"] and ack["d"] == {"room": "secret", "user": bob.user.pk}
    [left] = await bob.frames("room.left", 1)
    assert left["d"] == {"room": "secret", "user": bob.user.pk, "by": {"id": ana.user.pk, "name": "ana"}}
    assert (await ana.call("room.post", {"room": "secret", "body": "bob is gone"}))["ok"]
    await ana.frames("msg", 1)
    assert await bob.nothing_more(0.5)
    for t, d in (("room.join", {"room": "secret"}), ("room.post", {"room": "secret", "body": "back?"})):
        assert (await bob.call(t, d))["error"]["code"] == "forbidden"
    actions = await database_sync_to_async(
        lambda: list(ModerationAction.objects.filter(kind="remove").values_list("actor_id", "target_id", "room_slug"))
    )()
    assert actions == [(ana.user.pk, bob.user.pk, "secret")]


async def test_only_moderators_remove_and_the_owner_stays(make_user, open_clients):
    ana, bob, eve = await private_room(open_clients, make_user)
    assert (await ana.call("room.invite", {"room": "secret", "user": eve.user.pk}))["ok"]
    await eve.join("secret")
    assert (await bob.call("room.remove", {"room": "secret", "user": eve.user.pk}))["error"]["code"] == "forbidden"
    staff = await open_clients(await make_user("mod"))
    await make_staff(staff.user)
    assert (await staff.call("room.remove", {"room": "secret", "user": ana.user.pk}))["error"]["code"] == "forbidden"
    assert (await ana.call("room.remove", {"room": "secret", "user": ana.user.pk}))["error"]["code"] == "invalid"
    assert await members_of("secret") == {ana.user.pk, bob.user.pk, eve.user.pk}
    # Staff moderate a public room nobody owns.
    await eve.join("lobby")
    assert (await staff.call("room.remove", {"room": "lobby", "user": eve.user.pk}))["ok"]
    assert (await ana.call("room.remove", {"room": "lobby", "user": staff.user.pk}))["error"]["code"] == "forbidden"


async def test_leave_ends_membership_on_every_socket(make_user, open_clients):
    ana, bob, _ = await private_room(open_clients, make_user)
    bob_elsewhere = await open_clients(bob.user)
    for client in (ana, bob, bob_elsewhere):
        await client.join("secret")
    assert (await bob.call("room.leave", {"room": "secret"}))["ok"]
    for client in (bob, bob_elsewhere):
        [left] = await client.frames("room.left", 1)
        assert left["d"]["by"] is None
    assert (await ana.call("room.post", {"room": "secret", "body": "bye"}))["ok"]
    await ana.frames("msg", 1)
    assert await bob.nothing_more(0.5) and await bob_elsewhere.nothing_more(0.1)
    assert await members_of("secret") == {ana.user.pk}
    assert (await bob.call("room.leave", {"room": "secret"}))["error"]["code"] == "forbidden"


async def test_a_join_of_a_new_slug_still_creates_a_public_room(make_user, open_clients):
    ana = await open_clients(await make_user("ana"))
    ack = await ana.join("fresh")
    assert ack["ok"]
    room = await database_sync_to_async(Room.objects.get)(slug="fresh")
    assert not room.private and room.owner_id is None
