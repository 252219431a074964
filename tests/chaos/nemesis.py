"""The nemesis: faults at random, overlapping times, from a seed.

The whole schedule is drawn from the seed before the run starts: each fault's
time, kind and parameters. Kinds come in shuffled rounds (every kind once
per round, in a random order), so even a short run meets each of them; the
gaps between faults are exponential, and each fault lasts as its parameters
say, so faults overlap at random. Two faults on one resource (a server,
Redis, a locked row, a client) wait for each other; faults on different
resources run at once. Every fault is logged in the history with its real
start and end. A failing run replays from its seed: the same faults at the
same times, the same clients' actions (the interleavings are the machine's).
"""

from __future__ import annotations

import asyncio
import random
import signal
from dataclasses import dataclass
from typing import Any, Protocol

import psycopg
import redis

from ..support.servers import Daphne, RedisServer
from .history import History
from .hooks import FAIL_COMMITS, STOP_FAILING_COMMITS, WALLETS

KINDS = (
    "kill-server",  # SIGKILL a daphne, start it again (same port) after a while
    "stop-server",  # SIGSTOP a daphne, SIGCONT after a while (often past CLAIM_LEASE, at times past the clients' patience)
    "kill-redis",  # kill redis-server, start it again empty after a while
    "flush-redis",  # FLUSHALL
    "pause-redis",  # CLIENT PAUSE, all commands or writes
    "terminate-backends",  # pg_terminate_backend of every backend of the run's database
    "lock-row",  # hold a lock from another session (a statement slowed), maybe terminate its waiters
    "cut-sockets",  # clients' sockets cut, some half-way through writing a command's frame
    "restart-clients",  # clients killed and started again from their outbox files
    "fail-commits",  # the next few wallet.add transactions fail at COMMIT
)


@dataclass(frozen=True)
class Planned:
    at: float
    kind: str
    params: dict


def schedule(
    seed: int,
    seconds: float,
    *,
    servers: int,
    clients: int,
    rooms: list[str],
    mean_gap: float = 3.0,
    kinds: tuple[str, ...] = KINDS,
) -> list[Planned]:
    """The run's faults, from 2 s after the start to 5 s before its end."""
    rng = random.Random(f"nemesis-{seed}")
    planned: list[Planned] = []
    bag: list[str] = []
    at = 2.0
    while True:
        at += rng.expovariate(1 / mean_gap)
        if at > seconds - 5:
            return planned
        if not bag:
            bag = list(kinds)
            rng.shuffle(bag)
        kind = bag.pop()
        planned.append(Planned(round(at, 3), kind, params(rng, kind, servers=servers, clients=clients, rooms=rooms)))


def params(rng: random.Random, kind: str, *, servers: int, clients: int, rooms: list[str]) -> dict:
    some = lambda: sorted(rng.sample(range(clients), rng.randint(1, min(3, clients))))  # noqa: E731
    if kind == "kill-server":
        return {"server": rng.randrange(servers), "down": round(rng.uniform(0.3, 4), 2)}
    if kind == "stop-server":
        return {"server": rng.randrange(servers), "stopped": round(rng.uniform(0.3, 8), 2)}
    if kind == "kill-redis":
        return {"down": round(rng.uniform(0.3, 4), 2)}
    if kind == "pause-redis":
        return {"ms": rng.randint(200, 3000), "mode": rng.choice(["ALL", "WRITE"])}
    if kind == "lock-row":
        target = rng.choice([["room", rng.choice(rooms)], ["wallet", rng.choice(WALLETS)], ["records"]])
        return {"target": target, "hold": round(rng.uniform(0.3, 3), 2), "terminate_waiters": rng.random() < 0.5}
    if kind == "cut-sockets":
        return {"clients": some(), "mid_frame": rng.random() < 0.7}
    if kind == "restart-clients":
        return {"clients": some()}
    if kind == "fail-commits":
        return {"n": rng.randint(1, 5)}
    return {}


class Target(Protocol):
    """What the nemesis strikes: the harness's parts."""

    servers: list[Daphne]
    redis: RedisServer
    database_url: str

    def cut(self, client: int, mid_frame: bool) -> None: ...

    async def restart_client(self, client: int) -> None: ...


LOCKS = {
    "room": "SELECT id FROM messaging_room WHERE slug = %s FOR UPDATE",
    "wallet": "SELECT name FROM chaos_wallet WHERE name = %s FOR UPDATE",
    # Every exactly-once command writes a record: a table lock slows them all.
    "records": "LOCK TABLE messaging_commandrecord IN SHARE MODE",
}
TERMINATE = (
    "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity"
    " WHERE datname = current_database() AND pid <> pg_backend_pid()"
)


class Nemesis:
    def __init__(self, planned: list[Planned], target: Target, history: History) -> None:
        self.planned = planned
        self.target = target
        self.history = history
        self.resources: dict[str, asyncio.Lock] = {}
        self.running: set[asyncio.Task] = set()
        self.stopped = asyncio.Event()

    def stop(self) -> None:
        """Start no more faults (those running finish and heal)."""
        self.stopped.set()

    async def run(self) -> None:
        """Strike as planned until the plan ends or `stop`, then wait for every fault to heal."""
        for event in self.planned:
            delay = event.at - self.history.now()
            if delay > 0:
                try:
                    await asyncio.wait_for(self.stopped.wait(), delay)
                except TimeoutError:
                    pass
            if self.stopped.is_set():
                break
            task = asyncio.create_task(self.strike(event))
            self.running.add(task)
            task.add_done_callback(self.running.discard)
        await asyncio.gather(*self.running)
        await self.heal()

    def claims(self, event: Planned) -> list[str]:
        p = event.params
        if event.kind in ("kill-server", "stop-server"):
            return [f"server {p['server']}"]
        if event.kind in ("kill-redis", "flush-redis", "pause-redis"):
            return ["redis"]
        if event.kind == "lock-row":
            return ["lock " + " ".join(p["target"])]
        if event.kind in ("cut-sockets", "restart-clients"):
            return [f"client {c}" for c in p["clients"]]
        return []

    async def strike(self, event: Planned) -> None:
        locks = [self.resources.setdefault(name, asyncio.Lock()) for name in sorted(self.claims(event))]
        for lock in locks:
            await lock.acquire()
        fault = self.history.fault_started(event.kind, dict(event.params))
        try:
            result = await getattr(self, event.kind.replace("-", "_"))(**event.params)
            if result is not None:
                fault.params["result"] = result
        finally:
            self.history.fault_ended(fault)
            for lock in locks:
                lock.release()

    # -- the faults ---------------------------------------------------------------------

    async def kill_server(self, server: int, down: float) -> None:
        daphne = self.target.servers[server]
        daphne.kill()
        await asyncio.sleep(down)
        await asyncio.to_thread(daphne.start)

    async def stop_server(self, server: int, stopped: float) -> None:
        daphne = self.target.servers[server]
        daphne.signal(signal.SIGSTOP)
        try:
            await asyncio.sleep(stopped)
        finally:
            daphne.signal(signal.SIGCONT)

    async def kill_redis(self, down: float) -> None:
        self.target.redis.stop()
        await asyncio.sleep(down)
        await asyncio.to_thread(self.target.redis.start)  # empty: it keeps nothing on disk

    def redis_client(self) -> redis.Redis:
        return redis.Redis(port=self.target.redis.port, socket_timeout=2)

    async def flush_redis(self) -> None:
        with self.redis_client() as client:
            await asyncio.to_thread(client.flushall)

    async def pause_redis(self, ms: int, mode: str) -> None:
        with self.redis_client() as client:
            await asyncio.to_thread(client.execute_command, "CLIENT", "PAUSE", ms, mode)
        await asyncio.sleep(ms / 1000)

    async def database(self) -> psycopg.AsyncConnection:
        from .stack import connect_params

        return await psycopg.AsyncConnection.connect(**connect_params(self.target.database_url), autocommit=True)

    async def terminate_backends(self) -> int:
        async with await self.database() as db:
            return (await (await db.execute(TERMINATE)).fetchone())[0]

    async def lock_row(self, target: list[str], hold: float, terminate_waiters: bool) -> int | None:
        kind, *args = target
        try:
            async with await self.database() as db, db.transaction():
                await db.execute(LOCKS[kind], args)
                await asyncio.sleep(hold)
                if terminate_waiters:
                    rows = await db.execute(TERMINATE + " AND wait_event_type = 'Lock'")
                    return (await rows.fetchone())[0]
        except psycopg.OperationalError:
            return None  # this session was terminated too (terminate-backends meanwhile)
        return None

    async def cut_sockets(self, clients: list[int], mid_frame: bool) -> None:
        for client in clients:
            self.target.cut(client, mid_frame)

    async def restart_clients(self, clients: list[int]) -> None:
        for client in clients:
            await self.target.restart_client(client)

    async def fail_commits(self, n: int) -> None:
        async with await self.database() as db:
            await db.execute(FAIL_COMMITS, {"n": n})

    async def heal(self) -> None:
        """Everything back up for the clients to finish: servers running, Redis up, commits allowed."""
        for daphne in self.target.servers:
            if daphne.process is None:
                await asyncio.to_thread(daphne.start)
            else:
                daphne.signal(signal.SIGCONT)
        if self.target.redis.process is None:
            await asyncio.to_thread(self.target.redis.start)
        async with await self.database() as db:
            await db.execute(STOP_FAILING_COMMITS)


def describe(planned: list[Planned]) -> dict[str, Any]:
    counts: dict[str, int] = {}
    for event in planned:
        counts[event.kind] = counts.get(event.kind, 0) + 1
    return counts
