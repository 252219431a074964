"""Threads (PROTOCOL.md 1.2) on real PostgreSQL: `reply_to` in both forms of `room.post`, the root's count,
the `thread` frame and its rev, `room.thread` pages, and what joins, history and search show of them."""

from __future__ import annotations

import uuid

import pytest
from asgiref.sync import sync_to_async

from messaging.chat.models import Thread
from messaging.core import pipeline
from messaging.core.exceptions import Invalid
from messaging.core.protocol import Command
from messaging.models import Event, Message, Room

from .conftest import run_batch

pytestmark = [pytest.mark.django_db(transaction=True)]


def command(t: str, d: dict, id: str | None = None) -> Command:
    return Command(id=id or uuid.uuid4().hex, t=t, d=d)


async def submit(user, t: str, d: dict, id: str | None = None):
    return await pipeline.submit(user, command(t, d, id))


@pytest.fixture
async def people(django_user_model):
    create = sync_to_async(django_user_model.objects.create_user)
    ana, bob = [await create(username=f"{n}-{uuid.uuid4().hex[:6]}", first_name=n) for n in ("ana", "bob")]
    for user in (ana, bob):
        await submit(user, "room.join", {"room": "r"})
    return ana, bob


def state() -> tuple:
    room = Room.objects.get(slug="r")
    return room.last_seq, room.last_rev, Message.objects.count(), list(Thread.objects.values_list("replies", "rev"))


async def test_a_reply_counts_on_its_root_and_tells_the_room(people):
    ana, bob = people
    root = (await submit(ana, "room.post", {"room": "r", "body": "root"})).data["seq"]
    reply = await submit(bob, "room.post", {"room": "r", "body": "first", "reply_to": root})
    msg, thread = [frame for _, frame in reply.broadcasts]
    assert msg["t"] == "msg" and msg["d"]["reply_to"] == root
    assert thread == {
        "t": "thread",
        "d": {"room": "r", "seq": root, "replies": 1, "last_reply_at": msg["d"]["at"], "rev": msg["d"]["rev"]},
    }
    second = await submit(ana, "room.post", {"room": "r", "body": "second", "reply_to": root})
    assert second.broadcasts[1][1]["d"]["replies"] == 2
    history = (await submit(bob, "room.history", {"room": "r", "before": 10})).data["messages"]
    assert history[0]["replies"] == 2 and history[0]["last_reply_at"] == second.broadcasts[0][1]["d"]["at"]
    assert [m.get("reply_to") for m in history] == [None, root, root]
    assert "replies" not in history[1]


@pytest.mark.parametrize("kind", ["missing", "reply", "deleted", "zero", "text"])
async def test_a_reply_to_what_takes_no_replies_is_invalid_and_changes_nothing(people, kind):
    ana, _ = people
    root = (await submit(ana, "room.post", {"room": "r", "body": "root"})).data["seq"]
    reply = (await submit(ana, "room.post", {"room": "r", "body": "re", "reply_to": root})).data["seq"]
    gone = (await submit(ana, "room.post", {"room": "r", "body": "gone"})).data["seq"]
    await submit(ana, "message.delete", {"room": "r", "seq": gone})
    target = {"missing": 99, "reply": reply, "deleted": gone, "zero": 0, "text": "1"}[kind]
    before = await sync_to_async(state)()
    with pytest.raises(Invalid, match="reply_to"):
        await submit(ana, "room.post", {"room": "r", "body": "no", "reply_to": target})
    assert await sync_to_async(state)() == before


async def test_the_batch_statement_counts_replies_and_declines_those_without_a_root(people):
    ana, bob = people
    root = (await submit(ana, "room.post", {"room": "r", "body": "root"})).data["seq"]
    commands = [command("room.post", {"room": "r", "body": f"re {n}", "reply_to": root}) for n in range(3)]
    commands.append(command("room.post", {"room": "r", "body": "plain"}))
    commands.append(command("room.post", {"room": "r", "body": "bad", "reply_to": 99}))
    outcomes = await sync_to_async(run_batch)([pipeline.prepare(bob, c) for c in commands])
    assert isinstance(outcomes[-1], Invalid)
    threads = [frame["d"] for o in outcomes[:3] for _, frame in o.broadcasts if frame["t"] == "thread"]
    assert [(t["replies"], t["seq"]) for t in threads] == [(1, root), (2, root), (3, root)]
    msgs = [frame["d"] for o in outcomes[:3] for _, frame in o.broadcasts if frame["t"] == "msg"]
    assert [t["rev"] for t in threads] == [m["rev"] for m in msgs]
    stored = await sync_to_async(lambda: Thread.objects.get(root__seq=root))()
    assert (stored.replies, stored.rev) == (3, msgs[-1]["rev"])
    rows = await sync_to_async(lambda: list(Message.objects.order_by("seq").values_list("seq", "reply_to")))()
    assert rows == [(1, None), (2, 1), (3, 1), (4, 1), (5, None)]
    # The events: each post's, then each reply's thread, at gapless positions of the room.
    events = await sync_to_async(
        lambda: list(Event.objects.order_by("position").values_list("position", "type", "data"))
    )()
    assert [p for p, _, _ in events] == list(range(1, len(events) + 1))
    assert [t for _, t, _ in events][-7:] == ["message.posted"] * 4 + ["thread.changed"] * 3
    assert [d["replies"] for _, t, d in events if t == "thread.changed"] == [1, 2, 3]
    assert await sync_to_async(lambda: Room.objects.get(slug="r").last_event)() == len(events)


async def test_a_reply_sent_twice_counts_once_and_each_copy_gets_the_original_ack(people):
    ana, _ = people
    await submit(ana, "room.post", {"room": "r", "body": "root"})
    first = await submit(ana, "room.post", {"room": "r", "body": "re", "reply_to": 1}, id="same")
    again = await submit(ana, "room.post", {"room": "r", "body": "re", "reply_to": 1}, id="same")
    assert again.dup and again.data == first.data
    assert await sync_to_async(lambda: Thread.objects.get().replies)() == 1


async def test_room_thread_pages_the_replies_oldest_first(people):
    ana, bob = people
    await submit(ana, "room.post", {"room": "r", "body": "root"})
    for n in range(5):
        await submit(bob, "room.post", {"room": "r", "body": f"re {n}", "reply_to": 1})
        await submit(bob, "room.post", {"room": "r", "body": f"beside {n}"})
    page = (await submit(ana, "room.thread", {"room": "r", "seq": 1, "limit": 2})).data
    assert page["root"]["seq"] == 1 and page["root"]["replies"] == 5
    assert [m["seq"] for m in page["replies"]] == [2, 4] and page["more"] is True
    page = (await submit(ana, "room.thread", {"room": "r", "seq": 1, "after": 4})).data
    assert [m["body"] for m in page["replies"]] == ["re 2", "re 3", "re 4"] and page["more"] is False
    with pytest.raises(Invalid):
        await submit(ana, "room.thread", {"room": "r", "seq": 2})
    with pytest.raises(Invalid):
        await submit(ana, "room.thread", {"room": "r", "seq": 99})


@pytest.mark.parametrize("d", [{"seq": 0}, {"seq": 1, "limit": 0}, {"seq": 1, "limit": 101}, {"seq": 1, "after": -1}])
async def test_bad_thread_pages_are_invalid(people, d):
    with pytest.raises(Invalid):
        pipeline.prepare(people[0], command("room.thread", {"room": "r", **d}))


async def test_a_deleted_root_keeps_its_thread_and_takes_no_more_replies(people):
    ana, bob = people
    await submit(ana, "room.post", {"room": "r", "body": "root"})
    await submit(bob, "room.post", {"room": "r", "body": "re", "reply_to": 1})
    await submit(ana, "message.delete", {"room": "r", "seq": 1})
    page = (await submit(bob, "room.thread", {"room": "r", "seq": 1})).data
    assert page["root"]["deleted"] is True and page["root"]["replies"] == 1
    assert [m["body"] for m in page["replies"]] == ["re"]
    with pytest.raises(Invalid):
        await submit(bob, "room.post", {"room": "r", "body": "late", "reply_to": 1})


async def test_since_rev_replays_the_thread_frame_and_joins_show_the_count(people):
    ana, bob = people
    await submit(ana, "room.post", {"room": "r", "body": "root"})
    since = await sync_to_async(lambda: Room.objects.get(slug="r").last_rev)()
    await submit(bob, "room.post", {"room": "r", "body": "re", "reply_to": 1})
    replayed = (await submit(ana, "room.join", {"room": "r", "since_rev": since})).replies
    assert [(f["t"], f["d"]["seq"]) for f in replayed] == [("msg", 2), ("thread", 1)]
    assert replayed[1]["d"]["rev"] == replayed[0]["d"]["rev"] and replayed[1]["d"]["replies"] == 1
    backlog = (await submit(ana, "room.join", {"room": "r"})).replies
    assert backlog[0]["d"]["replies"] == 1 and backlog[1]["d"]["reply_to"] == 1
    found = (await submit(ana, "room.search", {"q": "root"})).data["results"]
    assert found[0]["replies"] == 1


async def test_the_replay_never_cuts_between_a_reply_and_its_thread(people, settings):
    ana, bob = people
    await submit(ana, "room.post", {"room": "r", "body": "root"})
    await submit(bob, "room.post", {"room": "r", "body": "re", "reply_to": 1})
    await submit(bob, "room.post", {"room": "r", "body": "after"})
    settings.MESSAGING = {**settings.MESSAGING, "REPLAY_LIMIT": 2}
    joined = await submit(ana, "room.join", {"room": "r", "since_rev": 0})
    assert [(f["t"], f["d"]["seq"]) for f in joined.replies] == [("msg", 1)]
    assert joined.data["rev_upto"] == 1
    joined = await submit(ana, "room.join", {"room": "r", "since_rev": 1})
    assert [(f["t"], f["d"]["seq"]) for f in joined.replies] == [("msg", 2), ("thread", 1)]
