"""One runtime per event loop (messaging/core/runtime.py): made on first use, closed with its loop."""

from __future__ import annotations

import asyncio
import os

import pytest

from messaging.core.runtime import close_runtime, runtime
from messaging.transport.fanout import get_hub

pytestmark = [pytest.mark.django_db(transaction=True)]


async def use_everything() -> dict:
    """What a loop's commands use: a statement on the loop's connection, a Redis client, the hub, a part."""
    rt = runtime()
    assert await rt.gateway.fetch("SELECT 1", {}) == [(1,)]
    client = rt.redis_client(os.environ["REDIS_URL"], 1.0)
    assert await client.ping()
    closed: list = []
    rt.part("probe", object, close=closed.append)
    assert get_hub() is get_hub() and runtime() is rt, "one of each per loop"
    return {"runtime": rt, "connections": set(rt.gateway.loop_connections.open), "client": client, "closed": closed}


def test_a_loop_that_closes_closes_its_runtime_with_its_connections_clients_and_parts():
    used = asyncio.run(use_everything())
    rt = used["runtime"]
    assert used["connections"] and all(conn.closed for conn in used["connections"]), "the loop's database connections"
    assert rt.redis == {} and rt.parts == {}, "its Redis clients and parts (the hub) are let go"
    assert len(used["closed"]) == 1, "each part's close hook ran once"
    assert rt.gateway.loop_connections.open == set()


async def test_closing_the_runtime_early_closes_it_and_the_next_use_makes_a_new_one():
    used = await use_everything()
    await close_runtime()
    assert len(used["closed"]) == 1 and all(conn.closed for conn in used["connections"])
    assert runtime() is not used["runtime"]
    await close_runtime()


def test_each_loop_has_a_runtime_of_its_own():
    first = asyncio.run(use_everything())["runtime"]
    second = asyncio.run(use_everything())["runtime"]
    assert first is not second
