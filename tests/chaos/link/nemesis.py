"""The link's nemesis: faults on the two proxies between the deployments, at seeded times.

Each fault strikes one direction of the link (`a`: requests to `a`, from
`b`; `b`: the other way) for a while: a window in which each request is
dropped, delayed, cut after it applied or reset with the fault's
probability, or a time in which connections are refused. Kinds come in
shuffled rounds, so a short run meets each; gaps are exponential and faults
on the two directions overlap at random.
"""

from __future__ import annotations

import asyncio
import random
from dataclasses import dataclass

from ...support.faultproxy import FaultProxy
from .clients import History

KINDS = ("drop", "delay", "cut", "reset", "refuse")


@dataclass(frozen=True)
class Planned:
    at: float
    kind: str
    side: str
    seconds: float
    probability: float


def schedule(seed: int, seconds: float, mean_gap: float = 2.0) -> list[Planned]:
    """The faults of a run, from 2 s after the start to 5 s before its end."""
    rng = random.Random(f"link-nemesis-{seed}")
    planned: list[Planned] = []
    bag: list[str] = []
    at = 2.0
    while True:
        at += rng.expovariate(1 / mean_gap)
        if at > seconds - 5:
            return planned
        if not bag:
            bag = list(KINDS)
            rng.shuffle(bag)
        kind = bag.pop()
        planned.append(
            Planned(
                round(at, 3),
                kind,
                rng.choice("ab"),
                round(rng.uniform(0.5, 6.0), 2),
                round(rng.uniform(0.2, 0.9), 2),
            )
        )


class LinkNemesis:
    def __init__(self, planned: list[Planned], proxies: dict[str, FaultProxy], history: History) -> None:
        self.planned = planned
        self.proxies = proxies
        self.history = history
        self.locks = {side: asyncio.Lock() for side in proxies}

    async def run(self, began: float) -> None:
        loop = asyncio.get_running_loop()
        running = []
        for event in self.planned:
            delay = began + event.at - loop.time()
            if delay > 0:
                await asyncio.sleep(delay)
            running.append(asyncio.create_task(self.strike(event)))
        await asyncio.gather(*running)
        for proxy in self.proxies.values():
            await asyncio.to_thread(proxy.heal)

    async def strike(self, event: Planned) -> None:
        proxy = self.proxies[event.side]
        async with self.locks[event.side]:
            self.history.counts[f"fault {event.kind}"] += 1
            self.history.faults.append(
                f"{event.at:8.3f} {event.kind} {event.side} {event.seconds} s p={event.probability}"
            )
            if event.kind == "refuse":
                await asyncio.to_thread(proxy.refuse, event.seconds)
                await asyncio.sleep(event.seconds)
            else:
                proxy.plan = {event.kind: event.probability}
                await asyncio.sleep(event.seconds)
            await asyncio.to_thread(proxy.heal)
