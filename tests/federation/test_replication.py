"""Changes of a shared room reach the peers with members in it, once each, in rev order
(PROTOCOL.md 1.2, "Changes are replicated exactly once"): two real deployments."""

from __future__ import annotations

import asyncio
import time

import pytest
from asgiref.sync import sync_to_async

from . import truth
from .test_commands import socket

pytestmark = [pytest.mark.e2e]


async def until(check, timeout: float = 30, what: str = "the replica") -> None:
    deadline = time.monotonic() + timeout
    while not await sync_to_async(check)():
        assert time.monotonic() < deadline, f"{what}: not within {timeout} s"
        await asyncio.sleep(0.1)


def same_rooms(pair, slug: str):
    """The home's room and its replica hold the same messages: seq, id, body, version, rev."""
    home = [row[:5] for row in truth.messages(pair.a.database_url, slug)]
    replica = [row[:5] for row in truth.messages(pair.b.database_url, f"{slug}@a")]
    return home == replica and truth.room(pair.a.database_url, slug) == truth.room(pair.b.database_url, f"{slug}@a")


async def test_posts_edits_deletes_reactions_and_watermarks_reach_the_replica_and_its_sockets(start_pair):
    pair = await sync_to_async(start_pair)()
    ana, bo = await socket(pair.a.url, "ana"), await socket(pair.b.url, "bo")
    try:
        await ana.join("lobby")
        await bo.join("lobby@a")
        posted = await ana.call("room.post", {"room": "lobby", "body": "one"})
        seq = posted["d"]["seq"]
        [msg] = await bo.frames("msg", 1)
        assert msg["d"]["room"] == "lobby@a" and msg["d"]["seq"] == seq and msg["d"]["body"] == "one"
        assert msg["d"]["sender"]["node"] == "a" and msg["d"]["sender"]["name"] == "ana"
        assert (await ana.call("message.edit", {"room": "lobby", "seq": seq, "body": "one, edited"}))["ok"]
        [edit] = await bo.frames("msg.edit", 1)
        assert edit["d"]["room"] == "lobby@a" and edit["d"]["body"] == "one, edited" and edit["d"]["version"] == 2
        reacted = await bo.call("reaction.add", {"room": "lobby@a", "seq": seq})
        assert reacted["ok"] and reacted["d"]["count"] == 1, reacted
        [reaction] = await bo.frames("reaction", 1)
        assert reaction["d"]["room"] == "lobby@a" and reaction["d"]["count"] == 1
        receipt = await bo.call("receipt", {"room": "lobby@a", "delivered": seq, "read": seq})
        assert receipt["ok"] and receipt["d"] == {"room": "lobby@a", "delivered": seq, "read": seq}, receipt
        # ana's message is read by its one recipient: ana hears it at home.
        states = await ana.frames("state", 2)
        assert [s["d"]["state"] for s in states] == ["delivered", "read"]
        second = await bo.call("room.post", {"room": "lobby@a", "body": "two"})
        await ana.call("receipt", {"room": "lobby", "read": second["d"]["seq"]})
        # bo's message read by ana: bo's socket on b is told, through the replica.
        b_states = await bo.frames("state", 2)
        assert {(s["d"]["room"], s["d"]["seq"], s["d"]["state"]) for s in b_states} == {
            ("lobby@a", second["d"]["seq"], "delivered"),
            ("lobby@a", second["d"]["seq"], "read"),
        }
        assert (await ana.call("message.delete", {"room": "lobby", "seq": seq}))["ok"]
        [delete] = await bo.frames("msg.delete", 1)
        assert delete["d"]["room"] == "lobby@a" and delete["d"]["seq"] == seq
        await until(lambda: same_rooms(pair, "lobby"))
        # A join and a history page on b answer from what b applied.
        again = await socket(pair.b.url, "cy")
        try:
            joined = await again.join("lobby@a", since=0)
            assert (
                joined["d"]["last_seq"] == 2 and joined["d"]["last_rev"] == truth.room(pair.a.database_url, "lobby")[1]
            )
            backlog = await again.frames("msg", 2)
            assert [(m["d"]["seq"], m["d"]["body"], m["d"].get("deleted")) for m in backlog] == [
                (1, "", True),
                (2, "two", None),
            ]
            page = await again.call("room.history", {"room": "lobby@a", "before": 3})
            assert [m["body"] for m in page["d"]["messages"]] == ["", "two"]
        finally:
            await again.close()
    finally:
        await ana.close()
        await bo.close()
    # Deleted means gone on the replica too.
    assert (
        await sync_to_async(truth.scalar)(
            pair.b.database_url, "SELECT count(*) FROM messaging_message WHERE body LIKE 'one%%'"
        )
        == 0
    )


async def test_replies_and_emoji_reactions_reach_the_replica_and_its_sockets(start_pair):
    pair = await sync_to_async(start_pair)()
    ana, bo = await socket(pair.a.url, "ana"), await socket(pair.b.url, "bo")
    try:
        await ana.join("lobby")
        await bo.join("lobby@a")
        root = (await ana.call("room.post", {"room": "lobby", "body": "root"}))["d"]["seq"]
        # A reply and an emoji from the replica's side are carried home, and come back replicated.
        reply = await bo.call("room.post", {"room": "lobby@a", "body": "re", "reply_to": root})
        assert reply["ok"], reply
        [thread] = await bo.frames("thread", 1)
        assert thread["d"]["room"] == "lobby@a" and thread["d"]["seq"] == root and thread["d"]["replies"] == 1
        [home_thread] = await ana.frames("thread", 1)
        assert home_thread["d"]["rev"] == thread["d"]["rev"]
        reacted = await bo.call("reaction.set", {"room": "lobby@a", "seq": root, "emoji": "👍", "on": True})
        assert reacted["ok"] and reacted["d"]["count"] == 1, reacted
        [reactions] = await bo.frames("reactions", 1)
        assert reactions["d"]["room"] == "lobby@a" and reactions["d"]["emoji"] == "👍"
        await until(lambda: same_rooms(pair, "lobby"))
        # The thread change came with its own rev, the one after its reply's, and took it on the replica too.
        revs = "SELECT t.rev - m.posted_rev FROM messaging_thread t JOIN messaging_message m ON m.reply_to = %s"
        for url in (pair.a.database_url, pair.b.database_url):
            assert await sync_to_async(truth.scalar)(url, revs, root) == 1
        # The replica answers room.thread and history from what it applied.
        page = await bo.call("room.thread", {"room": "lobby@a", "seq": root})
        assert page["ok"] and [m["body"] for m in page["d"]["replies"]] == ["re"], page
        assert page["d"]["root"]["replies"] == 1 and page["d"]["root"]["reactions"] == {"👍": 1}
        bad = await bo.call("room.post", {"room": "lobby@a", "body": "x", "reply_to": reply["d"]["seq"]})
        assert not bad["ok"] and bad["error"]["code"] == "invalid", bad
    finally:
        await ana.close()
        await bo.close()
