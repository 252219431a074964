"""One chaos run, from a fresh database to a verdict.

1. A fresh copy of the migrated database, an empty Redis, `servers` daphne
   processes of `tests.chaos.app` (DEBUG off, collected static files).
2. `clients` outbox clients, each a guest signed in through `/login/`, each
   in two of `rooms` shared rooms, all topping up the same wallets.
3. For `seconds`: the clients act (post, "+1", wallet top-ups, receipts,
   probes) while the nemesis strikes as the seed planned, a prober watches
   Redis's latency and the observer watches the database.
4. The nemesis heals everything; the clients stop acting and retry until
   their outboxes are empty (at most `drain` seconds), then catch up on
   every room.
5. The checker reads the database; the report has the counts, the faults
   and every violation, each with the history slice that shows it.

With `stop_on_violation` (the planted-bug proofs) the run ends at the first
violation, skipping 4: what is checked then is what holds mid-run.
"""

from __future__ import annotations

import asyncio
import json
import random
import resource
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import redis
import redis.asyncio as aioredis

from messaging_client import sign_in

from ..support.servers import Daphne
from . import checker, truth
from .client import Client, Plan
from .history import History
from .nemesis import KINDS, Nemesis, schedule
from .stack import Stack, connect


@dataclass
class Config:
    seconds: float = 300.0
    seed: int = 1
    clients: int = 30
    servers: int = 2
    rooms: int = 4
    plant: str | None = None
    stop_on_violation: bool = False
    drain: float = 90.0
    mean_gap: float = 3.0
    kinds: tuple[str, ...] = KINDS
    pause: float = 1.0  # mean seconds between a client's actions


@dataclass
class Report:
    config: dict
    verdict: str
    elapsed: float
    faults: dict[str, int]
    counts: dict[str, int]
    handshakes: dict[str, int]
    closes: dict[str, int]
    violations: list[dict] = field(default_factory=list)
    log_dir: str = ""
    # CPU seconds of the harness itself and of the servers it ran (daphne, redis-server).
    cpu: dict[str, float] = field(default_factory=dict)

    def summary(self) -> str:
        c = self.counts
        commands = sum(v for k, v in c.items() if k.startswith("command "))
        answers = sum(v for k, v in c.items() if k.startswith("answer "))
        lines = [
            f"chaos seed={self.config['seed']} seconds={self.config['seconds']} clients={self.config['clients']} "
            f"servers={self.config['servers']} plant={self.config['plant']}: {self.verdict} in {self.elapsed:.0f} s",
            f"  operations: {commands} commands ({self.by_prefix('command ')}), {c.get('receipts', 0)} receipts, "
            f"{c.get('joins', 0)} joins; {answers} answers ({self.by_prefix('answer ')})",
            f"  attempts: {self.by_prefix('attempt ')}; frames: {c.get('msg frames', 0)} msg, "
            f"{c.get('status frames', 0)} status, {c.get('reaction frames', 0)} reaction",
            f"  faults: {sum(self.faults.values())} ({', '.join(f'{k} {v}' for k, v in sorted(self.faults.items()))})",
            f"  handshakes: {self.handshakes}; closes: {self.closes}; sockets: {c.get('sockets', 0)}, "
            f"silences: {c.get('silences', 0)}, observer looks: {c.get('observer looks', 0)}, "
            f"client restarts: {c.get('client restarts', 0)}",
            f"  CPU seconds: harness {self.cpu.get('harness', 0):.0f}, servers {self.cpu.get('servers', 0):.0f}",
            f"  servers' logs: {self.log_dir}",
        ]
        for v in self.violations:
            lines += [f"VIOLATION {v['kind']} at {v['at']:.3f}: {v['message']}"] + [
                f"    {line}" for line in v["slice"]
            ]
        if self.violations:
            lines.append(
                f"  replay: make chaos CHAOS_SEED={self.config['seed']} CHAOS_SECONDS={self.config['seconds']:g}"
                f" CHAOS_CLIENTS={self.config['clients']}"
                + (f" CHAOS_PLANT={self.config['plant']}" if self.config["plant"] else "")
            )
        return "\n".join(lines)

    def by_prefix(self, prefix: str) -> str:
        return ", ".join(f"{k[len(prefix) :]} {v}" for k, v in sorted(self.counts.items()) if k.startswith(prefix))


class Run:
    """The parts of one run, as the nemesis strikes them (`nemesis.Target`)."""

    def __init__(self, config: Config, stack: Stack, directory: Path) -> None:
        self.config = config
        self.stack = stack
        self.directory = directory
        self.servers: list[Daphne] = []
        self.clients: list[Client] = []
        self.history: History | None = None
        self.restarts = 0
        self.acting = False

    @property
    def redis(self):
        return self.stack.redis

    @property
    def database_url(self) -> str:
        return self.stack.run_url

    def cut(self, client: int, mid_frame: bool) -> None:
        self.clients[client].cut(mid_frame)

    async def restart_client(self, index: int) -> None:
        old = self.clients[index]
        await old.kill()
        self.restarts += 1
        rng = random.Random(f"{self.config.seed}-client-{index}-restart-{self.restarts}")
        new = Client.restore(index, old.path, old.urls, self.history, rng, old.plan)
        new.acting = self.acting
        self.clients[index] = new.start()
        self.history.counts["client restarts"] += 1

    # -- the run ------------------------------------------------------------------------

    async def setup(self) -> None:
        config = self.config
        self.stack.fresh_database()
        with redis.Redis(port=self.stack.redis.port) as client:
            client.flushall()
        logs = self.directory / "logs"
        logs.mkdir(parents=True, exist_ok=True)
        self.servers = self.stack.servers(config.servers, config.plant, logs)
        await asyncio.gather(*(asyncio.to_thread(server.start) for server in self.servers))
        urls = [server.url for server in self.servers]
        names = [f"c{i:02d}" for i in range(config.clients)]
        with ThreadPoolExecutor(4) as pool:
            sessions = list(pool.map(lambda i: sign_in(urls[i % len(urls)], names[i]), range(config.clients)))
        rooms = [f"room-{k}" for k in range(config.rooms)]
        files = self.directory / "clients"
        files.mkdir(exist_ok=True)
        self.history = History(config.seed)
        plan = Plan(pause=config.pause)
        for i, (name, session) in enumerate(zip(names, sessions)):
            mine = [rooms[i % len(rooms)], rooms[(i + 1) % len(rooms)]] if len(rooms) > 1 else rooms
            rng = random.Random(f"{config.seed}-client-{i}")
            self.clients.append(
                Client.new(i, files / f"{name}.json", urls, self.history, rng, plan, name, session, mine)
            )
        for client in self.clients:
            client.start()
        await bounded(lambda: all(c.ready.is_set() for c in self.clients), 60, "every client joined")

    async def chaos(self) -> None:
        config, history = self.config, self.history
        planned = schedule(
            config.seed,
            config.seconds,
            servers=config.servers,
            clients=config.clients,
            rooms=[f"room-{k}" for k in range(config.rooms)],
            mean_gap=config.mean_gap,
            kinds=config.kinds,
        )
        began = history.now()
        planned = [type(p)(p.at + began, p.kind, p.params) for p in planned]
        nemesis = Nemesis(planned, self, history)
        stop = asyncio.Event()
        observer = checker.Observer(history, self.database_url)
        watchers = [
            asyncio.create_task(observer.run(stop)),
            asyncio.create_task(probe_redis(history, self.redis.port, stop)),
        ]
        self.acting = True
        for client in self.clients:
            client.acting = True
        striking = asyncio.create_task(nemesis.run())
        deadline = began + config.seconds
        while history.now() < deadline and not (config.stop_on_violation and history.violations):
            await asyncio.sleep(0.2)
        self.acting = False
        for client in self.clients:
            client.acting = False
        nemesis.stop()
        await striking
        if not (config.stop_on_violation and history.violations):
            await self.drain()
            await self.catch_up()
        stop.set()
        await asyncio.gather(*watchers)
        await observer.look()  # a last look, everything healed
        history.counts["observer looks"] = observer.looks

    async def drain(self) -> None:
        """Let every outbox empty itself (bounded): its retries go on until an ok ack."""
        try:
            await bounded(lambda: not any(c.pending for c in self.clients), self.config.drain, "every outbox empty")
        except TimeoutError:
            pass  # the checker reports what is left

    async def catch_up(self) -> None:
        """Every client learns each room's last seq and fetches what it misses, by `since`."""
        with connect(self.database_url) as db:
            last = dict(db.execute("SELECT slug, last_seq FROM messaging_room").fetchall())
        for client in self.clients:
            for room in client.rooms:
                client.known_last[room] = max(client.known_last[room], last.get(room, 0))
        try:
            await bounded(
                lambda: all(c.contiguous[r] >= c.known_last[r] for c in self.clients for r in c.rooms),
                60,
                "every client caught up",
            )
        except TimeoutError:
            pass

    async def finish(self) -> truth.Truth:
        for client in self.clients:
            await client.close()
        with connect(self.database_url) as db:
            found = truth.read(db)
        for server in self.servers:
            await asyncio.to_thread(server.stop)
        return found


def cpu_seconds(who: int) -> float:
    usage = resource.getrusage(who)
    return usage.ru_utime + usage.ru_stime


async def run(config: Config, stack: Stack, directory: Path) -> Report:
    started = time.monotonic()
    cpu = cpu_seconds(resource.RUSAGE_SELF), cpu_seconds(resource.RUSAGE_CHILDREN)
    run = Run(config, stack, directory)
    try:
        await run.setup()
        await run.chaos()
        found = await run.finish()
    finally:
        for client in run.clients:
            await client.kill()
        for server in run.servers:
            await asyncio.to_thread(server.stop)
    history = run.history
    if not (config.stop_on_violation and history.violations):
        checker.check(history, found, run.clients)
    violations = [
        {"kind": v.kind, "message": v.message, "at": v.at, "slice": history.slice(v)} for v in history.violations
    ]
    faults = {k[len("fault ") :]: v for k, v in history.counts.items() if k.startswith("fault ")}
    report = Report(
        config=asdict(config),
        verdict="VIOLATED" if violations else "passed",
        elapsed=time.monotonic() - started,
        faults=faults,
        counts=dict(history.counts),
        handshakes=dict(history.handshakes),
        closes=dict(history.closes),
        violations=violations,
        log_dir=str(directory / "logs"),
        cpu={
            "harness": cpu_seconds(resource.RUSAGE_SELF) - cpu[0],
            "servers": cpu_seconds(resource.RUSAGE_CHILDREN) - cpu[1],
        },
    )
    (directory / "report.json").write_text(json.dumps(asdict(report), indent=1, default=str))
    (directory / "faults.log").write_text("\n".join(f.describe() for f in history.faults) + "\n")
    return report


async def bounded(check: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what}: not within {timeout} s")
        await asyncio.sleep(0.1)


async def probe_redis(history: History, port: int, stop: asyncio.Event) -> None:
    """Ping the harness's Redis every 0.1 s; a slow or failed ping opens a window of Redis trouble."""
    client = aioredis.Redis(port=port, socket_timeout=0.3, socket_connect_timeout=0.3)
    trouble: float | None = None
    try:
        while not stop.is_set():
            began = history.now()
            try:
                await client.ping()
                fine = history.now() - began < 0.15
            except (OSError, redis.RedisError):
                fine = False
            if not fine and trouble is None:
                trouble = began
            elif fine and trouble is not None:
                history.redis_slow(trouble - 0.2, history.now())
                trouble = None
            await asyncio.sleep(0.1)
    finally:
        if trouble is not None:
            history.redis_slow(trouble - 0.2, history.now())
        await client.aclose()
