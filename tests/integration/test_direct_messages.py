"""Direct conversations (PROTOCOL.md 1.1): `dm.open` gives two users one private room,
the other user by invitation (1.2)."""

from __future__ import annotations

import asyncio

import pytest
from channels.db import database_sync_to_async

from messaging.models import DirectRoom, Invitation, Membership, Room

pytestmark = [pytest.mark.django_db(transaction=True)]


@database_sync_to_async
def members_of(slug: str) -> set:
    return set(Membership.objects.filter(room__slug=slug).values_list("user_id", flat=True))


@database_sync_to_async
def invited_to(slug: str) -> set:
    return set(Invitation.objects.filter(room__slug=slug, declined_at__isnull=True).values_list("user_id", flat=True))


async def test_the_same_room_from_either_side_every_time(make_user, open_clients):
    ana, bob = await open_clients(await make_user("ana")), await open_clients(await make_user("bob"))
    first = await ana.call("dm.open", {"user": bob.user.pk})
    assert first["ok"], first
    room = first["d"]["room"]
    assert first["d"]["with"] == {"id": bob.user.pk, "name": "bob"}
    [invited] = await bob.frames("invited", 1)
    assert invited["d"] == {"room": room, "by": {"id": ana.user.pk, "name": "ana"}}
    again = await ana.call("dm.open", {"user": bob.user.pk})
    other_side = await bob.call("dm.open", {"user": ana.user.pk})
    assert again["d"]["room"] == other_side["d"]["room"] == room
    assert other_side["d"]["with"] == {"id": ana.user.pk, "name": "ana"}
    # Only the first call invites; bob's own open accepted it.
    assert await bob.nothing_more() and await ana.nothing_more()
    assert (await database_sync_to_async(Room.objects.get)(slug=room)).private
    assert await members_of(room) == {ana.user.pk, bob.user.pk}
    assert await invited_to(room) == set()


async def test_two_users_opening_at_once_get_one_room(make_user, open_clients):
    for _ in range(5):
        ana_user, bob_user = await make_user("ana"), await make_user("bob")
        anas = [await open_clients(ana_user) for _ in range(3)]
        bobs = [await open_clients(bob_user) for _ in range(3)]
        sends = [c.send("dm.open", {"user": bob_user.pk}) for c in anas] + [
            c.send("dm.open", {"user": ana_user.pk}) for c in bobs
        ]
        ids = await asyncio.gather(*sends)
        acks = await asyncio.gather(*(c.ack(id) for c, id in zip(anas + bobs, ids)))
        assert all(a["ok"] for a in acks), acks
        assert len({a["d"]["room"] for a in acks}) == 1
        pairs = await database_sync_to_async(DirectRoom.objects.filter(low__in=[ana_user, bob_user]).count)()
        assert pairs == 1


async def test_a_third_user_cannot_see_or_join_the_conversation(make_user, open_clients):
    ana, bob, eve = [await open_clients(await make_user(n)) for n in ("ana", "bob", "eve")]
    room = (await ana.call("dm.open", {"user": bob.user.pk}))["d"]["room"]
    await ana.join(room)
    assert (await ana.call("room.post", {"room": room, "body": "just us"}))["ok"]
    for t, d in (
        ("room.join", {"room": room}),
        ("room.post", {"room": room, "body": "hi"}),
        ("room.members", {"room": room}),
    ):
        assert (await eve.call(t, d))["error"]["code"] == "forbidden"
    # Not even its owner-less moderators invite into it.
    assert (await ana.call("room.invite", {"room": room, "user": eve.user.pk}))["error"]["code"] == "forbidden"
    # bob is invited, not a member, until he accepts.
    assert await members_of(room) == {ana.user.pk} and await invited_to(room) == {bob.user.pk}


async def test_open_with_oneself_or_nobody_is_invalid(make_user, open_clients):
    ana = await open_clients(await make_user("ana"))
    for d in ({"user": ana.user.pk}, {"user": 10**12}, {"user": "1"}, {"user": True}, {}):
        ack = await ana.call("dm.open", d)
        assert ack["error"]["code"] == "invalid", (d, ack)
    assert await database_sync_to_async(Room.objects.count)() == 0


async def test_reopening_does_not_ask_again_who_left_but_their_own_open_lets_them_back(make_user, open_clients):
    ana, bob = await open_clients(await make_user("ana")), await open_clients(await make_user("bob"))
    room = (await ana.call("dm.open", {"user": bob.user.pk}))["d"]["room"]
    await bob.frames("invited", 1)
    await bob.join(room)
    assert (await bob.call("room.leave", {"room": room}))["ok"]
    await bob.frames("room.left", 1)
    # ana's open again is the same room, and leaves bob alone (PROTOCOL.md 1.2).
    assert (await ana.call("dm.open", {"user": bob.user.pk}))["d"]["room"] == room
    assert await bob.nothing_more(0.5)
    assert await members_of(room) == {ana.user.pk} and await invited_to(room) == set()
    # bob's own open makes him a member again; so would his join of it.
    assert (await bob.call("dm.open", {"user": ana.user.pk}))["d"]["room"] == room
    assert await members_of(room) == {ana.user.pk, bob.user.pk}
    assert await ana.nothing_more()


async def test_rooms_list_says_private_and_with_whom(make_user, open_clients):
    ana, bob = await open_clients(await make_user("ana")), await open_clients(await make_user("bob"))
    await ana.join("lobby")
    assert (await ana.call("room.create", {"room": "plans", "private": True}))["ok"]
    dm = (await ana.call("dm.open", {"user": bob.user.pk}))["d"]["room"]
    listed = {r["room"]: r for r in (await ana.call("rooms.list", {}))["d"]["rooms"]}
    assert listed["lobby"]["private"] is False and "with" not in listed["lobby"]
    assert listed["plans"]["private"] is True and "with" not in listed["plans"]
    assert listed[dm]["private"] is True and listed[dm]["with"] == {"id": bob.user.pk, "name": "bob"}
    # bob is asked, not in: the room is listed as an invitation, with whom, and nothing of what is in it.
    theirs = (await bob.call("rooms.list", {}))["d"]["rooms"]
    assert theirs == [
        {
            "room": dm,
            "private": True,
            "invited": True,
            "by": {"id": ana.user.pk, "name": "ana"},
            "with": {"id": ana.user.pk, "name": "ana"},
        }
    ]
