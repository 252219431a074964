"""The claim store on a Redis Cluster: a batch's scripts run once per slot.

A Lua script may touch only keys of one slot. A claim's key carries its user
as the hash tag (`claim_key`), so one sender's commands are one slot; a batch
of several senders' commands is split by slot, each part is one call of the
same script on its slot's master, and the parts run at once. The answers are
put back in the batch's order.

A part whose master fails (a failover under way) is "unknown" like any Redis
failure: those commands take the database path, whose durable record refuses
a second effect, while the other slots' masters keep answering.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from .claims import RedisClaimStore, Stored
from .redis_clients import REDIS_FAILED
from .runtime import by_slot

log = logging.getLogger(__name__)


class ClusterClaimStore(RedisClaimStore):
    def _available(self) -> bool:
        # One master failing says nothing of the others: no store-wide breaker.
        # A failed call costs its own slot's commands one timeout.
        return True

    async def ready(self) -> bool:
        """Whether this loop's client knows the slots: calls that start at once
        on a client that does not yet each learn them, and trip over each other."""
        try:
            await self.client.initialize()
        except REDIS_FAILED as exc:
            log.warning("the cluster's slots could not be read, using the database path: %s", exc)
            return False
        return True

    async def claim_many(self, keys: list[str], owner: str) -> list[Stored | bool | None]:
        if not await self.ready():
            return [None] * len(keys)
        groups = list(by_slot(keys).values())
        parts = await asyncio.gather(
            *(super(ClusterClaimStore, self).claim_many([keys[i] for i in indexes], owner) for indexes in groups)
        )
        answers: list[Any] = [None] * len(keys)
        for indexes, part in zip(groups, parts):
            for i, answer in zip(indexes, part):
                answers[i] = answer
        return answers

    async def finish(self, results: list[tuple[str, Stored]], releases: list[str], owner: str) -> None:
        if not await self.ready():
            return  # an unreleased claim frees its id when its lease runs out
        await asyncio.gather(
            *(
                super(ClusterClaimStore, self).finish(slot_results, slot_releases, owner)
                for slot_results, slot_releases in split(results, releases)
            )
        )


def split(results: list[tuple[str, Stored]], releases: list[str]) -> list[tuple[list[Any], list[Any]]]:
    """`results` and `releases` as one pair of lists per slot."""
    keys = [key for key, _ in results] + releases
    parts = []
    for indexes in by_slot(keys).values():
        parts.append(
            (
                [results[i] for i in indexes if i < len(results)],
                [releases[i - len(results)] for i in indexes if i >= len(results)],
            )
        )
    return parts
