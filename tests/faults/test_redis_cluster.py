"""Two daphne processes on a real Redis Cluster, and a master killed mid-burst:
commands keep exactly-once through the database path while the cluster fails
over, and live frames resume on the replica that took over."""

from __future__ import annotations

import asyncio

import pytest
from asgiref.sync import sync_to_async
from redis.asyncio.cluster import RedisCluster as AsyncClusterClient
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.cluster import RedisCluster as ClusterClient

from messaging.core.redis_clients import Cluster
from messaging.testing import SocketClient
from messaging_client import sign_in

from ..support.cluster import RedisCluster
from ..support.torn_clients import tear
from .conftest import FAULT_SETTINGS, sign_in_many
from .outbox import settle, verify
from .test_resubscribe import post_until_heard, then_every_post_arrives_once_in_order

pytestmark = [pytest.mark.e2e]

ROOMS = ["alpha", "beta"]


@pytest.fixture
def redis_cluster(tmp_path):
    cluster = RedisCluster(tmp_path / "cluster").start()
    yield cluster
    cluster.stop()


@pytest.fixture
def on_cluster(start_daphne, redis_cluster):
    def start(count: int = 2):
        return [
            start_daphne(REDIS_URL=redis_cluster.url, MESSAGING_REDIS_CLUSTER="1", **FAULT_SETTINGS)
            for _ in range(count)
        ]

    return start


async def burst(fleet, count: int, label: str) -> None:
    await asyncio.gather(*(o.post_many(count, label) for o in fleet))


async def test_a_master_killed_mid_burst_loses_nothing_and_doubles_nothing(on_cluster, redis_cluster, outboxes):
    servers = on_cluster(2)
    urls = [server.url for server in servers]
    sessions = await sign_in_many(urls[0], 4)
    fleet = [
        await outboxes(session, urls, ROOMS[n % 2], first=tab) for n, session in enumerate(sessions) for tab in range(2)
    ]
    await burst(fleet, 5, "before")
    await settle(fleet)
    client = ClusterClient.from_url(redis_cluster.url)
    claims = list(client.scan_iter(match="messaging:cmd:*", target_nodes=ClusterClient.PRIMARIES))
    assert len({redis_cluster.master_of(key.decode()).port for key in claims}) >= 2, "claims live on several masters"
    client.close()

    # The master of room alpha's channel (and of some users' claims) dies
    # while a burst is in flight; the sockets drop too, so the retries come
    # while the cluster fails over.
    doomed = redis_cluster.master_of("messaging:0:live:alpha")
    sending = asyncio.create_task(burst(fleet, 20, "during"))
    for _ in range(6000):  # until some of it is acked: the rest is in flight
        if sum(len(o.acks) for o in fleet) >= 60:
            break
        await asyncio.sleep(0.005)
    failing_over = asyncio.create_task(
        sync_to_async(redis_cluster.fail_over, thread_sensitive=False)("messaging:0:live:alpha")
    )
    for outbox in fleet:
        outbox.drop()
    await burst(fleet, 5, "failing-over")
    await sending
    killed = await failing_over
    assert killed.port == doomed.port
    await burst(fleet, 5, "after")
    await settle(fleet)
    report = await sync_to_async(verify)(fleet)
    print(report)
    assert report["commands"] == len(fleet) * 35


async def test_live_frames_cross_processes_and_resume_after_a_failover(on_cluster, redis_cluster):
    a, b = on_cluster(2)
    ana = await SocketClient(a.url, await sync_to_async(sign_in)(a.url, "ana")).connect()
    bob = await SocketClient(b.url, await sync_to_async(sign_in)(b.url, "bob")).connect()
    try:
        for ws in (ana, bob):
            assert (await ws.call("room.join", {"room": "alpha"}))["ok"]
        await post_until_heard(ana, bob, "alpha", attempts=1)
        await post_until_heard(bob, ana, "alpha", attempts=1)
        await sync_to_async(redis_cluster.fail_over, thread_sensitive=False)("messaging:0:live:alpha")
        # Both processes find the replica that took over the channel's slot.
        await post_until_heard(ana, bob, "alpha")
        await post_until_heard(bob, ana, "alpha")
        # Once both ways are heard, both processes publish to and listen on the
        # new master: from there on, no live frame is lost.
        await then_every_post_arrives_once_in_order(ana, bob, "alpha")
        # The duplicate of a command acked before the failover is still refused a second effect.
        first = await ana.call("room.post", {"room": "alpha", "body": "once"}, id="after-failover")
        again = await ana.call("room.post", {"room": "alpha", "body": "once"}, id="after-failover")
        assert first["ok"] and again["ok"] and again["dup"] and again["d"] == first["d"], (first, again)
    finally:
        await ana.close()
        await bob.close()


async def test_a_cluster_client_torn_by_its_own_failures_fails_only_with_redis_errors(redis_cluster):
    """A failing cluster pipeline closes every connection of its client, the
    other coroutines' too (`aclose`, then it retries): what the failover
    above did to a join's presence read. redis-py's own cluster client leaks
    that as AttributeError (the first half shows the cut reproduces it); the
    app's does not."""

    def client_of(cls):
        return cls.from_url(redis_cluster.url, socket_timeout=1, socket_connect_timeout=1, retry=Retry(NoBackoff(), 1))

    theirs, ours = client_of(AsyncClusterClient), client_of(Cluster)
    try:
        leaked = await tear(theirs, theirs.aclose, 100, until_leaked=True)
        assert leaked["leaked"], leaked
        outcomes = await tear(ours, ours.aclose, 40)
        assert outcomes["leaked"] == 0, outcomes
        assert await ours.ping()
    finally:
        await theirs.aclose()
        await ours.aclose()


async def test_the_handshake_window_and_health_use_the_cluster(start_daphne, redis_cluster):
    from ..e2e.test_address_limits import NO_ROLLOVER, handshake

    env = {
        "REDIS_URL": redis_cluster.url,
        "MESSAGING_REDIS_CLUSTER": "1",
        "CONNECT_RATE": "5",
        "MESSAGING_CONNECT_RATE_WINDOW": NO_ROLLOVER,
    }
    a, b = start_daphne(**env), start_daphne(**env)
    statuses = await asyncio.gather(*(handshake(server.url) for server in [a, b] * 4))
    assert sorted(statuses) == [101] * 5 + [403] * 3, "one window over both processes, counted in the cluster"
    status, _, body = a.request("GET", "/healthz")
    assert status == 200 and b'"redis": "ok"' in body.replace(b'":"', b'": "'), body


async def test_a_heartbeat_on_a_cluster_renews_every_user_without_a_script(redis_cluster, settings):
    from messaging.transport.presence import Presence

    settings.MESSAGING = {**settings.MESSAGING, "REDIS_CLUSTER": True, "REDIS_URL": redis_cluster.url}
    presence = Presence(redis_cluster.url, timeout=2, ttl=30, beat=10, rooms=10)

    async def no_rooms(user_id, online, at) -> None:
        pass

    presence.send_presence = no_rooms
    for user in range(50):
        await presence.opened(user)
    presence.beating.cancel()
    check = ClusterClient.from_url(redis_cluster.url)
    for user in range(50):
        check.zadd(presence.user_set(str(user)), {presence.process: 0})
    await presence.heartbeat()
    assert presence.renew is False, "a cluster's users lie on many nodes: no script"
    assert all(check.zscore(presence.user_set(str(user)), presence.process) > 0 for user in range(50))
    presence.close()
