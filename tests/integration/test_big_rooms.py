"""Rooms of any size (PROTOCOL.md 1.1, "Safety limits"): the join ack, `room.members`,
and receipts without `status` frames above `MEMBERS_ON_JOIN`, on real PostgreSQL and Redis.

The crowds are inserted in SQL (tests/support/crowds.py); the members that
act have sockets on the real consumer.
"""

from __future__ import annotations

import json

import pytest
from channels.db import database_sync_to_async
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from messaging.chat.receipts import move_watermarks_portably
from messaging.models import Membership, Message, Room

from ..support.crowds import LONG_NAME, catch_up, crowd
from .conftest import apply_command, move_by_function

pytestmark = [pytest.mark.django_db(transaction=True)]

CROWD = 8000
# Well under autobahn's 1 MiB limit on a server frame; the ack of a room of
# 8,000 members with 150-character names was 1,695,077 bytes before.
SMALL_FRAME = 64 * 1024


async def raw_ack(client, t: str, d: dict) -> tuple[dict, int]:
    """The ack of a command and its size in bytes on the wire; other frames are kept in the inbox."""
    id = await client.send(t, d)
    while True:
        text = await client.comm.receive_from(timeout=30)
        frame = json.loads(text)
        if frame.get("t") == "ack" and frame.get("id") == id:
            return frame, len(text.encode())
        client.inbox.append(frame)


@pytest.fixture
def big_room():
    """A room `crowd` of 8,000 members with 150-character names; their ids in order."""
    return crowd("crowd", CROWD)


async def test_a_join_of_a_room_of_8000_members_fits_in_one_small_frame(big_room, make_user, open_clients):
    ana = await open_clients(await make_user("ana"))
    ack, size = await raw_ack(ana, "room.join", {"room": "crowd"})
    assert ack["ok"], ack
    members = ack["d"]["members"]
    assert ack["d"]["members_total"] == CROWD + 1
    assert size < SMALL_FRAME, size
    assert all(len(m["name"]) == LONG_NAME for m in members[:-1])
    # The first page of room.members' order, but its last entry gives way to
    # the joining user's own (a newcomer, so the highest id).
    assert [m["user"] for m in members] == big_room[:99] + [ana.user.pk]
    assert members[-1] == {
        "user": ana.user.pk,
        "name": "ana",
        "delivered": 0,
        "read": 0,
        "joined_seq": 0,
        "online": True,
    }


async def test_a_member_on_the_first_page_gets_that_page_as_it_is(big_room, django_user_model, open_clients):
    first = await database_sync_to_async(django_user_model.objects.get)(pk=big_room[5])
    member = await open_clients(first)
    ack = await member.join("crowd")
    assert [m["user"] for m in ack["d"]["members"]] == big_room[:100]
    assert ack["d"]["members_total"] == CROWD


def test_the_join_lists_its_members_with_bounded_queries(big_room, django_user_model, on_this_thread):
    ana = django_user_model.objects.create_user(username="ana", first_name="ana")
    apply_command(ana, "room.join", {"room": "crowd"})
    with CaptureQueriesContext(connection) as queries:
        outcome = apply_command(ana, "room.join", {"room": "crowd"})
    assert len(outcome.data["members"]) == 100
    listings = [q["sql"] for q in queries if q["sql"].startswith("SELECT") and '"auth_user"' in q["sql"]]
    assert listings and all("LIMIT" in sql for sql in listings), listings


async def test_room_members_pages_through_every_member_once_in_order(big_room, make_user, open_clients):
    ana = await open_clients(await make_user("ana"))
    await ana.join("crowd")
    seen, after, pages = [], None, 0
    while True:
        d = {"room": "crowd"} if after is None else {"room": "crowd", "after": after}
        ack, size = await raw_ack(ana, "room.members", d)
        assert ack["ok"], ack
        page = ack["d"]["members"]
        pages += 1
        assert ack["d"]["room"] == "crowd" and 0 < len(page) <= 100 and size < SMALL_FRAME
        seen += [m["user"] for m in page]
        if not ack["d"]["more"]:
            break
        after = page[-1]["user"]
    assert seen == big_room + [ana.user.pk], "every member once, in order"
    assert pages == 81
    entry = page[-1]
    assert entry == {"user": ana.user.pk, "name": "ana", "delivered": 0, "read": 0, "joined_seq": 0, "online": True}


async def test_a_page_follows_from_a_member_who_has_left_since(make_user, open_clients):
    users = [await make_user(f"u{n}") for n in range(5)]
    for user in users:
        await database_sync_to_async(apply_command)(user, "room.join", {"room": "small"})
    ana = await open_clients(users[0])
    await database_sync_to_async(Membership.objects.filter(user=users[2]).delete)()
    ack = await ana.call("room.members", {"room": "small", "after": users[2].pk})
    assert [m["user"] for m in ack["d"]["members"]] == [u.pk for u in users[3:]] and ack["d"]["more"] is False
    ack = await ana.call("room.members", {"room": "small", "after": users[4].pk})
    assert ack["d"] == {"room": "small", "members": [], "more": False}


def room_state() -> tuple:
    return (
        sorted(Room.objects.values_list("slug", "last_seq")),
        sorted(Membership.objects.values_list("room__slug", "user_id", "delivered", "read")),
    )


@pytest.mark.parametrize(
    "d",
    [
        {"room": "lobby", "after": "1"},  # the demo's user ids are integers
        {"room": "lobby", "after": 1.5},
        {"room": "lobby", "after": True},
        {"room": "lobby", "after": [1]},
        {"room": "lobby", "after": {"user": 1}},
        {"room": "lobby", "after": 2**63},
        {"room": "lobby", "after": -(2**63) - 1},
        {"room": "lobby", "after": "3f2504e0-4f89-11d3-9a0c-0305e82c3301"},
        {"room": "Lobby"},
        {"after": 1},
        {"room": "nowhere", "after": "x"},
    ],
)
async def test_bad_room_members_are_invalid_and_change_nothing(make_user, open_clients, d):
    ana = await open_clients(await make_user("ana"))
    await ana.join("lobby")
    before = await database_sync_to_async(room_state)()
    ack = await ana.call("room.members", d)
    assert ack["ok"] is False and ack["error"]["code"] == "invalid" and ack["error"]["retry"] is False, ack
    assert await database_sync_to_async(room_state)() == before
    # The socket goes on.
    ack = await ana.call("room.members", {"room": "lobby", "after": None})
    assert [m["user"] for m in ack["d"]["members"]] == [ana.user.pk]


async def test_room_members_of_a_room_one_is_not_in_is_forbidden(big_room, make_user, open_clients):
    eve = await open_clients(await make_user("eve"))
    before = await database_sync_to_async(room_state)()
    for room in ("crowd", "nowhere"):
        ack = await eve.call("room.members", {"room": room})
        assert ack["ok"] is False and ack["error"]["code"] == "forbidden", ack
    assert await database_sync_to_async(room_state)() == before, "neither joined nor created"


# Receipts above MEMBERS_ON_JOIN ---------------------------------------------


def states(room: str) -> dict[int, str]:
    return dict(Message.objects.filter(room__slug=room).values_list("seq", "state"))


async def receipt(client, room: str, **given) -> None:
    ack = await client.call("receipt", {"room": room, **given})
    assert ack["ok"], ack


async def test_over_the_cap_receipts_broadcast_no_status_and_each_senders_sockets_get_each_state_once(
    make_user, open_clients
):
    crowd_ids = await database_sync_to_async(crowd)("big", 150, name_length=20)
    ana_user = await make_user("ana")
    ana, ana_again, ana_elsewhere = [await open_clients(ana_user) for _ in range(3)]
    bob, cat = await open_clients(await make_user("bob")), await open_clients(await make_user("cat"))
    for client in (ana, ana_again, bob, cat):
        await client.join("big")
    await ana_elsewhere.join("side")
    for body in ("one", "two"):
        assert (await ana.call("room.post", {"room": "big", "body": body}))["ok"]
    for client in (ana, ana_again, bob, cat):
        await client.frames("msg", 2)
    # The crowd has read both; bob and cat are the last recipients.
    await database_sync_to_async(catch_up)("big", crowd_ids, 2)

    await receipt(bob, "big", delivered=2, read=2)
    assert await database_sync_to_async(states)("big") == {1: "sent", 2: "sent"}
    await receipt(cat, "big", delivered=2)
    for client in (ana, ana_again):
        assert [(f["d"]["seq"], f["d"]["state"]) for f in await client.frames("state", 2)] == [
            (1, "delivered"),
            (2, "delivered"),
        ]
    await receipt(cat, "big", read=2)
    for client in (ana, ana_again):
        frames = await client.frames("state", 2)
        assert [(f["d"]["room"], f["d"]["seq"], f["d"]["state"]) for f in frames] == [
            ("big", 1, "read"),
            ("big", 2, "read"),
        ]
        assert frames[0]["d"]["at"] == frames[1]["d"]["at"]
    assert await database_sync_to_async(states)("big") == {1: "read", 2: "read"}
    for client in (ana, ana_again, ana_elsewhere, bob, cat):
        assert await client.nothing_more(), (client.user, client.inbox)


async def test_frames_per_receipt_grow_with_the_room_not_with_its_square(make_user, open_clients, settings):
    # 30 members, each with a socket, read one message: 29 receipts.
    settings.MESSAGING = {**settings.MESSAGING, "MEMBERS_ON_JOIN": 10}
    members = [await open_clients(await make_user(f"m{n}")) for n in range(30)]
    for member in members:
        await member.join("room")
    assert (await members[0].call("room.post", {"room": "room", "body": "read me"}))["ok"]
    for member in members:
        await member.frames("msg", 1)
    for member in members[1:]:
        await receipt(member, "room", read=1)
    # The last reader's receipt took it to delivered and on to read: a frame each, to the sender.
    told = await members[0].frames("state", 2)
    assert [f["d"]["state"] for f in told] == ["delivered", "read"]
    for member in members:
        assert await member.nothing_more(), member.inbox
    # Before: a status frame per receipt to each of the 30 sockets, 870 in all.


async def test_a_receipt_tells_at_most_states_per_receipt_messages_per_state(make_user, open_clients, settings):
    settings.MESSAGING = {**settings.MESSAGING, "STATES_PER_RECEIPT": 3}
    ana, bob = await open_clients(await make_user("ana")), await open_clients(await make_user("bob"))
    await ana.join("lobby")
    await bob.join("lobby")
    for n in range(5):
        assert (await ana.call("room.post", {"room": "lobby", "body": f"m{n}"}))["ok"]
    await receipt(bob, "lobby", read=5)
    told = [(f["d"]["seq"], f["d"]["state"]) for f in await ana.frames("state", 6)]
    assert told == [(3, "delivered"), (4, "delivered"), (5, "delivered"), (3, "read"), (4, "read"), (5, "read")]
    assert await database_sync_to_async(states)("lobby") == {n: "read" for n in range(1, 6)}, "all moved all the same"
    await ana.frames("msg", 5)
    await ana.frames("status", 1)
    assert await ana.nothing_more(), ana.inbox


async def test_a_join_backlog_carries_the_state_of_the_users_own_messages(make_user, open_clients):
    ana, bob = await open_clients(await make_user("ana")), await open_clients(await make_user("bob"))
    await ana.join("lobby")
    await bob.join("lobby")
    for body in ("one", "two", "three"):
        assert (await ana.call("room.post", {"room": "lobby", "body": body}))["ok"]
    assert (await bob.call("room.post", {"room": "lobby", "body": "four"}))["ok"]
    await receipt(bob, "lobby", delivered=3, read=1)
    await ana.close()
    await bob.close()

    ana, bob = await open_clients(ana.user), await open_clients(bob.user)
    await ana.join("lobby", since=0)
    backlog = [f["d"] for f in await ana.frames("msg", 4)]
    assert [d.get("state") for d in backlog] == ["read", "delivered", "delivered", None], "only her own"
    await bob.join("lobby", since=0)
    assert [f["d"].get("state") for f in await bob.frames("msg", 4)] == [None, None, None, "sent"]


@pytest.mark.parametrize("move", [move_by_function, move_watermarks_portably], ids=["function", "orm"])
def test_a_move_counts_the_members_only_up_to_one_past_the_cap(big_room, django_user_model, move):
    ana = django_user_model.objects.get(pk=big_room[0])
    Room.objects.filter(slug="crowd").update(last_seq=1)
    Message.objects.create(
        room=Room.objects.get(slug="crowd"), seq=1, sender=ana, client_msg_id="m1", body="x", sent_at=timezone.now()
    )
    reader = django_user_model.objects.get(pk=big_room[1])
    with transaction.atomic():
        moved = move(reader, "crowd", 1, None)
    assert moved.moved and moved.members == 101 and moved.messages == ()
