"""`room.history`, the join ack's `unread` and `first_unread`, and `rooms.list`
(PROTOCOL.md 1.1), on real PostgreSQL and Redis."""

from __future__ import annotations

import pytest
from channels.db import database_sync_to_async

from messaging.models import Room

pytestmark = [pytest.mark.django_db(transaction=True)]


async def posts(client, n: int, room: str = "lobby", start: int = 1) -> None:
    for k in range(start, start + n):
        assert (await client.call("room.post", {"room": room, "body": f"m{k}"}))["ok"]


async def history(client, **d) -> dict:
    ack = await client.call("room.history", {"room": "lobby", **d})
    assert ack["ok"], ack
    return ack["d"]


async def test_history_pages_backwards_to_the_first_message_without_repeats(make_user, open_clients):
    ana = await open_clients(await make_user("ana"))
    await ana.join("lobby")
    await posts(ana, 7)
    seen: list[int] = []
    before, pages = 8, 0
    while True:
        page = await history(ana, before=before, limit=3)
        seqs = [m["seq"] for m in page["messages"]]
        assert seqs == sorted(seqs) and all(s < before for s in seqs)
        seen = seqs + seen
        pages += 1
        if not page["more"]:
            break
        before = seqs[0]
    assert seen == list(range(1, 8)) and pages == 3
    first = await history(ana, before=2, limit=1)
    assert [m["seq"] for m in first["messages"]] == [1] and first["more"] is False
    assert (await history(ana, before=1)) == {"room": "lobby", "messages": [], "more": False}
    # The default limit is 50, and a page past the end holds the newest.
    page = await history(ana, before=1000)
    assert [m["seq"] for m in page["messages"]] == list(range(1, 8)) and page["more"] is False
    assert page["messages"][0]["body"] == "m1" and page["messages"][0]["version"] == 1


async def test_history_shows_edits_and_tombstones_and_the_counts(make_user, open_clients):
    ana = await open_clients(await make_user("ana"))
    await ana.join("lobby")
    await posts(ana, 3)
    assert (await ana.call("message.edit", {"room": "lobby", "seq": 1, "body": "fixed"}))["ok"]
    assert (await ana.call("message.delete", {"room": "lobby", "seq": 2}))["ok"]
    assert (await ana.call("reaction.add", {"room": "lobby", "seq": 3}))["ok"]
    ana.inbox.clear()
    page = await history(ana, before=4)
    one, two, three = page["messages"]
    assert one["body"] == "fixed" and one["version"] == 2 and "edited_at" in one
    assert two["deleted"] is True and two["body"] == "" and two["version"] == 2 and "deleted_at" in two
    assert three["body"] == "m3"
    (count,) = await ana.frames("reaction", 1)
    assert count["d"]["seq"] == 3 and count["d"]["count"] == 1


async def test_history_is_for_members_and_checks_its_bounds(make_user, open_clients):
    ana, eve = await open_clients(await make_user("ana")), await open_clients(await make_user("eve"))
    await ana.join("lobby")
    await posts(ana, 1)
    assert (await eve.call("room.history", {"room": "lobby", "before": 2}))["error"]["code"] == "forbidden"
    for d in (
        {"before": 0},
        {},
        {"before": 2, "limit": 0},
        {"before": 2, "limit": 101},
        {"before": 2, "limit": 2.0},
        {"before": "2"},
        {"before": 2, "limit": True},
    ):
        ack = await ana.call("room.history", {"room": "lobby", **d})
        assert ack["error"]["code"] == "invalid", (d, ack)
    assert len((await history(ana, before=2, limit=100))["messages"]) == 1


async def test_unread_counts_others_messages_above_the_read_watermark_and_not_deleted(make_user, open_clients):
    ana, bob = await open_clients(await make_user("ana")), await open_clients(await make_user("bob"))
    await ana.join("lobby")
    await bob.join("lobby")
    await posts(ana, 3)
    await posts(bob, 1, start=4)
    ack = await bob.join("lobby")
    assert (ack["d"]["unread"], ack["d"]["first_unread"]) == (3, 1)
    assert (await ana.call("message.delete", {"room": "lobby", "seq": 1}))["ok"]
    ack = await bob.join("lobby")
    assert (ack["d"]["unread"], ack["d"]["first_unread"]) == (2, 2)
    assert (await bob.call("receipt", {"room": "lobby", "read": 2}))["ok"]
    ack = await bob.join("lobby")
    assert (ack["d"]["unread"], ack["d"]["first_unread"]) == (1, 3)
    # Their own messages are never unread to them.
    ack = await ana.join("lobby")
    assert (ack["d"]["unread"], ack["d"]["first_unread"]) == (1, 4)
    assert (await ana.call("receipt", {"room": "lobby", "read": 4}))["ok"]
    ack = await ana.join("lobby")
    assert (ack["d"]["unread"], ack["d"]["first_unread"]) == (0, None)
    newcomer = await open_clients(await make_user("cat"))
    ack = await newcomer.join("lobby")
    assert (ack["d"]["unread"], ack["d"]["first_unread"]) == (3, 2)


async def test_rooms_list_gives_each_room_with_its_unread_the_most_recently_active_first(make_user, open_clients):
    ana, bob = await open_clients(await make_user("ana")), await open_clients(await make_user("bob"))
    for room in ("quiet", "busy", "lobby"):
        await bob.join(room)
        await ana.join(room)
    await posts(ana, 2, room="busy")
    await posts(ana, 1, room="lobby")
    await posts(ana, 1, room="busy", start=3)
    assert (await bob.call("receipt", {"room": "busy", "read": 1}))["ok"]
    ack = await bob.call("rooms.list", {})
    assert ack["ok"]
    assert ack["d"] == {
        "rooms": [
            {"room": "busy", "private": False, "last_seq": 3, "read": 1, "unread": 2},
            {"room": "lobby", "private": False, "last_seq": 1, "read": 0, "unread": 1},
            {"room": "quiet", "private": False, "last_seq": 0, "read": 0, "unread": 0},
        ],
        "more": False,
    }
    assert [r["unread"] for r in (await ana.call("rooms.list", {}))["d"]["rooms"]] == [0, 0, 0]
    eve = await open_clients(await make_user("eve"))
    assert (await eve.call("rooms.list", {}))["d"] == {"rooms": [], "more": False}


async def test_rooms_list_stops_at_its_limit(make_user, open_clients, settings):
    settings.MESSAGING = {**settings.MESSAGING, "ROOMS_LIST_LIMIT": 2}
    ana = await open_clients(await make_user("ana"))
    for room in ("a", "b", "c"):
        await ana.join(room)
        await posts(ana, 1, room=room)
    listed = (await ana.call("rooms.list", {}))["d"]
    assert [r["room"] for r in listed["rooms"]] == ["c", "b"] and listed["more"] is True
    assert await database_sync_to_async(Room.objects.count)() == 3
