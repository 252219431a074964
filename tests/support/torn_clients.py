"""Tear a Redis client's connections from under its commands, the way a
failover does, and count how each command ended.

A cluster pipeline that fails closes every connection of its client (the
other coroutines' too) before it retries, and a node that goes away takes
its connections with it. A command caught between its connection's
handshake and its write then finds the connection's writer gone, and
redis-py raises `AttributeError` from inside itself (the failure CI met in
a failover: messaging/core/redis_clients.py).
"""

from __future__ import annotations

import asyncio
import random
from collections import Counter
from collections.abc import Awaitable, Callable
from typing import Any

from messaging.core.redis_clients import REDIS_FAILED

# Commands in flight in each round, and how long after their start their connections go.
IN_FLIGHT = 64
LATEST_CUT = 0.05


async def tear(client: Any, cut: Callable[[], Awaitable[Any]], rounds: int, *, until_leaked: bool = False) -> Counter:
    """`rounds` rounds of `IN_FLIGHT` pipelines on `client`, each round's
    connections cut by `cut()` mid-flight. Counts "ok", "redis" (failed with
    a Redis error) and "leaked" (failed with anything else); with
    `until_leaked`, stops after the first round that leaked."""
    outcomes: Counter = Counter()

    async def one(n: int) -> None:
        pipe = client.pipeline(transaction=False)
        for k in range(4):
            pipe.zcount(f"messaging:test:torn:{n}:{k}", 0, "+inf")
        try:
            await pipe.execute()
            outcomes["ok"] += 1
        except REDIS_FAILED:
            outcomes["redis"] += 1
        except Exception:
            outcomes["leaked"] += 1

    for _ in range(rounds):
        commands = [asyncio.create_task(one(n)) for n in range(IN_FLIGHT)]
        await asyncio.sleep(random.random() * LATEST_CUT)
        await cut()
        await asyncio.gather(*commands)
        if until_leaked and outcomes["leaked"]:
            break
    return outcomes
