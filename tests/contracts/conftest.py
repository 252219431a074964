"""The contract suites' services: Redis (the tests' `REDIS_URL`), a Redis Cluster and a nats-server of their own.

Each suite builds its backend the way the app does, by the dotted path of
its setting (messaging/backends.py), so the path and `from_settings` are
part of what it checks.
"""

from __future__ import annotations

import os

import pytest
import redis

from messaging.core.claims import reset_claim_store

from ..support.cluster import RedisCluster
from ..support.nats import NatsServer
from ..support.servers import free_port


@pytest.fixture(scope="session")
def redis_cluster(tmp_path_factory):
    cluster = RedisCluster(tmp_path_factory.mktemp("cluster")).start()
    yield cluster
    cluster.stop()


@pytest.fixture(scope="session")
def nats_server(tmp_path_factory):
    server = NatsServer(tmp_path_factory.mktemp("nats")).start()
    yield server
    server.stop()


@pytest.fixture
def redis_url():
    url = os.environ["REDIS_URL"]
    client = redis.Redis.from_url(url)
    client.flushdb()
    reset_claim_store()
    yield url
    client.flushdb()
    client.close()
    reset_claim_store()


@pytest.fixture
def nowhere() -> int:
    """A port nothing listens on: a service that is down."""
    return free_port()


def using(settings, **options) -> None:
    """`MESSAGING` with `options` for this test (the settings' cache is cleared by Django's signal)."""
    settings.MESSAGING = {**settings.MESSAGING, **options}
