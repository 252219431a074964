"""The outbox: each effect's event commits in the effect's own transaction (messaging/events/outbox.py)."""

from __future__ import annotations

import time
import uuid

import pytest
from channels.db import database_sync_to_async
from django.db import transaction

from messaging.core.handlers import CommandContext
from messaging.events.models import Event

pytestmark = [pytest.mark.django_db(transaction=True)]


@database_sync_to_async
def events(room: str = "lobby") -> list[dict]:
    return list(Event.objects.filter(room=room).order_by("position").values("type", "position", "data", "event_id"))


async def test_a_post_writes_its_event_with_the_frame_and_its_cause(make_user, open_clients):
    ana = await make_user("Ana")
    client = await open_clients(ana)
    await client.join("lobby")
    ack = await client.call("room.post", {"room": "lobby", "body": "hello"}, id="post-1")
    [frame] = await client.frames("msg", 1)
    [event] = await events()
    assert event["type"] == "message.posted"
    assert event["position"] == 1
    assert event["data"] == {**frame["d"], "command_id": "post-1", "user": ana.pk}
    assert ack["d"]["seq"] == event["data"]["seq"]


async def test_a_duplicate_post_writes_no_second_event(make_user, open_clients, settings):
    # Without the Redis window, so the duplicate reaches the database and its statement is undone.
    settings.MESSAGING = {**settings.MESSAGING, "REDIS_URL": None}
    client = await open_clients(await make_user())
    await client.join("lobby")
    for _ in range(3):
        assert (await client.call("room.post", {"room": "lobby", "body": "once"}, id="same"))["ok"]
    assert [e["type"] for e in await events()] == ["message.posted"]


async def test_a_refused_post_writes_nothing(make_user, open_clients):
    client = await open_clients(await make_user())
    ack = await client.call("room.post", {"room": "lobby", "body": "not a member"})
    assert ack["error"]["code"] == "forbidden"
    assert await events() == []


async def test_a_batch_of_posts_in_two_rooms_numbers_each_room_alone(make_user, open_clients):
    client = await open_clients(await make_user())
    await client.join("one")
    await client.join("two")
    ids = [await client.send("room.post", {"room": room, "body": str(n)}) for n in range(10) for room in ("one", "two")]
    for id in ids:
        assert (await client.ack(id))["ok"]
    for room in ("one", "two"):
        found = await events(room)
        assert [e["position"] for e in found] == list(range(1, 11))
        # The room's order is its seq order, and ids follow it too.
        assert [e["data"]["seq"] for e in found] == list(range(1, 11))
        assert [e["data"]["body"] for e in found] == [str(n) for n in range(10)]


def post_on_the_portable_path(user, body: str) -> None:
    from messaging.chat.posts import Post, post_message

    with transaction.atomic():
        post_message(CommandContext(user=user, command_id=uuid.uuid4().hex, type="room.post"), Post("lobby", body))


async def test_the_portable_post_writes_the_same_event(make_user, open_clients):
    ana = await make_user("Ana")
    client = await open_clients(ana)
    await client.join("lobby")
    await client.call("room.post", {"room": "lobby", "body": "fast"})
    await database_sync_to_async(post_on_the_portable_path)(ana, "portable")
    fast, portable = await events()
    assert portable["position"] == 2
    assert set(portable["data"]) == set(fast["data"])
    assert portable["data"]["seq"] == 2 and portable["data"]["body"] == "portable"


async def test_event_ids_are_time_ordered_on_both_paths(make_user, open_clients):
    """The posts' statement mints its events' ids in SQL, `emit` in Python:
    both UUID version 7 whose first 48 bits are the time of the post, in ms."""
    ana = await make_user("Ana")
    client = await open_clients(ana)
    await client.join("lobby")
    before = time.time_ns() // 1_000_000
    for n in range(3):
        await client.send("room.post", {"room": "lobby", "body": f"fast {n}"})
    await client.frames("msg", 3)
    await database_sync_to_async(post_on_the_portable_path)(ana, "portable")
    after = time.time_ns() // 1_000_000
    ids = [event["event_id"] for event in await events()]
    assert len(ids) == 4
    for event_id in ids:
        assert event_id.version == 7 and event_id.variant == uuid.RFC_4122
        # PostgreSQL's clock and this one are the same machine's; a millisecond of rounding either way.
        assert before - 1 <= event_id.int >> 80 <= after + 1
    assert sorted(ids, key=lambda i: i.int >> 80) == ids, "later events, later times"


def post_then_fail(user) -> None:
    with transaction.atomic():
        post_on_the_portable_path(user, "rolled back")
        raise RuntimeError("the effect's transaction fails")


async def test_an_effect_rolled_back_takes_its_event_and_position_with_it(make_user, open_clients):
    ana = await make_user()
    client = await open_clients(ana)
    await client.join("lobby")
    with pytest.raises(RuntimeError):
        await database_sync_to_async(post_then_fail)(ana)
    assert await events() == []
    await client.call("room.post", {"room": "lobby", "body": "after"})
    assert [e["position"] for e in await events()] == [1]


async def test_a_reaction_writes_its_event_once(make_user, open_clients):
    ana = await make_user()
    client = await open_clients(ana)
    await client.join("lobby")
    await client.call("room.post", {"room": "lobby", "body": "like me"})
    for _ in range(2):
        await client.call("reaction.add", {"room": "lobby", "seq": 1}, id="plus-1")
    await client.call("reaction.add", {"room": "lobby", "seq": 1}, id="plus-2")
    found = await events()
    assert [(e["type"], e["position"]) for e in found] == [
        ("message.posted", 1),
        ("reaction.changed", 2),
        ("reaction.changed", 3),
    ]
    assert found[1]["data"] == {"room": "lobby", "seq": 1, "count": 1, "rev": 2, "command_id": "plus-1", "user": ana.pk}
    assert found[2]["data"]["count"] == 2


async def test_a_refused_reaction_writes_nothing(make_user, open_clients):
    client = await open_clients(await make_user())
    await client.join("lobby")
    assert (await client.call("reaction.add", {"room": "lobby", "seq": 9}))["error"]["code"] == "invalid"
    assert await events() == []


@pytest.mark.parametrize("loop_database", [True, False])
async def test_receipts_write_one_state_event_per_message_moved(make_user, open_clients, settings, loop_database):
    settings.MESSAGING = {**settings.MESSAGING, "LOOP_DATABASE": loop_database}
    ana, bob = await make_user("ana"), await make_user("bob")
    a, b = await open_clients(ana), await open_clients(bob)
    await a.join("lobby")
    await b.join("lobby")
    for n in range(3):
        await a.call("room.post", {"room": "lobby", "body": str(n)})
    await b.call("receipt", {"room": "lobby", "delivered": 2}, id="r-1")
    await b.call("receipt", {"room": "lobby", "read": 3}, id="r-2")
    # Nothing moves again: no events.
    await b.call("receipt", {"room": "lobby", "read": 3}, id="r-3")
    found = await events()
    # The database's function (migration 0019) and `emit` alike: time-ordered ids.
    assert {e["event_id"].version for e in found} == {7}
    assert [e["position"] for e in found] == list(range(1, 10))
    states = [(e["data"]["seq"], e["data"]["state"], e["data"]["command_id"]) for e in found[3:]]
    assert states == [
        (1, "delivered", "r-1"),
        (2, "delivered", "r-1"),
        (3, "delivered", "r-2"),
        (1, "read", "r-2"),
        (2, "read", "r-2"),
        (3, "read", "r-2"),
    ]
    assert {e["type"] for e in found[3:]} == {"message.state"}
    assert all(e["data"]["user"] == bob.pk and e["data"]["room"] == "lobby" for e in found[3:])


def receipt_portably(user, **marks) -> None:
    from messaging.chat.receipts import move_watermarks_portably

    with transaction.atomic():
        move_watermarks_portably(user, "lobby", marks.get("delivered"), marks.get("read"), "portable")


async def test_the_portable_receipt_writes_the_same_events(make_user, open_clients):
    ana, bob = await make_user("ana"), await make_user("bob")
    a, b = await open_clients(ana), await open_clients(bob)
    await a.join("lobby")
    await b.join("lobby")
    for n in range(2):
        await a.call("room.post", {"room": "lobby", "body": str(n)})
    await database_sync_to_async(receipt_portably)(bob, read=2)
    states = [(e["position"], e["data"]["seq"], e["data"]["state"]) for e in (await events())[2:]]
    assert states == [(3, 1, "delivered"), (4, 2, "delivered"), (5, 1, "read"), (6, 2, "read")]


async def test_with_the_outbox_off_effects_write_no_events(make_user, open_clients, settings):
    settings.MESSAGING = {**settings.MESSAGING, "EVENTS_OUTBOX": False}
    a, b = await open_clients(await make_user()), await open_clients(await make_user())
    await a.join("lobby")
    await b.join("lobby")
    assert (await a.call("room.post", {"room": "lobby", "body": "x"}))["ok"]
    assert (await a.call("reaction.add", {"room": "lobby", "seq": 1}))["ok"]
    assert (await b.call("receipt", {"room": "lobby", "read": 1}))["ok"]
    assert await events() == []


async def test_a_host_type_emits_its_event_through_the_context(make_user, open_clients):
    from messaging import command
    from messaging.core import handlers

    @command("test.wave")
    def wave(ctx, data):
        ctx.emit("test.waved", "lobby", {"room": "lobby", "at": data.get("n")})
        if data.get("n") == 2:
            raise RuntimeError("the effect fails: its event goes with it")
        return {"ok": 1}

    try:
        ana = await make_user()
        client = await open_clients(ana)
        await client.join("lobby")
        assert (await client.call("test.wave", {"n": 1}, id="w-1"))["ok"]
        assert (await client.call("test.wave", {"n": 1}, id="w-1"))["dup"]
        assert not (await client.call("test.wave", {"n": 2}, id="w-2"))["ok"]
        [event] = await events()
        assert event["type"] == "test.waved" and event["position"] == 1
        assert event["data"] == {"room": "lobby", "at": 1, "command_id": "w-1", "user": ana.pk}
    finally:
        handlers._registry.pop("test.wave", None)


async def test_an_edit_and_a_delete_write_their_events_once_with_their_frames(make_user, open_clients):
    ana = await make_user("Ana")
    client = await open_clients(ana)
    await client.join("lobby")
    seq = (await client.call("room.post", {"room": "lobby", "body": "helo"}, id="p"))["d"]["seq"]
    for _ in range(2):  # a retried edit is one effect: one event
        assert (await client.call("message.edit", {"room": "lobby", "seq": seq, "body": "hello"}, id="e"))["ok"]
    [edit_frame] = await client.frames("msg.edit", 1)
    for id in ("d", "d", "d-again"):  # a retry, and a second delete of a deleted message: no event
        assert (await client.call("message.delete", {"room": "lobby", "seq": seq}, id=id))["ok"]
    [delete_frame] = await client.frames("msg.delete", 1)
    found = await events()
    assert [e["type"] for e in found] == ["message.posted", "message.edited", "message.deleted"]
    assert [e["position"] for e in found] == [1, 2, 3]
    assert found[0]["data"]["rev"] == 1 and found[0]["data"]["version"] == 1
    # The delete blanked the body its post and edit carried (PROTOCOL.md 1.2, "Deleted means gone").
    assert found[0]["data"]["body"] == "" and found[0]["data"]["deleted"] is True
    assert found[1]["data"] == {**edit_frame["d"], "body": "", "deleted": True, "command_id": "e", "user": ana.pk}
    assert found[2]["data"] == {**delete_frame["d"], "command_id": "d", "user": ana.pk}
    assert "body" not in found[2]["data"]


async def test_a_refused_edit_writes_nothing(make_user, open_clients):
    ana, bob = await make_user("Ana"), await make_user("Bob")
    a, b = await open_clients(ana), await open_clients(bob)
    await a.join("lobby")
    await b.join("lobby")
    seq = (await a.call("room.post", {"room": "lobby", "body": "mine"}))["d"]["seq"]
    ack = await b.call("message.edit", {"room": "lobby", "seq": seq, "body": "yours now"})
    assert ack["error"]["code"] == "forbidden"
    assert [e["type"] for e in await events()] == ["message.posted"]


async def test_a_message_and_its_versions_keep_the_ids_of_their_events(make_user, open_clients):
    """On both paths of a post, and for an edit and a delete: what a change of the message finds its events by."""
    from messaging.models import Message, MessageVersion

    ana = await make_user("Ana")
    client = await open_clients(ana)
    await client.join("lobby")
    await client.call("room.post", {"room": "lobby", "body": "fast"})
    await database_sync_to_async(post_on_the_portable_path)(ana, "portable")
    assert (await client.call("message.edit", {"room": "lobby", "seq": 1, "body": "faster"}))["ok"]
    assert (await client.call("message.delete", {"room": "lobby", "seq": 1}))["ok"]
    ids = {(e["type"], e["data"]["seq"]): e["event_id"] for e in await events()}
    kept = await database_sync_to_async(
        lambda: (
            dict(Message.objects.values_list("seq", "posted_event_id")),
            dict(MessageVersion.objects.values_list("version", "event_id")),
        )
    )()
    assert kept == (
        {1: ids["message.posted", 1], 2: ids["message.posted", 2]},
        {2: ids["message.edited", 1], 3: ids["message.deleted", 1]},
    )
