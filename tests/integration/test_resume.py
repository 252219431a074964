"""Resume: `room.join` with `since` sends exactly what a client missed, in seq order."""

from __future__ import annotations

import asyncio

import pytest
from channels.db import database_sync_to_async

from messaging.models import Membership, Room

from .conftest import apply_command

pytestmark = [pytest.mark.django_db(transaction=True)]


async def post_many(client, room: str, bodies) -> list[int]:
    seqs = []
    for body in bodies:
        ack = await client.call("room.post", {"room": room, "body": body})
        assert ack["ok"], ack
        seqs.append(ack["d"]["seq"])
    return seqs


def seqs_and_bodies(frames: list[dict]) -> list[tuple[int, str]]:
    return [(f["d"]["seq"], f["d"]["body"]) for f in frames]


async def test_missed_messages_are_replayed_exactly_in_order_after_a_disconnect(make_user, open_clients):
    ana, bob = await open_clients(await make_user("ana")), await open_clients(await make_user("bob"))
    await ana.join("lobby")
    await bob.join("lobby")
    await post_many(ana, "lobby", ["one", "two", "three"])
    seen = await bob.frames("msg", 3)
    last_seen = seen[-1]["d"]["seq"]
    await bob.close()

    await post_many(ana, "lobby", ["four", "five", "six", "seven"])
    back = await open_clients(bob.user)
    ack = await back.join("lobby", since=last_seen)
    assert ack["d"]["last_seq"] == 7
    missed = await back.frames("msg", 4)
    assert seqs_and_bodies(missed) == [(4, "four"), (5, "five"), (6, "six"), (7, "seven")]
    assert all(f["d"]["room"] == "lobby" and f["d"]["sender"] == {"id": ana.user.pk, "name": "ana"} for f in missed)
    assert await back.nothing_more()


async def test_a_gap_is_filled_by_rejoining_with_since(make_user, open_clients):
    ana, bob = await open_clients(await make_user("ana")), await open_clients(await make_user("bob"))
    await ana.join("lobby")
    await bob.join("lobby")
    await post_many(ana, "lobby", [f"m{i}" for i in range(1, 8)])
    live = await bob.frames("msg", 7)
    # The client saw 5 and then 7: it asks for everything after 5.
    kept = [f for f in live if f["d"]["seq"] != 6]
    seqs = [f["d"]["seq"] for f in kept]
    gap_after = next(a for a, b in zip(seqs, seqs[1:]) if b != a + 1)
    assert gap_after == 5
    await bob.join("lobby", since=gap_after)  # a repeated join on the same socket
    assert seqs_and_bodies(await bob.frames("msg", 2)) == [(6, "m6"), (7, "m7")]
    assert await bob.nothing_more()


async def test_replay_is_capped_at_replay_limit_oldest_first(make_user, open_clients, settings):
    settings.MESSAGING = {**settings.MESSAGING, "REPLAY_LIMIT": 3}
    ana = await open_clients(await make_user("ana"))
    await ana.join("lobby")
    await post_many(ana, "lobby", ["a", "b", "c", "d", "e"])
    await ana.frames("msg", 5)

    bob = await open_clients(await make_user("bob"))
    ack = await bob.join("lobby", since=0)
    assert ack["d"]["last_seq"] == 5
    first = await bob.frames("msg", 3)
    assert [f["d"]["seq"] for f in first] == [1, 2, 3]
    assert await bob.nothing_more()
    # Short of last_seq: the client continues from what it got.
    await bob.join("lobby", since=3)
    assert [f["d"]["seq"] for f in await bob.frames("msg", 2)] == [4, 5]
    assert await bob.nothing_more()


async def test_join_without_since_sends_the_last_fifty(make_user, open_clients):
    ana = await make_user("ana")

    def post_52():
        apply_command(ana, "room.join", {"room": "lobby"})
        for i in range(1, 53):
            apply_command(ana, "room.post", {"room": "lobby", "body": f"m{i}"})

    await database_sync_to_async(post_52)()
    bob = await open_clients(await make_user("bob"))
    ack = await bob.join("lobby")
    assert ack["d"]["last_seq"] == 52
    recent = await bob.frames("msg", 50)
    assert seqs_and_bodies(recent) == [(i, f"m{i}") for i in range(3, 53)]
    assert await bob.nothing_more()


@pytest.mark.parametrize("since", [3, 4, 100])
async def test_since_at_or_past_the_last_seq_sends_nothing(make_user, open_clients, since):
    ana = await open_clients(await make_user("ana"))
    await ana.join("lobby")
    await post_many(ana, "lobby", ["a", "b", "c"])
    bob = await open_clients(await make_user("bob"))
    ack = await bob.join("lobby", since=since)
    assert ack["d"]["last_seq"] == 3
    assert await bob.nothing_more()


@pytest.mark.parametrize("since", [-1, 1.5, "2", True, [1]])
async def test_a_bad_since_is_invalid_and_joins_nothing(make_user, open_clients, since):
    bob = await open_clients(await make_user("bob"))
    ack = await bob.call("room.join", {"room": "lobby", "since": since})
    assert ack["ok"] is False and ack["error"]["code"] == "invalid" and ack["error"]["retry"] is False
    assert await database_sync_to_async(Room.objects.exists)() is False
    assert await database_sync_to_async(Membership.objects.exists)() is False


async def test_live_messages_racing_the_backlog_may_repeat_but_none_is_missed(make_user, open_clients):
    ana = await open_clients(await make_user("ana"))
    await ana.join("lobby")
    await post_many(ana, "lobby", ["early"])
    total = 30
    bob = await open_clients(await make_user("bob"))

    async def keep_posting():
        ids = [await ana.send("room.post", {"room": "lobby", "body": f"m{i}"}) for i in range(total - 1)]
        return [await ana.ack(id) for id in ids]

    acks, _ = await asyncio.gather(keep_posting(), bob.join("lobby", since=0))
    assert all(a["ok"] for a in acks)

    received = []
    while {f["d"]["seq"] for f in received} != set(range(1, total + 1)):
        received += await bob.frames("msg", 1)
    # What a client does with repeats: drop them by (room, seq).
    unique, seen = [], set()
    for frame in received:
        key = (frame["d"]["room"], frame["d"]["seq"])
        if key not in seen:
            seen.add(key)
            unique.append(frame["d"]["seq"])
    assert unique == list(range(1, total + 1))
