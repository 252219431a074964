"""Threads and emoji reactions (PROTOCOL.md 1.2) across two daphne processes sharing PostgreSQL and Redis:
a reply or a reaction sent to both at once takes effect once, every copy gets the original ack, and every
member's socket, on either process, hears the `thread` and `reactions` frames."""

from __future__ import annotations

import asyncio
import uuid

import pytest
from asgiref.sync import sync_to_async

from messaging.chat.models import Reaction, ReactionTally, Thread
from messaging.models import Message, Room
from messaging.testing import SocketClient
from messaging_client import sign_in

pytestmark = [pytest.mark.e2e]


async def frames_of(ws: SocketClient, kind: str, count: int) -> list[dict]:
    found = [f for f in ws.inbox if f.get("t") == kind]
    ws.inbox = [f for f in ws.inbox if f.get("t") != kind]
    while len(found) < count:
        frame = await ws.receive(timeout=15)
        if frame.get("t") == kind:
            found.append(frame)
    return found


async def once_on_both(sockets: list[SocketClient], t: str, d: dict) -> dict:
    """`t` sent with one id on every socket at once: one applies it, every copy gets its ack."""
    id = uuid.uuid4().hex
    await asyncio.gather(*(ws.send(t, d, id=id) for ws in sockets))
    acks = await asyncio.gather(*(ws.ack(id) for ws in sockets))
    assert all(ack["ok"] for ack in acks), acks
    assert sorted(ack["dup"] for ack in acks) == [False] + [True] * (len(sockets) - 1)
    assert len({str(ack["d"]) for ack in acks}) == 1
    return acks[0]["d"]


@pytest.fixture
async def two_processes(start_daphne):
    a, b = start_daphne(), start_daphne()
    session = await sync_to_async(sign_in)(a.url, "ana")
    sockets = [await SocketClient(server.url, session).connect() for server in (a, b, a, b)]
    watcher = await SocketClient(b.url, await sync_to_async(sign_in)(b.url, "bob")).connect()
    for ws in (*sockets, watcher):
        assert (await ws.call("room.join", {"room": "lobby"}))["ok"]
    yield sockets, watcher
    for ws in (*sockets, watcher):
        await ws.close()


async def test_a_reply_sent_to_two_processes_at_once_is_one_reply_and_one_count(two_processes):
    sockets, watcher = two_processes
    root = (await sockets[0].call("room.post", {"room": "lobby", "body": "root"}))["d"]["seq"]
    ack = await once_on_both(sockets, "room.post", {"room": "lobby", "body": "re", "reply_to": root})
    [msg] = (await frames_of(watcher, "msg", 2))[1:]
    [thread] = await frames_of(watcher, "thread", 1)
    assert msg["d"]["reply_to"] == root and msg["d"]["seq"] == ack["seq"]
    assert thread["d"] == {
        "room": "lobby", "seq": root, "replies": 1, "last_reply_at": msg["d"]["at"], "rev": msg["d"]["rev"] + 1,
    }  # fmt: skip
    assert await sync_to_async(lambda: list(Thread.objects.values_list("replies", flat=True)))() == [1]
    assert await sync_to_async(Message.objects.filter(reply_to=root).count)() == 1
    # A reply to the reply is refused, on either process, and changes nothing.
    last = await sync_to_async(lambda: Room.objects.get(slug="lobby").last_rev)()
    for ws in sockets[:2]:
        refused = await ws.call("room.post", {"room": "lobby", "body": "no", "reply_to": ack["seq"]})
        assert not refused["ok"] and refused["error"]["code"] == "invalid", refused
    assert await sync_to_async(lambda: Room.objects.get(slug="lobby").last_rev)() == last
    page = await watcher.call("room.thread", {"room": "lobby", "seq": root})
    assert page["ok"] and page["d"]["root"]["replies"] == 1 and [m["body"] for m in page["d"]["replies"]] == ["re"]


async def test_replies_racing_on_two_processes_keep_revs_gapless_each_thread_at_its_own(two_processes):
    sockets, watcher = two_processes
    root = (await sockets[0].call("room.post", {"room": "lobby", "body": "root"}))["d"]["seq"]
    before = await sync_to_async(lambda: Room.objects.get(slug="lobby").last_rev)()
    # Each socket (two on each process) sends replies and plain posts without waiting, all at once.

    async def post_all(n: int, ws: SocketClient) -> list[dict]:
        ids = [
            await ws.send("room.post", {"room": "lobby", "body": f"{n}.{k}", **({"reply_to": root} if k % 3 else {})})
            for k in range(6)
        ]
        return [await ws.ack(id) for id in ids]

    acks = [ack for sent in await asyncio.gather(*map(post_all, range(4), sockets)) for ack in sent]
    assert len(acks) == 24 and all(ack["ok"] for ack in acks), acks
    replies = 16
    frames = [f for f in watcher.inbox if f.get("t") in ("msg", "thread")]
    while len(frames) < 1 + len(acks) + replies:
        frame = await watcher.receive(timeout=15)
        if frame.get("t") in ("msg", "thread"):
            frames.append(frame)
    msgs = [f for f in frames if f["t"] == "msg"][1:]
    threads = [f for f in frames if f["t"] == "thread"]
    assert len(msgs) == len(acks) and len(threads) == replies
    room = await sync_to_async(lambda: Room.objects.get(slug="lobby"))()
    revs = sorted(f["d"]["rev"] for f in [*msgs, *threads])
    assert revs == list(range(before + 1, room.last_rev + 1))
    # Each thread change right after its reply's post, and the counts in rev order.
    reply_revs = {m["d"]["rev"] for m in msgs if m["d"].get("reply_to") == root}
    assert {t["d"]["rev"] - 1 for t in threads} == reply_revs and len(reply_revs) == replies
    in_order = sorted(threads, key=lambda t: t["d"]["rev"])
    assert [t["d"]["replies"] for t in in_order] == list(range(1, replies + 1))
    stored = await sync_to_async(lambda: Thread.objects.values_list("replies", "rev").get())()
    assert stored == (replies, in_order[-1]["d"]["rev"])


async def test_a_reaction_sent_to_two_processes_at_once_counts_once(two_processes):
    sockets, watcher = two_processes
    seq = (await sockets[0].call("room.post", {"room": "lobby", "body": "hello"}))["d"]["seq"]
    d = {"room": "lobby", "seq": seq, "emoji": "🎉", "on": True}
    assert await once_on_both(sockets, "reaction.set", d) == {**d, "count": 1}
    [frame] = await frames_of(watcher, "reactions", 1)
    assert frame["d"]["count"] == 1 and frame["d"]["emoji"] == "🎉"
    # bob's own, then a join's backlog shows both counts and his own.
    bobs = await watcher.call("reaction.set", {**d, "emoji": "👍"})
    assert bobs["ok"] and bobs["d"]["count"] == 1
    joined = await SocketClient(watcher.base_url, watcher.session).connect()
    try:
        assert (await joined.call("room.join", {"room": "lobby"}))["ok"]
        [backlog] = await frames_of(joined, "msg", 1)
        assert backlog["d"]["reactions"] == {"🎉": 1, "👍": 1} and backlog["d"]["mine"] == ["👍"]
    finally:
        await joined.close()
    off = await once_on_both(sockets, "reaction.set", {**d, "on": False})
    assert off["count"] == 0
    assert await sync_to_async(Reaction.objects.count)() == 1
    assert await sync_to_async(lambda: dict(ReactionTally.objects.values_list("emoji", "count")))() == {
        "🎉": 0,
        "👍": 1,
    }


async def test_first_reactions_of_many_users_at_once_on_two_processes_all_count(start_daphne):
    a, b = start_daphne(), start_daphne()
    sessions = [await sync_to_async(sign_in)(a.url, f"user{n}") for n in range(6)]
    sockets = [await SocketClient((a, b)[n % 2].url, session).connect() for n, session in enumerate(sessions)]
    try:
        for ws in sockets:
            assert (await ws.call("room.join", {"room": "lobby"}))["ok"]
        seq = (await sockets[0].call("room.post", {"room": "lobby", "body": "vote"}))["d"]["seq"]
        d = {"room": "lobby", "seq": seq, "emoji": "✅", "on": True}
        acks = await asyncio.gather(*(ws.call("reaction.set", d) for ws in sockets))
        assert sorted(ack["d"]["count"] for ack in acks) == [1, 2, 3, 4, 5, 6], acks
        frames = await frames_of(sockets[1], "reactions", 6)
        assert sorted(f["d"]["count"] for f in frames) == [1, 2, 3, 4, 5, 6]
        assert len({f["d"]["rev"] for f in frames}) == 6
    finally:
        for ws in sockets:
            await ws.close()
    assert await sync_to_async(lambda: list(ReactionTally.objects.values_list("count", flat=True)))() == [6]
