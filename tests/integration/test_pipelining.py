"""A socket's frames sent ahead without waiting for acks: answered in order, posts applied together.

The consumer queues a socket's frames and answers them in the order received;
consecutive posts go to the database in one batch, in order. These tests send
frames back to back, as a client with several commands in flight does, and
check what the client sees (the order of answers, seqs in send order) and
what the database holds.
"""

from __future__ import annotations

import asyncio
import json

import pytest

from messaging.core.apply import Batch
from messaging.transport.fanout import get_hub

from .conftest import rows

pytestmark = [pytest.mark.django_db(transaction=True)]


async def answers(client, count: int) -> list[dict]:
    """The next `count` answers (acks and errors), in the order they came; broadcasts are kept aside."""
    found = []
    while len(found) < count:
        frame = await client.receive()
        (found if frame["t"] in ("ack", "error") else client.inbox).append(frame)
    return found


@pytest.fixture
def held_first_batch(monkeypatch):
    """Record the size of each batch that goes to the database; hold the first
    until `release()`, so the frames behind it queue."""
    sizes: list[int] = []
    gate = asyncio.Event()
    apply = Batch.apply

    async def holding(batch, gateway):
        sizes.append(len(batch.deliveries))
        if len(sizes) == 1:
            await gate.wait()
        await apply(batch, gateway)

    monkeypatch.setattr(Batch, "apply", holding)
    return sizes, gate.set


async def test_posts_sent_ahead_run_in_one_batch_and_take_seqs_in_send_order(make_user, open_clients, held_first_batch):
    sizes, release = held_first_batch
    client = await open_clients(await make_user())
    await client.join("lobby")
    ids = [await client.send("room.post", {"room": "lobby", "body": "m0"})]
    # The first post's batch is held before it applies: every later frame queues behind it.
    for _ in range(100):
        if sizes:
            break
        await asyncio.sleep(0.01)
    ids += [await client.send("room.post", {"room": "lobby", "body": f"m{n}"}) for n in range(1, 12)]
    await asyncio.sleep(0.2)
    release()
    acks = await answers(client, len(ids))

    assert [a["id"] for a in acks] == ids, "acks in send order"
    assert [a["d"]["seq"] for a in acks] == list(range(1, 13)), "seqs in send order"
    assert sizes == [1, 11], f"the queued posts went as one batch: {sizes}"
    assert [r["body"] for r in await rows()] == [f"m{n}" for n in range(12)]


async def test_a_post_right_behind_its_join_runs_after_the_join(make_user, open_clients):
    client = await open_clients(await make_user())
    join = await client.send("room.join", {"room": "fresh"})
    posts = [await client.send("room.post", {"room": "fresh", "body": f"m{n}"}) for n in range(3)]
    assert (await client.ack(join))["ok"]
    acks = [await client.ack(id) for id in posts]
    assert all(a["ok"] for a in acks), acks
    assert [a["d"]["seq"] for a in acks] == [1, 2, 3]


async def test_refusals_and_bad_frames_are_answered_in_their_place(make_user, open_clients):
    client = await open_clients(await make_user())
    await client.join("lobby")
    first = await client.send("room.post", {"room": "lobby", "body": "one"})
    await client.send_raw("not json")
    second = await client.send("room.post", {"room": "lobby", "body": "two"})
    empty = await client.send("room.post", {"room": "lobby", "body": "  "})
    elsewhere = await client.send("room.post", {"room": "not-joined", "body": "no"})
    third = await client.send("room.post", {"room": "lobby", "body": "three"})

    answered = await answers(client, 6)
    assert [(a["t"], a.get("id")) for a in answered] == [
        ("ack", first),
        ("error", None),
        ("ack", second),
        ("ack", empty),
        ("ack", elsewhere),
        ("ack", third),
    ]
    assert answered[1]["error"]["code"] == "bad_frame"
    assert [a.get("error", {}).get("code") for a in answered[2:]] == [None, "invalid", "forbidden", None]
    assert [a["d"]["seq"] for a in (answered[0], answered[2], answered[5])] == [1, 2, 3]
    assert [r["body"] for r in await rows()] == ["one", "two", "three"]


async def test_one_id_twice_in_a_row_is_applied_once_and_acked_twice(make_user, open_clients, held_first_batch):
    sizes, release = held_first_batch
    client = await open_clients(await make_user())
    await client.join("lobby")
    await client.send("room.post", {"room": "lobby", "body": "before"})
    for _ in range(2):
        await client.send("room.post", {"room": "lobby", "body": "twice"}, id="same")
    await asyncio.sleep(0.2)
    release()
    answered = await answers(client, 3)

    assert [a["id"] for a in answered[1:]] == ["same", "same"]
    assert [a["dup"] for a in answered[1:]] == [False, True]
    assert answered[1]["d"] == answered[2]["d"]
    assert [r["body"] for r in await rows()] == ["before", "twice"]


async def test_a_post_then_the_same_id_with_another_body_is_refused_as_reused(make_user, open_clients):
    client = await open_clients(await make_user())
    await client.join("lobby")
    await client.send("room.post", {"room": "lobby", "body": "first"}, id="x1")
    await client.send("room.post", {"room": "lobby", "body": "changed"}, id="x1")
    answered = await answers(client, 2)
    assert answered[0]["ok"] and not answered[0]["dup"]
    assert answered[1]["error"]["code"] == "id_reused"
    assert [r["body"] for r in await rows()] == ["first"]


async def test_frames_behind_a_close_are_not_answered_or_applied(make_user, open_clients, settings):
    settings.MESSAGING = {**settings.MESSAGING, "MAX_FRAME_BYTES": 1000}
    client = await open_clients(await make_user())
    await client.join("lobby")
    before = await client.send("room.post", {"room": "lobby", "body": "before"})
    await client.send("room.post", {"room": "lobby", "body": "x" * 2000})
    await client.send("room.post", {"room": "lobby", "body": "after"})

    assert (await answers(client, 1))[0]["id"] == before
    output = await client.comm.receive_output()
    while output["type"] == "websocket.send":  # the post's own broadcast
        assert json.loads(output["text"])["t"] == "msg"
        output = await client.comm.receive_output()
    assert output == {"type": "websocket.close", "code": 1009}
    await asyncio.sleep(0.2)
    assert [r["body"] for r in await rows()] == ["before"]


async def test_a_socket_gone_mid_join_leaves_no_subscription_behind(make_user, open_clients, held_first_batch):
    sizes, release = held_first_batch
    client = await open_clients(await make_user())
    await client.join("lobby")
    await client.send("room.post", {"room": "lobby", "body": "held"})
    await client.send("room.join", {"room": "second"})
    await client.send("room.post", {"room": "second", "body": "never"})
    await asyncio.sleep(0.1)
    # The socket goes while its post is held; its disconnect waits for that
    # batch, and the join and the post behind it are dropped.
    closing = asyncio.ensure_future(client.close())
    await asyncio.sleep(0.1)
    release()
    await closing

    hub = get_hub()
    assert not any(client.comm.instance in members for members in hub.members.values()), hub.members
    assert [r["body"] for r in await rows()] == ["held"]


async def test_many_sockets_sending_ahead_each_keep_their_order(make_user, open_clients):
    senders = [await open_clients(await make_user()) for _ in range(4)]
    for client in senders:
        await client.join("crowd")
    sent = {}
    for n in range(10):
        for s, client in enumerate(senders):
            sent.setdefault(s, []).append(await client.send("room.post", {"room": "crowd", "body": f"{s}-{n}"}))
    for s, client in enumerate(senders):
        acks = [await client.ack(id) for id in sent[s]]
        seqs = [a["d"]["seq"] for a in acks]
        assert seqs == sorted(seqs), f"socket {s}'s posts out of send order: {seqs}"
    stored = await rows()
    assert sorted(r["seq"] for r in stored) == list(range(1, 41)), "40 posts, seqs 1..40 without gaps"
    for s in range(4):
        mine = [r["body"] for r in stored if r["body"].startswith(f"{s}-")]
        assert mine == [f"{s}-{n}" for n in range(10)]


async def test_a_failing_command_between_posts_fails_alone_in_its_place(make_user, open_clients, broken_type):
    client = await open_clients(await make_user())
    await client.join("lobby")
    sent = [
        await client.send("room.post", {"room": "lobby", "body": "one"}),
        await client.send(broken_type, {}),
        await client.send("room.post", {"room": "lobby", "body": "two"}),
    ]
    answered = await answers(client, 3)
    assert [a["id"] for a in answered] == sent
    assert [a["ok"] for a in answered] == [True, False, True]
    assert answered[1]["error"]["code"] == "unavailable" and answered[1]["error"]["retry"] is True
    assert [r["body"] for r in await rows()] == ["one", "two"]
