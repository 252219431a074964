"""Rooms of any size (PROTOCOL.md 1.1, "Safety limits"): the join ack and `room.members`,
on real PostgreSQL and Redis.

The crowds are inserted in SQL (tests/support/crowds.py); the members that
act have sockets on the real consumer.
"""
from __future__ import annotations

import json

import pytest
from channels.db import database_sync_to_async
from django.db import connection
from django.test.utils import CaptureQueriesContext

from messaging.models import Membership, Room

from ..support.crowds import LONG_NAME, crowd
from .conftest import apply_command

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
    assert members[-1] == {"user": ana.user.pk, "name": "ana", "delivered": 0, "read": 0, "joined_seq": 0}


async def test_a_member_on_the_first_page_gets_that_page_as_it_is(big_room, django_user_model, open_clients):
    first = await database_sync_to_async(django_user_model.objects.get)(pk=big_room[5])
    member = await open_clients(first)
    ack = await member.join("crowd")
    assert [m["user"] for m in ack["d"]["members"]] == big_room[:100]
    assert ack["d"]["members_total"] == CROWD


def test_the_join_lists_its_members_with_bounded_queries(big_room, django_user_model):
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
    assert entry == {"user": ana.user.pk, "name": "ana", "delivered": 0, "read": 0, "joined_seq": 0}


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


@pytest.mark.parametrize("d", [
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
])
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

