"""Emoji reactions (PROTOCOL.md 1.2) on real PostgreSQL: `reaction.set` once per user and emoji, its ack's
count, the `reactions` frame and its rev, `reactions` and `mine` in pages, the bound on distinct emoji."""

from __future__ import annotations

import uuid

import pytest
from asgiref.sync import sync_to_async

from messaging.chat.models import Reaction, ReactionTally
from messaging.core import pipeline
from messaging.core.exceptions import Invalid
from messaging.core.protocol import Command
from messaging.models import Event, Room

pytestmark = [pytest.mark.django_db(transaction=True)]


def command(t: str, d: dict, id: str | None = None) -> Command:
    return Command(id=id or uuid.uuid4().hex, t=t, d=d)


async def submit(user, t: str, d: dict, id: str | None = None):
    return await pipeline.submit(user, command(t, d, id))


async def react(user, emoji: str, on: bool = True, seq: int = 1, id: str | None = None):
    return await submit(user, "reaction.set", {"room": "r", "seq": seq, "emoji": emoji, "on": on}, id)


@pytest.fixture
async def people(django_user_model):
    create = sync_to_async(django_user_model.objects.create_user)
    ana, bob = [await create(username=f"{n}-{uuid.uuid4().hex[:6]}", first_name=n) for n in ("ana", "bob")]
    for user in (ana, bob):
        await submit(user, "room.join", {"room": "r"})
    await submit(ana, "room.post", {"room": "r", "body": "hello"})
    return ana, bob


def last_rev() -> int:
    return Room.objects.get(slug="r").last_rev


async def test_one_count_per_user_and_emoji_and_each_change_tells_the_room(people):
    ana, bob = people
    first = await react(ana, "👍")
    assert first.data == {"room": "r", "seq": 1, "emoji": "👍", "on": True, "count": 1}
    [(room, frame)] = first.broadcasts
    rev = await sync_to_async(last_rev)()
    assert (room, frame) == (
        "r",
        {"t": "reactions", "d": {"room": "r", "seq": 1, "emoji": "👍", "count": 1, "rev": rev}},
    )
    # Again by another command: already on, nothing changes.
    again = await react(ana, "👍")
    assert again.data["count"] == 1 and again.broadcasts == [] and await sync_to_async(last_rev)() == rev
    assert (await react(bob, "👍")).data["count"] == 2
    off = await react(ana, "👍", on=False)
    assert off.data == {"room": "r", "seq": 1, "emoji": "👍", "on": False, "count": 1}
    assert off.broadcasts[0][1]["d"]["count"] == 1
    assert (await react(ana, "👍", on=False)).broadcasts == []
    events = await sync_to_async(
        lambda: list(Event.objects.filter(type="reaction.changed").values_list("data", flat=True))
    )()
    assert [(d["emoji"], d["count"]) for d in events] == [("👍", 1), ("👍", 2), ("👍", 1)]


async def test_a_copy_gets_the_original_ack(people):
    ana, _ = people
    first = await react(ana, "🎉", id="same")
    await react(ana, "🎉", on=False)
    copy = await react(ana, "🎉", id="same")
    assert copy.dup and copy.data == first.data
    assert await sync_to_async(Reaction.objects.count)() == 0


async def test_pages_carry_reactions_and_the_viewers_own(people):
    ana, bob = people
    await react(ana, "👍")
    await react(bob, "👍")
    await react(bob, "❤️")
    await submit(ana, "room.post", {"room": "r", "body": "plain hello"})
    for user, mine in ((ana, ["👍"]), (bob, ["👍", "❤️"])):
        history = (await submit(user, "room.history", {"room": "r", "before": 10})).data["messages"]
        assert history[0]["reactions"] == {"👍": 2, "❤️": 1} and history[0]["mine"] == mine
        assert "reactions" not in history[1] and "mine" not in history[1]
        backlog = (await submit(user, "room.join", {"room": "r"})).replies
        assert backlog[0]["d"]["reactions"] == {"👍": 2, "❤️": 1} and backlog[0]["d"]["mine"] == mine
        found = (await submit(user, "room.search", {"q": "hello"})).data["results"]
        assert found[1]["reactions"] == {"👍": 2, "❤️": 1} and found[1]["mine"] == mine
        root = (await submit(user, "room.thread", {"room": "r", "seq": 1})).data["root"]
        assert root["mine"] == mine
    # Down to 0: gone from frames.
    await react(bob, "❤️", on=False)
    history = (await submit(ana, "room.history", {"room": "r", "before": 10})).data["messages"]
    assert history[0]["reactions"] == {"👍": 2}


async def test_since_rev_replays_each_changed_count(people):
    ana, bob = people
    since = await sync_to_async(last_rev)()
    await react(ana, "👍")
    await react(bob, "👀")
    await react(ana, "👍", on=False)
    replayed = (await submit(bob, "room.join", {"room": "r", "since_rev": since})).replies
    assert [(f["t"], f["d"]["emoji"], f["d"]["count"]) for f in replayed] == [
        ("reactions", "👀", 1),
        ("reactions", "👍", 0),
    ]
    assert [f["d"]["rev"] for f in replayed] == [since + 2, since + 3]


@pytest.mark.parametrize(
    "d",
    [
        {"emoji": "", "on": True},
        {"emoji": "x" * 17, "on": True},
        {"emoji": "a b", "on": True},
        {"emoji": "a\nb", "on": True},
        {"emoji": "\u0007", "on": True},
        {"emoji": 5, "on": True},
        {"emoji": "👍", "on": 1},
        {"emoji": "👍"},
        {"emoji": "👍", "on": True, "seq": 0},
    ],
)
async def test_bad_reactions_are_invalid(people, d):
    with pytest.raises(Invalid):
        pipeline.prepare(people[0], command("reaction.set", {"room": "r", "seq": 1, **d}))


async def test_an_emoji_of_several_code_points_is_one(people):
    ana, _ = people
    family = "👨\u200d👩\u200d👧"
    assert (await react(ana, family)).data["count"] == 1


async def test_distinct_emoji_are_bounded_and_past_it_nothing_changes(people, settings):
    ana, bob = people
    settings.MESSAGING = {**settings.MESSAGING, "REACTION_EMOJI_MAX": 3}
    for emoji in ("a", "b", "c"):
        await react(ana, emoji)
    rev = await sync_to_async(last_rev)()
    with pytest.raises(Invalid, match="3 different emoji"):
        await react(bob, "d")
    assert await sync_to_async(last_rev)() == rev
    assert await sync_to_async(ReactionTally.objects.count)() == 3
    # Joining one it has is fine; taking one off makes room for another.
    assert (await react(bob, "a")).data["count"] == 2
    await react(ana, "c", on=False)
    assert (await react(bob, "d")).data["count"] == 1


async def test_a_deleted_message_loses_its_reactions_and_takes_none(people):
    ana, bob = people
    await react(bob, "👍")
    await submit(ana, "message.delete", {"room": "r", "seq": 1})
    assert await sync_to_async(Reaction.objects.count)() == 0
    assert await sync_to_async(ReactionTally.objects.count)() == 0
    with pytest.raises(Invalid, match="deleted"):
        await react(bob, "👍")
    history = (await submit(ana, "room.history", {"room": "r", "before": 10})).data["messages"]
    assert "reactions" not in history[0]


async def test_reactions_need_membership_and_a_message(people, django_user_model):
    ana, _ = people
    stranger = await sync_to_async(django_user_model.objects.create_user)(username=f"x-{uuid.uuid4().hex[:6]}")
    from messaging.core.exceptions import Forbidden

    with pytest.raises(Forbidden):
        await react(stranger, "👍")
    with pytest.raises(Invalid):
        await react(ana, "👍", seq=99)


def test_replies_and_emoji_racing_from_many_connections_count_right_with_gapless_revs(django_user_model):
    """Four users at once, each on its own connection, each command twice: replies to one root, an emoji
    on and off. Every change takes one rev (a reply two: its post's, and its thread's the next), every count
    is exact."""
    import threading

    from django.db import connection

    from messaging.chat.models import Thread
    from messaging.exceptions import CommandError
    from messaging.models import Message

    from .conftest import apply_command

    users = [django_user_model.objects.create_user(username=f"race-{n}-{uuid.uuid4().hex[:6]}") for n in range(4)]
    for user in users:
        apply_command(user, "room.join", {"room": "race"})
    apply_command(users[0], "room.post", {"room": "race", "body": "root"})
    barrier = threading.Barrier(len(users))
    revs: list[int] = []
    lock = threading.Lock()

    def run(user) -> None:
        barrier.wait()
        steps = [
            ("room.post", {"room": "race", "body": "re", "reply_to": 1}),
            ("reaction.set", {"room": "race", "seq": 1, "emoji": "👍", "on": True}),
            ("room.post", {"room": "race", "body": "re again", "reply_to": 1}),
            ("reaction.set", {"room": "race", "seq": 1, "emoji": "🎉", "on": True}),
            ("reaction.set", {"room": "race", "seq": 1, "emoji": "🎉", "on": False}),
        ]
        try:
            for t, d in steps:
                id = uuid.uuid4().hex
                for _copy in range(2):
                    try:
                        outcome = apply_command(user, t, d, id=id)
                    except CommandError:
                        continue
                    if not outcome.dup:
                        with lock:
                            revs.extend(f["d"]["rev"] for _, f in outcome.broadcasts)
        finally:
            connection.close()

    threads = [threading.Thread(target=run, args=(user,)) for user in users]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    last_rev = Room.objects.get(slug="race").last_rev
    assert sorted(revs) == list(range(2, last_rev + 1))
    assert Thread.objects.get(root__seq=1, room__slug="race").replies == 8
    assert Message.objects.filter(room__slug="race", reply_to=1).count() == 8
    assert dict(ReactionTally.objects.values_list("emoji", "count")) == {"👍": 4, "🎉": 0}
    assert Reaction.objects.count() == 4
    assert last_rev == 1 + 8 * 2 + 4 + 8
