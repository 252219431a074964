"""One link run, from fresh deployments to a verdict.

1. Deployments `a` and `b` (tests/support/deployments.py), each with its
   own room and a shared one: `hall` on `a`, `yard` on `b`.
2. `clients` outbox clients on each side, each in its side's own room and
   in both shared rooms.
3. For `seconds`: the clients act while the nemesis strikes the link.
4. The link heals; the outboxes drain; the clients stop; then, with no
   client action, the replicas must converge on their homes (`converge`
   seconds at most: how long they took is the run's catch-up time).
5. The checker reads both databases.
"""

from __future__ import annotations

import asyncio
import json
import random
import statistics
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from messaging_client import sign_in

from ...support.deployments import Pair
from .checker import Checker, read
from .clients import History, LinkClient
from .nemesis import LinkNemesis, schedule


@dataclass
class Config:
    seconds: float = 60.0
    seed: int = 1
    clients: int = 3  # per side
    servers: int = 1  # per side
    drain: float = 90.0
    converge: float = 90.0
    mean_gap: float = 2.0


@dataclass
class Report:
    config: dict
    verdict: str
    elapsed: float
    counts: dict[str, int]
    proxy: dict[str, dict[str, int]]
    doubles: int
    losses: int
    converged_in: float | None
    latencies: dict[str, dict[str, float]]
    violations: list[str] = field(default_factory=list)
    faults: list[str] = field(default_factory=list)

    def summary(self) -> str:
        c = self.counts
        commands = sum(v for k, v in c.items() if k.startswith("command "))
        strikes = {k[len("fault ") :]: v for k, v in c.items() if k.startswith("fault ")}
        per_request = {side: {k: v for k, v in counts.items() if k != "pass"} for side, counts in self.proxy.items()}
        lines = [
            f"link chaos seed={self.config['seed']} seconds={self.config['seconds']:g} "
            f"clients={self.config['clients']}x2: {self.verdict} in {self.elapsed:.0f} s",
            f"  commands: {commands} ({', '.join(f'{k[8:]} {v}' for k, v in sorted(c.items()) if k.startswith('command '))}); "
            f"attempts {c.get('attempts', 0)}; answers: "
            + ", ".join(f"{k[7:]} {v}" for k, v in sorted(c.items()) if k.startswith("answer ")),
            f"  faults: {sum(strikes.values())} strikes ({', '.join(f'{k} {v}' for k, v in sorted(strikes.items()))}); "
            f"requests faulted on the link: {per_request}",
            f"  doubles: {self.doubles}, losses: {self.losses}, converged {self.converged_in} s after the link healed",
            "  acks (p50/p99 s): "
            + "; ".join(
                f"{k} {v['p50']:.3f}/{v['p99']:.3f} of {v['n']:.0f}" for k, v in sorted(self.latencies.items())
            ),
        ]
        lines += [f"VIOLATION {v}" for v in self.violations[:50]]
        if self.violations:
            lines.append(
                f"  replay: make chaos CHAOS_SEED={self.config['seed']} CHAOS_SECONDS={self.config['seconds']:g}"
            )
        return "\n".join(lines)


def percentiles(values: list[float]) -> dict[str, float]:
    if not values:
        return {"n": 0, "p50": 0.0, "p99": 0.0}
    ordered = sorted(values)
    return {
        "n": len(ordered),
        "p50": statistics.median(ordered),
        "p99": ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))],
    }


async def run(config: Config, pair: Pair, directory: Path) -> Report:
    """One run on `pair` (started, with its proxies between the deployments)."""
    started = time.monotonic()
    history = History()
    sides = {"a": pair.a, "b": pair.b}
    clients: list[LinkClient] = []
    names: dict[int, tuple[str, str]] = {}
    for n in range(2 * config.clients):
        node = "ab"[n % 2]
        name = f"{node}{n}"
        session = await asyncio.to_thread(sign_in, sides[node].url, name)
        rooms = [f"{node}-own", "hall" if node == "a" else "hall@a", "yard@b" if node == "a" else "yard"]
        names[n] = (node, name)
        clients.append(
            LinkClient(n, node, sides[node].url, session, rooms, random.Random(f"{config.seed}-{n}"), history)
        )
    acting = [asyncio.create_task(client.act()) for client in clients]
    nemesis = LinkNemesis(
        schedule(config.seed, config.seconds, config.mean_gap), {"a": pair.a.inbound, "b": pair.b.inbound}, history
    )
    began = asyncio.get_running_loop().time()
    striking = asyncio.create_task(nemesis.run(began))
    await asyncio.sleep(config.seconds)
    for client in clients:
        client.acting = False
    await striking  # every fault healed
    healed = time.monotonic()
    try:
        await asyncio.wait_for(asyncio.gather(*acting), config.drain)
    except TimeoutError:
        history.violate("the outboxes did not drain within the drain time")
    converged_in = await converge(pair, config.converge, healed)
    if converged_in is None:
        history.violate(f"the replicas did not converge within {config.converge} s of the link healing")
    await asyncio.sleep(2)  # the last frames reach the sockets
    for client in clients:
        await client.close()
    found = {node: await asyncio.to_thread(read, node, deployment.database_url) for node, deployment in sides.items()}
    checker = Checker(history, found, names)
    checker.check()
    report = Report(
        config=asdict(config),
        verdict="VIOLATED" if history.violations else "passed",
        elapsed=time.monotonic() - started,
        counts=dict(history.counts),
        proxy={side: dict(deployment.inbound.counts) for side, deployment in sides.items()},
        doubles=checker.doubles,
        losses=checker.losses,
        converged_in=converged_in,
        latencies={kind: percentiles(values) for kind, values in history.latencies.items()},
        violations=history.violations,
        faults=history.faults,
    )
    (directory / "link-report.json").write_text(json.dumps(asdict(report), indent=1, default=str))
    return report


def same(pair: Pair) -> bool:
    """Each shared room's replica holds what its home holds."""
    a, b = read("a", pair.a.database_url), read("b", pair.b.database_url)
    for home, other, slug in ((a, b, "hall"), (b, a, "yard")):
        if home.rooms.get(slug) != other.rooms.get(f"{slug}@{home.node}"):
            return False
        mine = {seq: (m[0], m[2], m[3], m[4]) for seq, m in home.messages.get(slug, {}).items()}
        theirs = {seq: (m[0], m[2], m[3], m[4]) for seq, m in other.messages.get(f"{slug}@{home.node}", {}).items()}
        if mine != theirs:
            return False
    return True


async def converge(pair: Pair, timeout: float, since: float) -> float | None:
    """Seconds from `since` until the replicas hold what their homes hold; None if not within `timeout`."""
    deadline = since + timeout
    while time.monotonic() < deadline:
        if await asyncio.to_thread(same, pair):
            return round(time.monotonic() - since, 2)
        await asyncio.sleep(0.2)
    return None
