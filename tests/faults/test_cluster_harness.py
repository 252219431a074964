"""The suite's Redis Cluster (tests/support/cluster.py) is a real one: slots spread over
masters, sharded Pub/Sub, and a replica that takes over a killed master's slots."""

from __future__ import annotations

import pytest
from redis.cluster import RedisCluster as ClusterClient

from ..support.cluster import RedisCluster


@pytest.fixture
def cluster(tmp_path):
    cluster = RedisCluster(tmp_path).start()
    yield cluster
    cluster.stop()


def test_a_killed_master_is_replaced_and_its_slots_keep_serving(cluster):
    client = ClusterClient.from_url(cluster.url)
    for n in range(60):
        client.set(f"key:{n}", n)
    owners = {cluster.master_of(f"key:{n}").port for n in range(60)}
    assert len(owners) == 3  # the keys really are spread over the masters
    doomed = cluster.master_of("key:1")
    on_doomed = [n for n in range(60) if cluster.master_of(f"key:{n}").port == doomed.port]
    assert doomed.client().execute_command("WAIT", 1, 5000) == 1  # its replica has them
    killed = cluster.fail_over("key:1")
    survivor = ClusterClient.from_url(f"redis://127.0.0.1:{cluster.live()[0].port}/0")
    assert cluster.master_of("key:1").port != killed.port
    survivor.set("key:1", "after the failover")
    assert survivor.get("key:1") == b"after the failover"
    # Replicated before the kill: what the old master held is there.
    assert [int(survivor.get(f"key:{n}")) for n in on_doomed if n != 1] == [n for n in on_doomed if n != 1]
    assert isinstance(survivor.execute_command("SPUBLISH", "room", "hello"), int)
