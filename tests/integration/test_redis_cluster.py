"""Exactly-once and fan-out on a real Redis Cluster (three masters with a replica
each, tests/support/cluster.py), with `MESSAGING['REDIS_CLUSTER']`: claims and
results in slots per user, a batch's scripts run per slot, live frames over
sharded Pub/Sub."""

from __future__ import annotations

import asyncio

import pytest
from channels.db import database_sync_to_async
from redis.cluster import RedisCluster as ClusterClient

from messaging.core.claims import claim_key, reset_claim_store
from messaging.core.pipeline import run_batch
from messaging.transport.fanout import get_hub

from ..support.cluster import RedisCluster
from .conftest import apply_command, post_delivery, rows

pytestmark = [pytest.mark.django_db(transaction=True)]


@pytest.fixture(scope="module")
def redis_cluster(tmp_path_factory):
    cluster = RedisCluster(tmp_path_factory.mktemp("cluster")).start()
    yield cluster
    cluster.stop()


@pytest.fixture
def on_cluster(settings, redis_cluster):
    """The app pointed at the cluster; every master emptied afterwards."""
    settings.MESSAGING = {**settings.MESSAGING, "REDIS_URL": redis_cluster.url, "REDIS_CLUSTER": True}
    reset_claim_store()
    client = ClusterClient.from_url(redis_cluster.url)
    yield client
    client.flushall(target_nodes=ClusterClient.PRIMARIES)
    client.close()
    reset_claim_store()


async def test_duplicates_are_answered_from_the_clusters_window(on_cluster, make_user, open_clients):
    client = await open_clients(await make_user())
    await client.join("lobby")
    acks = [await client.call("room.post", {"room": "lobby", "body": "hello"}, id="post-1") for _ in range(3)]
    assert [(a["ok"], a["dup"]) for a in acks] == [(True, False), (True, True), (True, True)]
    assert acks[0]["d"] == acks[1]["d"] == acks[2]["d"]
    assert on_cluster.get(claim_key(client.user.pk, "post-1")).startswith(b"r:"), "the result is kept in the cluster"
    assert len(await rows()) == 1
    [msg] = await client.frames("msg", 1)
    assert msg["d"]["id"] == "post-1"
    assert await client.nothing_more()


async def test_a_batch_of_many_users_is_claimed_slot_by_slot_and_applied_once(on_cluster, redis_cluster, make_user):
    users = [await make_user() for _ in range(12)]
    for user in users:
        await database_sync_to_async(apply_command)(user, "room.join", {"room": "lobby"})
    deliveries = [post_delivery(user, "lobby", f"from {n}", id=f"cmd-{n}") for n, user in enumerate(users)]
    masters = {redis_cluster.master_of(d.key).port for d in deliveries}
    assert len(masters) >= 2, "the batch spans several masters"
    first = await run_batch(deliveries)
    assert [o.dup for o in first] == [False] * 12
    again = await run_batch([post_delivery(u, "lobby", f"from {n}", id=f"cmd-{n}") for n, u in enumerate(users)])
    assert [(o.dup, o.source) for o in again] == [(True, "redis")] * 12
    assert [o.data for o in again] == [o.data for o in first]
    assert sorted(r["seq"] for r in await rows()) == list(range(1, 13))


async def test_one_users_commands_share_a_slot(on_cluster):
    assert len({on_cluster.keyslot(claim_key(7, f"cmd-{n}")) for n in range(50)}) == 1
    assert len({on_cluster.keyslot(claim_key(user, "cmd")) for user in range(50)}) > 1


async def test_concurrent_duplicates_on_several_sockets_apply_once(on_cluster, make_user, open_clients):
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


async def test_rooms_fan_out_over_sharded_pubsub_one_subscription_per_room(
    on_cluster, redis_cluster, make_user, open_clients
):
    rooms = [f"room-{n}" for n in range(6)]
    hub = get_hub()
    assert len({redis_cluster.master_of(hub.channel(room).decode()).port for room in rooms}) >= 2
    clients = [await open_clients(await make_user()) for _ in range(3)]
    for client in clients:
        for room in rooms:
            await client.join(room)
    for room in rooms:
        channel = hub.channel(room)
        master = redis_cluster.master_of(channel.decode()).client()
        assert master.execute_command("PUBSUB", "SHARDNUMSUB", channel) == [channel, 1], "one per process"
        assert master.execute_command("PUBSUB", "NUMSUB", channel) == [channel, 0], "sharded, not global"
    for n, room in enumerate(rooms):
        assert (await clients[n % 3].call("room.post", {"room": room, "body": f"to {room}"}))["ok"]
    for client in clients:
        frames = await client.frames("msg", len(rooms))
        assert sorted(f["d"]["room"] for f in frames) == rooms
        assert await client.nothing_more()
