"""A replica catches up by itself (PROTOCOL.md 1.2): after a cut link, after its home's events
are pruned, and on a first join of a room with history; its open sockets hear what it missed."""

from __future__ import annotations

import asyncio

import pytest
from asgiref.sync import sync_to_async

from . import truth
from .test_commands import socket
from .test_replication import same_rooms, until

pytestmark = [pytest.mark.e2e]


async def test_a_first_join_brings_the_rooms_history(start_pair):
    pair = await sync_to_async(start_pair)(MESSAGING_FEDERATION_FETCH_LIMIT="7")
    ana = await socket(pair.a.url, "ana")
    try:
        await ana.join("lobby")
        for n in range(30):
            await ana.send("room.post", {"room": "lobby", "body": f"m{n}"})
        await ana.call("room.post", {"room": "lobby", "body": "last"})
        bo = await socket(pair.b.url, "bo")
        try:
            joined = await bo.join("lobby@a", since=0)
            assert joined["d"]["last_seq"] == 31, joined
            backlog = await bo.messages_until("lobby@a", 31)
            assert [backlog[seq]["d"]["body"] for seq in sorted(backlog)] == [f"m{n}" for n in range(30)] + ["last"]
        finally:
            await bo.close()
    finally:
        await ana.close()
    assert await sync_to_async(same_rooms)(pair, "lobby")


async def test_after_a_cut_link_the_replica_and_its_sockets_catch_up_with_no_client_action(start_pair):
    pair = await sync_to_async(start_pair)()
    ana, bo = await socket(pair.a.url, "ana"), await socket(pair.b.url, "bo")
    try:
        await ana.join("lobby")
        await bo.join("lobby@a")
        await ana.call("room.post", {"room": "lobby", "body": "before"})
        await bo.messages_until("lobby@a", 1)
        await sync_to_async(pair.b.inbound.refuse)(60)
        for n in range(20):
            await ana.call("room.post", {"room": "lobby", "body": f"during {n}"})
        await ana.call("message.edit", {"room": "lobby", "seq": 1, "body": "before, edited"})
        await asyncio.sleep(1)
        assert truth.room(pair.b.database_url, "lobby@a")[0] == 1  # nothing got through
        pair.b.inbound.heal()
        got = await bo.messages_until("lobby@a", 21, timeout=30)
        assert [got[seq]["d"]["body"] for seq in range(2, 22)] == [f"during {n}" for n in range(20)]
        [edit] = await bo.frames("msg.edit", 1)
        assert edit["d"]["body"] == "before, edited"
        await until(lambda: same_rooms(pair, "lobby"))
    finally:
        await ana.close()
        await bo.close()


async def test_events_pruned_while_the_peer_was_away_are_fetched_from_the_rooms(start_pair):
    pair = await sync_to_async(start_pair)()
    ana, bo = await socket(pair.a.url, "ana"), await socket(pair.b.url, "bo")
    try:
        await ana.join("lobby")
        await bo.join("lobby@a")
        await sync_to_async(pair.b.inbound.refuse)(60)
        for n in range(5):
            await ana.call("room.post", {"room": "lobby", "body": f"away {n}"})
        await ana.call("message.delete", {"room": "lobby", "seq": 2})
        # A week later: the relay pruned the room's events (published, past EVENTS_RETENTION).
        await sync_to_async(truth.scalar)(
            pair.a.database_url, "WITH gone AS (DELETE FROM messaging_event RETURNING 1) SELECT count(*) FROM gone"
        )
        pair.b.inbound.heal()
        await until(lambda: same_rooms(pair, "lobby"))
        stored = [(seq, body) for seq, _, body, *_ in truth.messages(pair.b.database_url, "lobby@a")]
        assert stored == [(1, "away 0"), (2, ""), (3, "away 2"), (4, "away 3"), (5, "away 4")]
        # The socket's last word on each message is its state now: seq 2 a tombstone.
        shown: dict[int, dict] = {}
        while len(shown) < 5 or not shown[2].get("deleted"):
            frame = await bo.receive(timeout=30)
            if frame["t"] == "msg":
                shown[frame["d"]["seq"]] = frame["d"]
            elif frame["t"] == "msg.delete":
                shown[frame["d"]["seq"]] = {**shown.get(frame["d"]["seq"], {}), "body": "", "deleted": True}
        assert [shown[seq]["body"] for seq in range(1, 6)] == ["away 0", "", "away 2", "away 3", "away 4"]
    finally:
        await ana.close()
        await bo.close()


async def test_a_first_join_brings_threads_and_emoji_counts(start_pair):
    pair = await sync_to_async(start_pair)()
    ana = await socket(pair.a.url, "ana")
    try:
        await ana.join("lobby")
        await ana.call("room.post", {"room": "lobby", "body": "root"})
        for n in range(3):
            assert (await ana.call("room.post", {"room": "lobby", "body": f"re {n}", "reply_to": 1}))["ok"]
        assert (await ana.call("reaction.set", {"room": "lobby", "seq": 1, "emoji": "👍", "on": True}))["ok"]
        bo = await socket(pair.b.url, "bo")
        try:
            await bo.join("lobby@a", since=0)
            await bo.messages_until("lobby@a", 4)
            page = await bo.call("room.thread", {"room": "lobby@a", "seq": 1})
            assert page["ok"], page
            assert [m["body"] for m in page["d"]["replies"]] == ["re 0", "re 1", "re 2"]
            assert page["d"]["root"]["replies"] == 3 and page["d"]["root"]["reactions"] == {"👍": 1}
            assert page["d"]["root"]["mine"] == []
        finally:
            await bo.close()
    finally:
        await ana.close()
