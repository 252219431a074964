"""The seven rules of PROTOCOL.md "Exactly-once effects", on real PostgreSQL and Redis."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import textwrap
import uuid

import orjson
import pytest
from channels.db import database_sync_to_async
from channels.layers import channel_layers
from django.db import connection

from messaging.core import handlers
from messaging.core.claims import claim_key, reset_claim_store
from messaging.core.records import in_record_order
from messaging.models import CommandRecord, Room

from .conftest import rows

pytestmark = [pytest.mark.django_db(transaction=True)]


async def test_duplicate_gets_original_ack(make_user, open_clients):
    client = await open_clients(await make_user())
    await client.join("lobby")
    acks = [await client.call("room.post", {"room": "lobby", "body": "hello"}, id="post-1") for _ in range(3)]
    assert [a["ok"] for a in acks] == [True, True, True]
    assert [a["dup"] for a in acks] == [False, True, True]
    assert acks[0]["d"] == acks[1]["d"] == acks[2]["d"]
    assert acks[0]["d"]["seq"] == 1 and acks[0]["d"]["room"] == "lobby" and acks[0]["d"]["at"].endswith("Z")
    assert len(await rows()) == 1
    # Only the first delivery was broadcast.
    msgs = await client.frames("msg", 1)
    assert msgs[0]["d"]["id"] == "post-1" and msgs[0]["d"]["body"] == "hello"
    assert await client.nothing_more()


async def test_concurrent_duplicates_on_several_sockets_apply_once(make_user, open_clients):
    user = await make_user()
    clients = [await open_clients(user) for _ in range(6)]
    for client in clients:
        await client.join("lobby")
    await asyncio.gather(*(c.send("room.post", {"room": "lobby", "body": "once"}, id="same") for c in clients))
    acks = await asyncio.gather(*(c.ack("same") for c in clients))
    assert all(a["ok"] for a in acks), acks
    assert sorted(a["dup"] for a in acks) == [False] + [True] * 5
    assert len({str(a["d"]) for a in acks}) == 1
    assert [r["seq"] for r in await rows()] == [1]


async def test_same_id_from_another_user_is_another_command(make_user, open_clients):
    ana, bob = await open_clients(await make_user("ana")), await open_clients(await make_user("bob"))
    await ana.join("lobby")
    await bob.join("lobby")
    a = await ana.call("room.post", {"room": "lobby", "body": "hi"}, id="shared-id")
    b = await bob.call("room.post", {"room": "lobby", "body": "hi"}, id="shared-id")
    assert a["ok"] and b["ok"] and not a["dup"] and not b["dup"]
    assert {a["d"]["seq"], b["d"]["seq"]} == {1, 2}
    assert len(await rows()) == 2


async def test_same_id_with_other_payload_is_id_reused(make_user, open_clients):
    client = await open_clients(await make_user())
    await client.join("lobby")
    await client.join("other")
    first = await client.call("room.post", {"room": "lobby", "body": "one"}, id="x1")
    assert first["ok"]
    for t, d in [
        ("room.post", {"room": "lobby", "body": "two"}),
        ("room.post", {"room": "other", "body": "one"}),
        ("room.post", {"room": "lobby", "body": "one", "extra": 1}),
    ]:
        ack = await client.call(t, d, id="x1")
        assert ack["ok"] is False and ack["error"]["code"] == "id_reused" and ack["error"]["retry"] is False
    # The original still answers with its ack.
    again = await client.call("room.post", {"room": "lobby", "body": "one"}, id="x1")
    assert again["d"] == first["d"] and again["dup"] is True
    assert len(await rows()) == 1


async def test_id_reused_is_found_in_the_database_too(make_user, open_clients, redis_client):
    client = await open_clients(await make_user())
    await client.join("lobby")
    assert (await client.call("room.post", {"room": "lobby", "body": "one"}, id="x2"))["ok"]
    redis_client.flushdb()
    ack = await client.call("room.post", {"room": "lobby", "body": "two"}, id="x2")
    assert ack["error"]["code"] == "id_reused"
    assert len(await rows()) == 1
    assert await database_sync_to_async(lambda: Room.objects.get(slug="lobby").last_seq)() == 1


async def test_refusals_are_not_remembered(make_user, open_clients):
    client = await open_clients(await make_user())
    invalid = await client.call("room.post", {"room": "lobby", "body": "   "}, id="r1")
    assert invalid["error"] == {"code": "invalid", "message": "body is empty", "retry": False}
    forbidden = await client.call("room.post", {"room": "lobby", "body": "hi"}, id="r1")
    assert forbidden["error"]["code"] == "forbidden" and forbidden["error"]["retry"] is False
    unknown = await client.call("room.unknown", {"room": "lobby"}, id="r1")
    assert unknown["error"]["code"] == "unknown_type"
    await client.join("lobby")
    ok = await client.call("room.post", {"room": "lobby", "body": "hi"}, id="r1")
    assert ok["ok"] and ok["dup"] is False and ok["d"]["seq"] == 1
    assert await database_sync_to_async(CommandRecord.objects.count)() == 1


@pytest.fixture
def failing_once():
    """A command type whose handler fails on its first call, then stores a message."""
    calls = {"n": 0}
    post = handlers.lookup("room.post")

    def apply(ctx, data):
        calls["n"] += 1
        result = post.apply(ctx, data)  # the effect happens, then the failure rolls it back
        if calls["n"] == 1:
            raise RuntimeError("boom")
        return result

    handlers.register(handlers.Handler(type="test.flaky-post", apply=apply, validate=post.validate))
    yield calls
    handlers._registry.pop("test.flaky-post")


async def test_handler_failure_releases_the_claim_and_the_retry_applies_once(
    make_user, open_clients, failing_once, redis_client
):
    client = await open_clients(await make_user())
    await client.join("lobby")
    first = await client.call("test.flaky-post", {"room": "lobby", "body": "hi"}, id="f1")
    assert first["ok"] is False and first["error"]["code"] == "unavailable" and first["error"]["retry"] is True
    assert redis_client.get(claim_key(client.user.pk, "f1")) is None, "the claim was released"
    assert await rows() == []
    retry = await client.call("test.flaky-post", {"room": "lobby", "body": "hi"}, id="f1")
    assert retry["ok"] and retry["dup"] is False and retry["d"]["seq"] == 1, "the failed attempt's seq was rolled back"
    again = await client.call("test.flaky-post", {"room": "lobby", "body": "hi"}, id="f1")
    assert again["dup"] and again["d"] == retry["d"]
    assert [r["seq"] for r in await rows()] == [1]
    assert failing_once["n"] == 2


async def test_duplicate_after_redis_flush_gets_original_ack_from_database(make_user, open_clients, redis_client):
    client = await open_clients(await make_user())
    await client.join("lobby")
    first = await client.call("room.post", {"room": "lobby", "body": "hi"}, id="p1")
    redis_client.flushdb()  # not FLUSHALL: other checkouts may share this server
    again = await client.call("room.post", {"room": "lobby", "body": "hi"}, id="p1")
    assert again["ok"] and again["dup"] is True and again["d"] == first["d"]
    assert len(await rows()) == 1
    # The answer was written back to the fast window.
    assert redis_client.get(claim_key(client.user.pk, "p1")).startswith(b"r:")
    nxt = await client.call("room.post", {"room": "lobby", "body": "next"})
    assert nxt["d"]["seq"] == 2, "the rolled-back duplicate did not use up a seq"


@pytest.mark.parametrize(
    "t, d",
    [
        ("room.post", {"room": "lobby", "body": "hi"}),
        ("message.delete", {"room": "lobby", "seq": 1}),
        ("reaction.set", {"room": "lobby", "seq": 1, "emoji": "👍", "on": True}),
    ],
)
async def test_a_duplicate_answered_by_the_record_is_the_original_ack_to_the_key(
    make_user, open_clients, redis_client, t, d
):
    # PostgreSQL's jsonb keeps a record's keys in an order of its own; the copy
    # it answers must still read as the original, key for key.
    client = await open_clients(await make_user())
    await client.join("lobby")
    if t != "room.post":
        assert (await client.call("room.post", {"room": "lobby", "body": "a message"}))["ok"]
    first = await client.call(t, d, id="k1")
    redis_client.flushdb()
    again = await client.call(t, d, id="k1")
    assert first["ok"] and again["dup"] is True
    assert list(again["d"].items()) == list(first["d"].items())
    assert await database_sync_to_async(CommandRecord.objects.filter(command_id="k1").count)() == 1


async def test_duplicate_after_the_window_gets_original_ack(make_user, open_clients, redis_client, settings):
    settings.MESSAGING = {**settings.MESSAGING, "DEDUP_WINDOW": 1}
    reset_claim_store()
    client = await open_clients(await make_user())
    await client.join("lobby")
    first = await client.call("room.post", {"room": "lobby", "body": "hi"}, id="w1")
    assert 0 < redis_client.ttl(claim_key(client.user.pk, "w1")) <= 1
    await asyncio.sleep(1.2)
    assert redis_client.get(claim_key(client.user.pk, "w1")) is None
    again = await client.call("room.post", {"room": "lobby", "body": "hi"}, id="w1")
    assert again["dup"] and again["d"] == first["d"]
    assert len(await rows()) == 1


async def test_posts_stay_exactly_once_with_redis_stopped(make_user, open_clients, own_redis, settings):
    settings.MESSAGING = {**settings.MESSAGING, "REDIS_URL": own_redis.url}
    settings.CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "channels_redis.core.RedisChannelLayer",
            "CONFIG": {"hosts": [{"address": own_redis.url, "socket_timeout": None}]},
        }
    }
    channel_layers.backends.clear()
    reset_claim_store()
    user = await make_user()
    a, b = await open_clients(user), await open_clients(user)
    await a.join("lobby")
    await b.join("lobby")
    before = await a.call("room.post", {"room": "lobby", "body": "before"}, id="s0")
    assert before["ok"]

    own_redis.stop()
    # A fresh post, duplicated concurrently from two sockets, and a retry of the old one.
    await asyncio.gather(
        a.send("room.post", {"room": "lobby", "body": "during"}, id="s1"),
        b.send("room.post", {"room": "lobby", "body": "during"}, id="s1"),
    )
    s1a, s1b = await a.ack("s1", timeout=20), await b.ack("s1", timeout=20)
    assert s1a["ok"] and s1b["ok"] and s1a["d"] == s1b["d"]
    assert sorted([s1a["dup"], s1b["dup"]]) == [False, True]
    old = await a.call("room.post", {"room": "lobby", "body": "before"}, id="s0")
    assert old["ok"] and old["dup"] and old["d"] == before["d"]
    reused = await a.call("room.post", {"room": "lobby", "body": "other"}, id="s0")
    assert reused["error"]["code"] == "id_reused"
    assert [(r["seq"], r["client_msg_id"]) for r in await rows()] == [(1, "s0"), (2, "s1")]

    own_redis.start()  # empty: it keeps nothing on disk
    await asyncio.sleep(1.1)  # past the claim store's breaker
    again = await b.call("room.post", {"room": "lobby", "body": "during"}, id="s1")
    assert again["dup"] and again["d"] == s1a["d"]
    assert len(await rows()) == 2


@pytest.mark.parametrize("early", [False, True], ids=["statement after the claims", "statement beside the claims"])
async def test_claim_of_a_killed_worker_stops_blocking_after_the_lease(
    make_user, open_clients, settings, redis_client, early
):
    """A dead worker's claim blocks its id for at most `CLAIM_LEASE`. With the
    posts' statement beside the claims it does not block a post at all: the
    statement finds no record and applies it, once."""
    settings.MESSAGING = {**settings.MESSAGING, "CLAIM_LEASE": 2, "IN_PROGRESS_WAIT": 0.3, "EARLY_STATEMENT": early}
    reset_claim_store()
    client = await open_clients(await make_user())
    await client.join("lobby")
    # A separate worker process takes the claim with the configured lease, then is killed with SIGKILL.
    worker = textwrap.dedent(
        f"""
        import os, signal, django
        os.environ.setdefault("DJANGO_SETTINGS_MODULE", "project.settings")
        django.setup()
        import asyncio
        from messaging.core.claims import RedisClaimStore, claim_key
        store = RedisClaimStore({settings.REDIS_URL!r}, lease=2, window=3600)
        assert asyncio.run(store.claim_many([claim_key({client.user.pk}, "k1")], "dead-worker")) == [True]
        os.kill(os.getpid(), signal.SIGKILL)
        """
    )
    proc = subprocess.run([sys.executable, "-c", worker], capture_output=True)
    assert proc.returncode == -9, proc.stderr
    assert redis_client.get(claim_key(client.user.pk, "k1")) == b"c:dead-worker"

    if early:
        applied = await client.call("room.post", {"room": "lobby", "body": "hi"}, id="k1")
        assert applied["ok"] and applied["dup"] is False and applied["d"]["seq"] == 1
        again = await client.call("room.post", {"room": "lobby", "body": "hi"}, id="k1")
        assert again["ok"] and again["dup"] is True and again["d"] == applied["d"]
        return
    busy = await client.call("room.post", {"room": "lobby", "body": "hi"}, id="k1")
    assert busy["ok"] is False and busy["error"] == {
        "code": "in_progress",
        "message": "the first attempt with this id is still running",
        "retry": True,
    }
    await asyncio.sleep(2.1)
    ok = await client.call("room.post", {"room": "lobby", "body": "hi"}, id="k1")
    assert ok["ok"] and ok["dup"] is False and ok["d"]["seq"] == 1


@pytest.fixture
def slow_post():
    """room.post that takes a while, so duplicates find it in progress."""
    post = handlers.lookup("room.post")
    gate = {"delay": 0.6}

    def apply(ctx, data):
        import time

        time.sleep(gate["delay"])
        return post.apply(ctx, data)

    handlers.register(handlers.Handler(type="test.slow-post", apply=apply, validate=post.validate))
    yield gate
    handlers._registry.pop("test.slow-post")


async def test_duplicate_waits_for_the_running_attempt(make_user, open_clients, slow_post, settings):
    # Two sockets in one process share one database thread, so the duplicate
    # is claimed while the first attempt holds the claim, then polls.
    user = await make_user()
    a, b = await open_clients(user), await open_clients(user)
    await a.join("lobby")
    await b.join("lobby")
    await a.send("test.slow-post", {"room": "lobby", "body": "slow"}, id="w1")
    await asyncio.sleep(0.1)
    await b.send("test.slow-post", {"room": "lobby", "body": "slow"}, id="w1")
    first, second = await a.ack("w1"), await b.ack("w1")
    assert first["ok"] and second["ok"] and first["dup"] is False and second["dup"] is True
    assert first["d"] == second["d"]


async def test_duplicate_gets_in_progress_when_the_wait_runs_out(
    make_user, open_clients, slow_post, settings, redis_client
):
    settings.MESSAGING = {**settings.MESSAGING, "IN_PROGRESS_WAIT": 0.0}
    slow_post["delay"] = 0.5
    user = await make_user()
    a = await open_clients(user)
    await a.join("lobby")
    # Simulate a first attempt running elsewhere by holding its claim.
    redis_client.set(claim_key(user.pk, "w2"), b"c:elsewhere", px=5000)
    ack = await a.call("test.slow-post", {"room": "lobby", "body": "slow"}, id="w2")
    assert ack["error"]["code"] == "in_progress" and ack["error"]["retry"] is True
    assert await rows() == []


async def test_seqs_are_gapless_under_concurrency(make_user, open_clients, failing_once):
    users = [await make_user() for _ in range(3)]
    clients = [await open_clients(u) for u in users for _ in range(2)]
    for client in clients:
        await client.join("busy")

    async def burst(client, n):
        ids = []
        for i in range(n):
            id = uuid.uuid4().hex
            ids.append(id)
            await client.send("room.post", {"room": "busy", "body": f"m{i}"}, id=id)
            await client.send("room.post", {"room": "busy", "body": f"m{i}"}, id=id)  # an immediate retry
        acks = [await client.ack(id) for id in ids for _ in range(2)]
        return acks

    results = await asyncio.gather(*(burst(c, 15) for c in clients))
    acks = [a for r in results for a in r]
    assert all(a["ok"] for a in acks)
    seqs = sorted(a["d"]["seq"] for a in acks if not a["dup"])
    assert seqs == list(range(1, len(clients) * 15 + 1))
    stored = await rows(room__slug="busy")
    assert [r["seq"] for r in stored] == seqs
    assert await database_sync_to_async(lambda: Room.objects.get(slug="busy").last_seq)() == len(seqs)


def test_a_result_in_record_order_is_as_postgresql_keeps_it():
    result = {
        "room": "lobby",
        "seq": 3,
        "at": "2026-01-01T00:00:00Z",
        "deleted_at": None,
        "with": {"name": "Ana", "id": 7, "online": True, "ö": 1, "zz": 2, "ab": [{"y": 1, "x": 2}]},
        "version": 2,
        "ab": 0,
    }
    with connection.cursor() as cursor:
        cursor.execute("SELECT %s::jsonb::text", [orjson.dumps(result).decode()])
        [(kept,)] = cursor.fetchall()
    assert orjson.dumps(in_record_order(result)) == orjson.dumps(orjson.loads(kept))
    assert orjson.dumps(result) != orjson.dumps(orjson.loads(kept)), "the example must need the order"
