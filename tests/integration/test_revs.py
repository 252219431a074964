"""`rev` (PROTOCOL.md 1.1): one gapless change counter per room, and the
`room.join` with `since_rev` that resumes every kind of change."""

from __future__ import annotations

import threading
import uuid

import pytest
from channels.db import database_sync_to_async
from django.contrib.auth import get_user_model
from django.db import connection
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from messaging.contrib.reactions.models import ReactionCount
from messaging.exceptions import CommandError
from messaging.models import Message, MessageVersion, Room

from .conftest import apply_command

pytestmark = [pytest.mark.django_db(transaction=True)]

KINDS = ("post", "edit", "delete", "react")
# (user, kind, seq the change is about)
operation = st.tuples(st.integers(0, 2), st.sampled_from(KINDS), st.integers(1, 6))


def command_of(room: str, kind: str, seq: int, n: int) -> tuple[str, dict]:
    if kind == "post":
        return "room.post", {"room": room, "body": f"post {n}"}
    if kind == "edit":
        return "message.edit", {"room": room, "seq": seq, "body": f"edit {n}"}
    if kind == "delete":
        return "message.delete", {"room": room, "seq": seq}
    return "reaction.add", {"room": room, "seq": seq}


def change_revs(outcome) -> list[int]:
    return [frame["d"]["rev"] for _, frame in outcome.broadcasts if "rev" in frame["d"]]


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(lanes=st.lists(st.lists(operation, min_size=1, max_size=8), min_size=2, max_size=4))
def test_revs_are_gapless_and_rise_in_each_lane_under_concurrent_changes(lanes):
    # Each lane runs its changes one after another on its own connection,
    # every change twice (the second a duplicate, from another lane's
    # thread), all lanes at once: posts, edits, deletes and reactions race
    # for one room.
    room = f"r{uuid.uuid4().hex[:12]}"
    users = [get_user_model().objects.create_user(username=f"{room}-{n}") for n in range(3)]
    for user in users:
        apply_command(user, "room.join", {"room": room})
    revs: list[list[int]] = [[] for _ in lanes]
    applied: list[int] = [0]
    lock = threading.Lock()
    barrier = threading.Barrier(len(lanes))
    ids = [[uuid.uuid4().hex for _ in lane] for lane in lanes]

    def run(lane_no: int) -> None:
        barrier.wait()
        try:
            for n, (user, kind, seq) in enumerate(lanes[lane_no]):
                t, d = command_of(room, kind, seq, n)
                for _copy in range(2):
                    try:
                        outcome = apply_command(users[user], t, d, id=ids[lane_no][n])
                    except CommandError:
                        continue  # refused: another's message, a seq not there yet, a tombstone
                    if not outcome.dup:
                        with lock:
                            applied[0] += 1
                        revs[lane_no].extend(change_revs(outcome))
        finally:
            connection.close()

    threads = [threading.Thread(target=run, args=(n,)) for n in range(len(lanes))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    last_rev = Room.objects.get(slug=room).last_rev
    every = sorted(rev for lane in revs for rev in lane)
    # Gapless and unique: each change took one rev, none was lost to a rollback.
    assert every == list(range(1, last_rev + 1))
    # A lane's changes commit one after another, so their revs rise.
    for lane in revs:
        assert lane == sorted(lane)
    # Every applied change took one (a repeated delete of a tombstone takes none).
    messages = Message.objects.filter(room__slug=room)
    changes = (
        messages.count()
        + MessageVersion.objects.filter(message__room__slug=room).count()
        + sum(ReactionCount.objects.filter(room__slug=room).values_list("count", flat=True))
    )
    assert changes == last_rev <= applied[0]


# Resume by since_rev ---------------------------------------------------------


class Shown:
    """What a client shows of a room, built from frames as PROTOCOL.md says."""

    def __init__(self) -> None:
        self.messages: dict[int, dict] = {}
        self.counts: dict[int, int] = {}
        self.rev = 0

    def take(self, frame: dict) -> None:
        d = frame["d"]
        kind = frame["t"]
        if "rev" in d and kind in ("msg", "msg.edit", "msg.delete", "reaction"):
            self.rev = max(self.rev, d["rev"])
        if kind == "msg" and d["seq"] not in self.messages:
            self.messages[d["seq"]] = {"body": d["body"], "version": d["version"], "deleted": d.get("deleted", False)}
        elif kind in ("msg.edit", "msg.delete"):
            held = self.messages.get(d["seq"])
            if held is not None and d["version"] > held["version"]:
                held.update(version=d["version"], body=d.get("body", ""), deleted=kind == "msg.delete")
        elif kind == "reaction":
            self.counts[d["seq"]] = max(self.counts.get(d["seq"], 0), d["count"])


async def drain(client) -> list[dict]:
    frames = list(client.inbox)
    client.inbox.clear()
    while not await client.comm.receive_nothing(timeout=0.3):
        frames.append(await client.receive())
    return frames


async def caught_up(client, shown: Shown, room: str = "lobby") -> int:
    """Join from the last rev got until the room's last_rev is reached; the joins it took."""
    joins = 0
    while True:
        ack = await client.join(room, since_rev=shown.rev)
        joins += 1
        frames = await drain(client)
        # What the ack says follows it is exactly the replay.
        assert len(frames) == ack["d"]["replayed"]
        for frame in frames:
            shown.take(frame)
        # The highest rev got is where the replay stops, or below it (a message changed several times).
        assert shown.rev <= ack["d"]["rev_upto"]
        shown.rev = ack["d"]["rev_upto"]
        if shown.rev >= ack["d"]["last_rev"]:
            return joins
        assert joins < 50


async def every_kind_of_change(ana, bob) -> None:
    for body in ("one", "two", "three"):
        assert (await ana.call("room.post", {"room": "lobby", "body": body}))["ok"]
    # "before" is seq 1, so "one" is 2 ... "four" 5, "five" 6, "six" 7.
    calls = [
        (ana, "room.post", {"room": "lobby", "body": "four"}),
        (ana, "message.edit", {"room": "lobby", "seq": 2, "body": "one, fixed"}),
        (ana, "message.edit", {"room": "lobby", "seq": 2, "body": "one, fixed again"}),
        (ana, "message.delete", {"room": "lobby", "seq": 3}),
        (bob, "reaction.add", {"room": "lobby", "seq": 4}),
        (bob, "reaction.add", {"room": "lobby", "seq": 2}),
        (ana, "message.edit", {"room": "lobby", "seq": 5, "body": "four, fixed"}),
        (bob, "room.post", {"room": "lobby", "body": "five"}),
        (bob, "message.delete", {"room": "lobby", "seq": 6}),
        (ana, "reaction.add", {"room": "lobby", "seq": 4}),
        (ana, "room.post", {"room": "lobby", "body": "six"}),
    ]
    for client, t, d in calls:
        ack = await client.call(t, d)
        assert ack["ok"], (t, d, ack)


async def truth(open_clients, make_user) -> Shown:
    """The room as a new member's full replay shows it."""
    fresh = await open_clients(await make_user("cat"))
    shown = Shown()
    await caught_up(fresh, shown)
    return shown


@pytest.mark.parametrize(("replay_limit", "send_buffer"), [(500, 1 << 20), (2, 1 << 20), (500, 1200)])
async def test_a_resume_by_since_rev_brings_every_kind_of_change(
    make_user, open_clients, settings, replay_limit, send_buffer
):
    # The replay stops at REPLAY_LIMIT frames, or at half of MAX_SEND_BUFFER in bytes (here about 3 frames).
    settings.MESSAGING = {**settings.MESSAGING, "REPLAY_LIMIT": replay_limit, "MAX_SEND_BUFFER": send_buffer}
    ana, bob = await open_clients(await make_user("ana")), await open_clients(await make_user("bob"))
    await ana.join("lobby")
    await bob.join("lobby")
    assert (await ana.call("room.post", {"room": "lobby", "body": "before"}))["ok"]
    shown = Shown()
    await caught_up(bob, shown)
    assert shown.rev == 1
    await bob.close()

    await every_kind_of_change(ana, await open_clients(bob.user))
    again = await open_clients(bob.user)
    joins = await caught_up(again, shown)
    expected = await truth(open_clients, make_user)
    assert shown.messages == expected.messages and shown.counts == expected.counts
    assert shown.messages[2]["body"] == "one, fixed again" and shown.messages[3]["deleted"]
    assert shown.messages[5]["body"] == "four, fixed" and shown.messages[6]["deleted"] and len(shown.messages) == 7
    assert shown.counts == {4: 2, 2: 1}
    assert shown.rev == await database_sync_to_async(lambda: Room.objects.get(slug="lobby").last_rev)()
    # Every change was in one replay, or a few frames at a time.
    assert joins == 1 if (replay_limit, send_buffer) == (500, 1 << 20) else joins > 2


async def test_a_replay_sends_a_message_changed_several_times_once(make_user, open_clients):
    ana = await open_clients(await make_user("ana"))
    await ana.join("lobby")
    assert (await ana.call("room.post", {"room": "lobby", "body": "v1"}))["ok"]
    for n in range(2, 6):
        assert (await ana.call("message.edit", {"room": "lobby", "seq": 1, "body": f"v{n}"}))["ok"]
    bob = await open_clients(await make_user("bob"))
    ack = await bob.join("lobby", since_rev=0)
    assert ack["d"]["last_rev"] == ack["d"]["rev_upto"] == 5 and ack["d"]["last_seq"] == 1
    assert ack["d"]["replayed"] == 1
    frames = await drain(bob)
    assert [(f["t"], f["d"]["body"], f["d"]["version"], f["d"]["rev"]) for f in frames] == [("msg", "v5", 5, 5)]
    ack = await bob.join("lobby", since_rev=2)
    frames = await drain(bob)
    assert [(f["t"], f["d"]["body"], f["d"]["rev"]) for f in frames] == [("msg.edit", "v5", 5)]
    ack = await bob.join("lobby", since_rev=5)
    assert await drain(bob) == []


async def test_since_and_since_rev_together_are_invalid(make_user, open_clients):
    ana = await open_clients(await make_user("ana"))
    ack = await ana.call("room.join", {"room": "lobby", "since": 0, "since_rev": 0})
    assert ack["error"]["code"] == "invalid"
    for bad in (-1, 1.0, "3", True):
        assert (await ana.call("room.join", {"room": "lobby", "since_rev": bad}))["error"]["code"] == "invalid"


@pytest.mark.parametrize("posts", [3, 4])
async def test_a_replay_of_exactly_replay_limit_posts_with_more_after_says_where_it_stopped(
    make_user, open_clients, settings, posts
):
    # Posts only: one source of the replay fills the limit exactly, and more follow it.
    settings.MESSAGING = {**settings.MESSAGING, "REPLAY_LIMIT": 3}
    ana = await open_clients(await make_user("ana"))
    await ana.join("lobby")
    for n in range(posts + 2):
        assert (await ana.call("room.post", {"room": "lobby", "body": f"p{n}"}))["ok"]
    bob = await open_clients(await make_user("bob"))
    ack = await bob.join("lobby", since_rev=0)
    frames = await drain(bob)
    assert [f["d"]["seq"] for f in frames] == [1, 2, 3]
    # Not caught up: the cut is the last frame's rev, from which the client joins again.
    assert ack["d"]["rev_upto"] == 3 < ack["d"]["last_rev"]
    ack = await bob.join("lobby", since_rev=ack["d"]["rev_upto"])
    frames = await drain(bob)
    assert [f["d"]["seq"] for f in frames] == list(range(4, min(posts + 3, 7)))
