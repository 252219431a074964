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
    # The thread change takes its own rev, the one after the reply's, in the same transaction.
    assert thread == {
        "t": "thread",
        "d": {"room": "r", "seq": root, "replies": 1, "last_reply_at": msg["d"]["at"], "rev": msg["d"]["rev"] + 1},
    }
    room = await sync_to_async(lambda: Room.objects.get(slug="r"))()
    stored = await sync_to_async(lambda: Thread.objects.get(root__seq=root))()
    assert room.last_rev == stored.rev == msg["d"]["rev"] + 1
    assert (await submit(ana, "room.join", {"room": "r"})).data["last_rev"] == room.last_rev
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
    before = await sync_to_async(lambda: Room.objects.get(slug="r").last_rev)()
    bodies = [("re 0", root), ("plain 0", None), ("re 1", root), ("re 2", root), ("plain 1", None)]
    commands = [command("room.post", {"room": "r", "body": body, "reply_to": to}) for body, to in bodies]
    commands.append(command("room.post", {"room": "r", "body": "bad", "reply_to": 99}))
    outcomes = await sync_to_async(run_batch)([pipeline.prepare(bob, c) for c in commands])
    assert isinstance(outcomes[-1], Invalid)
    frames = [frame for o in outcomes[:-1] for _, frame in o.broadcasts]
    threads = [frame["d"] for frame in frames if frame["t"] == "thread"]
    assert [(t["replies"], t["seq"]) for t in threads] == [(1, root), (2, root), (3, root)]
    # Gapless and in order, per post its msg then a reply's thread, each at a rev of its own.
    assert [f["t"] for f in frames] == ["msg", "thread", "msg", "msg", "thread", "msg", "thread", "msg"]
    last_rev = await sync_to_async(lambda: Room.objects.get(slug="r").last_rev)()
    assert [f["d"]["rev"] for f in frames] == list(range(before + 1, last_rev + 1))
    stored = await sync_to_async(lambda: Thread.objects.get(root__seq=root))()
    assert (stored.replies, stored.rev) == (3, threads[-1]["rev"])
    rows = await sync_to_async(lambda: list(Message.objects.order_by("seq").values_list("seq", "reply_to", "rev")))()
    assert rows == [(1, None, 1)] + [
        (seq, to, f["d"]["rev"])
        for seq, ((_, to), f) in enumerate(zip(bodies, [f for f in frames if f["t"] == "msg"]), start=2)
    ]
    # The events: each post's, right after it a reply's thread's, at gapless positions of the room in rev order.
    events = await sync_to_async(
        lambda: list(Event.objects.order_by("position").values_list("position", "type", "data"))
    )()
    assert [p for p, _, _ in events] == list(range(1, len(events) + 1))
    assert [d["rev"] for _, _, d in events][-8:] == [f["d"]["rev"] for f in frames]
    assert [t for _, t, _ in events][-8:] == [
        {"msg": "message.posted", "thread": "thread.changed"}[f["t"]] for f in frames
    ]
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
    assert replayed[1]["d"]["rev"] == replayed[0]["d"]["rev"] + 1 and replayed[1]["d"]["replies"] == 1
    backlog = (await submit(ana, "room.join", {"room": "r"})).replies
    assert backlog[0]["d"]["replies"] == 1 and backlog[1]["d"]["reply_to"] == 1
    found = (await submit(ana, "room.search", {"q": "root"})).data["results"]
    assert found[0]["replies"] == 1


async def test_a_resume_between_a_reply_and_its_thread_gets_the_thread_frame(people, settings):
    ana, bob = people
    await submit(ana, "room.post", {"room": "r", "body": "root"})
    reply = await submit(bob, "room.post", {"room": "r", "body": "re", "reply_to": 1})
    await submit(bob, "room.post", {"room": "r", "body": "after"})
    msg, thread = (frame["d"] for _, frame in reply.broadcasts)
    # since_rev at the reply's rev: exactly the thread change, and what came after.
    joined = await submit(ana, "room.join", {"room": "r", "since_rev": msg["rev"]})
    assert [(f["t"], f["d"]["seq"], f["d"]["rev"]) for f in joined.replies] == [
        ("thread", 1, thread["rev"]),
        ("msg", 3, thread["rev"] + 1),
    ]
    assert joined.replies[0]["d"]["replies"] == 1 and joined.data["last_rev"] == thread["rev"] + 1
    # A replay cut by its limit may stop between the two: it says so, and the thread comes next.
    settings.MESSAGING = {**settings.MESSAGING, "REPLAY_LIMIT": 2}
    joined = await submit(ana, "room.join", {"room": "r", "since_rev": 0})
    assert [(f["t"], f["d"]["seq"]) for f in joined.replies] == [("msg", 1), ("msg", 2)]
    assert joined.data["rev_upto"] == msg["rev"]
    joined = await submit(ana, "room.join", {"room": "r", "since_rev": joined.data["rev_upto"]})
    assert [(f["t"], f["d"]["seq"]) for f in joined.replies] == [("thread", 1), ("msg", 3)]


def post_portably(user, body: str, reply_to: int | None = None) -> list[dict]:
    """`room.post` on its portable path (the one a host's `can_post` policy takes): its frames."""
    from django.db import transaction

    from messaging.chat.posts import Post, post_message
    from messaging.core.handlers import CommandContext

    ctx = CommandContext(user=user, command_id=uuid.uuid4().hex, type="room.post")
    with transaction.atomic():
        post_message(ctx, Post("r", body, reply_to=reply_to))
    return [frame for _, frame in ctx.broadcasts]


async def test_the_portable_path_gives_the_thread_its_own_rev_and_event_after_the_reply(people):
    ana, bob = people
    await submit(ana, "room.post", {"room": "r", "body": "root"})
    before = await sync_to_async(lambda: Room.objects.get(slug="r").last_rev)()
    frames = []
    for body, to in [("re 0", 1), ("plain", None), ("re 1", 1)]:
        frames += await sync_to_async(post_portably)(bob, body, to)
    assert [f["t"] for f in frames] == ["msg", "thread", "msg", "msg", "thread"]
    room = await sync_to_async(lambda: Room.objects.get(slug="r"))()
    assert [f["d"]["rev"] for f in frames] == list(range(before + 1, room.last_rev + 1))
    assert [f["d"]["replies"] for f in frames if f["t"] == "thread"] == [1, 2]
    stored = await sync_to_async(lambda: Thread.objects.values_list("replies", "rev").get())()
    assert stored == (2, room.last_rev)
    events = await sync_to_async(lambda: list(Event.objects.order_by("position").values_list("position", "data")))()
    assert [p for p, _ in events] == list(range(1, room.last_event + 1))
    assert [d["rev"] for _, d in events][-5:] == [f["d"]["rev"] for f in frames]
    # A refused reply takes neither rev.
    with pytest.raises(Invalid):
        await sync_to_async(post_portably)(bob, "no", 2)
    assert await sync_to_async(lambda: Room.objects.get(slug="r").last_rev)() == room.last_rev


async def test_a_batch_over_two_rooms_numbers_each_rooms_posts_and_threads_gapless(people):
    ana, bob = people
    await submit(bob, "room.join", {"room": "s"})
    await submit(ana, "room.join", {"room": "s"})
    for room in ("r", "s"):
        await submit(ana, "room.post", {"room": room, "body": "root"})
    before = await sync_to_async(lambda: dict(Room.objects.values_list("slug", "last_rev")))()
    plan = [("s", 1), ("r", None), ("r", 1), ("s", None), ("s", 1), ("r", 1), ("s", 1)]
    commands = [command("room.post", {"room": room, "body": "x", "reply_to": to}) for room, to in plan]
    outcomes = await sync_to_async(run_batch)([pipeline.prepare(bob, c) for c in commands])
    after = await sync_to_async(lambda: dict(Room.objects.values_list("slug", "last_rev")))()
    for room in ("r", "s"):
        frames = [f for o in outcomes for _, f in o.broadcasts if f["d"]["room"] == room]
        kinds = [k for r, to in plan if r == room for k in (["msg", "thread"] if to else ["msg"])]
        assert [f["t"] for f in frames] == kinds
        assert [f["d"]["rev"] for f in frames] == list(range(before[room] + 1, after[room] + 1))
        threads = [f["d"] for f in frames if f["t"] == "thread"]
        assert [t["replies"] for t in threads] == list(range(1, len(threads) + 1))
        stored = await sync_to_async(lambda r=room: Thread.objects.get(room__slug=r).rev)()
        assert stored == after[room]
