"""The app's Redis clients fail only with Redis errors (messaging/core/redis_clients.py),
on a real Redis whose connections are cut from under commands in flight."""

from __future__ import annotations

import os

import redis.asyncio as aioredis

from messaging.core.redis_clients import Client, Cluster
from messaging.core.runtime import async_client
from messaging.transport.subscriptions import Subscriptions

from ..support.torn_clients import tear

# Each round takes about 30 ms; redis-py's own client leaked in most runs of 40 rounds.
ROUNDS = 200


def client_of(cls):
    return cls.from_url(os.environ["REDIS_URL"], socket_timeout=1, socket_connect_timeout=1)


async def test_redis_pys_own_client_leaks_a_torn_connection_as_attribute_error():
    """The failure the app's clients translate: without it, the test below could not fail."""
    client = client_of(aioredis.Redis)
    try:
        outcomes = await tear(client, client.connection_pool.disconnect, ROUNDS, until_leaked=True)
    finally:
        await client.aclose()
    assert outcomes["leaked"], outcomes


async def test_the_apps_client_fails_a_torn_connection_as_a_redis_error():
    client = client_of(Client)
    try:
        outcomes = await tear(client, client.connection_pool.disconnect, ROUNDS)
    finally:
        await client.aclose()
    assert outcomes["leaked"] == 0 and outcomes["redis"], outcomes
    assert await client.ping(), "the client works again once the cut is over"


def test_every_async_client_of_the_app_is_one_of_its_clients(settings):
    url = os.environ["REDIS_URL"]
    assert type(async_client(url, timeout=1, connect_timeout=1)) is Client
    subscriptions = Subscriptions(url, None, timeout=1, sharded=False)
    assert type(subscriptions.client_for(None)) is Client, "a listener's connection to the one Redis"
    assert type(subscriptions.client_for(("127.0.0.1", 7000))) is Client, "and to a cluster's master"
    settings.MESSAGING = {**settings.MESSAGING, "REDIS_CLUSTER": True}
    assert type(async_client("redis://127.0.0.1:7000/0", timeout=1, connect_timeout=1)) is Cluster
