"""The sockets curve (`--sockets 10000,25000,...`): N signed-in idle sockets on
the full path's server process(es), step after step, and what holding them costs.

The servers start once; before the first socket a baseline window measures
them idle with nothing open. Then for each step the generators
(bench/crowd.py, one process per ~20,000 sockets, from several loopback
source addresses: bench/spread.py) open the missing sockets at a bounded
rate, so that the servers' handshake path, not the generators, sets the
pace; once all are open and settled, a window measures the servers' resident
memory and idle CPU (from /proc/<pid>/stat), the generators' own, and
PostgreSQL's and Redis's CPU: an idle socket still costs its session checks
and its share of the presence beats.

A step that does not fit the box (descriptors, ports, memory, a server that
dies, sockets that cannot be opened in time) stops the curve cleanly there;
the steps after it are extrapolated from the measured ones, and say so.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import psutil

from .curve import extrapolate, extrapolated_step, step_costs
from .limits import system_limits
from .measure import MB, Progress, measure_window, rss_mb
from .servers import ROOT
from .signins import bulk_sessions
from .spread import Layout, layout, misfits

# Memory left to the rest of the box when a step is predicted to need the rest.
MEMORY_MARGIN_MB = 2048
PREFIX = "crowd-"


@dataclass
class CurveOptions:
    steps: list[int]
    processes: int = 1
    generators: int = 0  # 0: as few as fit (one per `per_generator` sockets)
    source_addresses: int = 0  # 0: as few as fit (one per `per_address` sockets)
    per_generator: int = 20000
    per_address: int = 20000
    open_rate: float = 2000.0  # sockets opened per second, over all generators
    concurrency: int = 100  # handshakes in flight, over all generators
    step_timeout: float = 1800.0  # seconds a step's sockets may take to open
    settle: float = 30.0
    window: float = 60.0


class Generator:
    """The bench's end of one bench/crowd.py process."""

    def __init__(self, index: int, process: asyncio.subprocess.Process, log: Path) -> None:
        self.index = index
        self.process = process
        self.log = log
        self.last: dict = {}

    @classmethod
    async def start(cls, index: int, spec: dict, out: Path) -> Generator:
        log = out / f"crowd-{index}.log"
        with open(log, "ab") as stderr:
            process = await asyncio.create_subprocess_exec(
                sys.executable,
                "-m",
                "bench.crowd",
                json.dumps({**spec, "generator": index}),
                cwd=ROOT,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=stderr,
            )
        return cls(index, process, log)

    @property
    def pid(self) -> int:
        return self.process.pid

    async def ask(self, command: str, progress=None) -> dict:
        """Send one command; its reply (the lines of progress before it go to `progress`)."""
        self.process.stdin.write(command.encode() + b"\n")
        await self.process.stdin.drain()
        while True:
            line = await self.process.stdout.readline()
            if not line:
                raise RuntimeError(f"generator {self.index} exited: {self.log.read_text()[-2000:]}")
            self.last = json.loads(line)
            if self.last.get("reply"):
                return self.last
            if progress is not None:
                progress(self.last)

    async def stop(self) -> None:
        if self.process.returncode is None:
            try:
                await asyncio.wait_for(self.ask("close"), 60)
                await asyncio.wait_for(self.process.wait(), 30)
            except (TimeoutError, RuntimeError, ConnectionError):
                self.process.kill()
                await self.process.wait()


def memory_misfit(n: int, measured: list[dict], baseline: dict) -> list[str]:
    """Whether the measured steps' line says `n` sockets would leave the box short of memory."""
    if not measured:
        return []
    last = measured[-1]
    need = sum(
        extrapolate([(0.0, baseline[key])] + [(s["sockets"], s[key]) for s in measured], n) - last[key]
        for key in ("server_rss_mb", "generators_rss_mb")
    )
    available = psutil.virtual_memory().available / MB
    if need > available - MEMORY_MARGIN_MB:
        return [
            f"memory: about {need:,.0f} MB more needed, {available:,.0f} MB available "
            f"(keeping {MEMORY_MARGIN_MB} MB for the rest of the box)"
        ]
    return []


async def open_step(
    generators: list[Generator], plan: Layout, n: int, before: int, options: CurveOptions
) -> tuple[dict, list[str]]:
    """Open sockets up to `n`; the opening's figures and why it failed (empty: it did not)."""
    bar = Progress(f"sockets: opening {n:,}")
    opened: dict[int, int] = {}

    def progress(status: dict) -> None:
        opened[status["generator"]] = status["open"]
        bar(min(sum(opened.values()), n), n)

    deadline = options.step_timeout
    started = time.perf_counter()
    try:
        replies = await asyncio.wait_for(
            asyncio.gather(*(g.ask(f"open {plan.share(n, g.index)}", progress) for g in generators)), deadline
        )
    except TimeoutError:
        held = sum(opened.values())
        return {}, [f"time to open: {held:,} of {n:,} sockets open after {deadline:.0f} s"]
    seconds = time.perf_counter() - started
    bar(n, n)
    figures = {"opening_seconds": round(seconds, 1), "opened_per_s": round((n - before) / seconds, 1)}
    failed = sum(r["failed"] for r in replies)
    if failed:
        errors = sorted({e for r in replies for e in r["errors"]})
        return figures, [f"handshakes: {failed:,} of {n - before:,} sockets failed to open: " + "; ".join(errors)]
    return figures, []


async def climb(
    servers, generators: list[Generator], plan: Layout, options: CurveOptions, limits: dict, baseline: dict
) -> tuple[list[dict], dict | None]:
    server_pids = [s.pid for s in servers]
    gen_pids = [g.pid for g in generators]
    fd_limit, ports = limits["fd_hard"], limits["ports_per_source_address"] or 0
    steps: list[dict] = []
    before = 0
    for n in options.steps:
        reasons = misfits(n, servers=len(servers), layout=plan, fd_limit=fd_limit, ports=ports)
        reasons += memory_misfit(n, steps, baseline)
        if reasons:
            return steps, {"at": n, "before_opening": True, "reasons": reasons}
        figures, reasons = await open_step(generators, plan, n, before, options)
        if reasons:
            return steps, {"at": n, "before_opening": False, "reasons": reasons}
        before = n
        sys.stderr.write(
            f"sockets: {n:,} open at {figures['opened_per_s']:,.0f}/s; "
            f"settling {options.settle:.0f} s, then measuring {options.window:.0f} s\n"
        )
        await asyncio.sleep(options.settle)
        window = await measure_window(server_pids, gen_pids, options.window)
        statuses = await asyncio.gather(*(g.ask("status") for g in generators))
        dead = [s.pid for s in servers if s.process.poll() is not None]
        step = {
            "sockets": n,
            **figures,
            **window,
            "open_at_end": sum(s["open"] for s in statuses),
            "dropped": sum(s["dropped"] for s in statuses),
            "per_address": plan.per_address(n),
        }
        step.update(step_costs(step, baseline))
        steps.append(step)
        sys.stderr.write(f"sockets: {json.dumps(step)}\n")
        if dead:
            return steps, {"at": n, "before_opening": False, "reasons": [f"server process(es) {dead} exited"]}
        if step["open_at_end"] < n:
            return steps, {
                "at": n,
                "before_opening": False,
                "reasons": [f"{n - step['open_at_end']:,} of {n:,} sockets were closed while idle"],
            }
    return steps, None


async def run_curve(servers, options: CurveOptions, limits: dict, plan: Layout, sessions: Path, out: Path) -> dict:
    sys.stderr.write(f"sockets: baseline, {options.window:.0f} s with no socket open\n")
    baseline = await measure_window([s.pid for s in servers], [], options.window)
    spec = {
        "generators": plan.generators,
        "addresses": list(plan.addresses),
        "urls": [s.url for s in servers],
        "sessions": str(sessions),
        "rate": options.open_rate / plan.generators,
        "concurrency": max(1, options.concurrency // plan.generators),
    }
    generators = await asyncio.gather(*(Generator.start(g, spec, out) for g in range(plan.generators)))
    try:
        # The generators' own baseline: started, their sessions read, no socket open yet.
        await asyncio.gather(*(g.ask("status") for g in generators))
        baseline["generators_rss_mb"] = round(rss_mb([g.pid for g in generators]), 1)
        steps, stopped = await climb(servers, generators, plan, options, limits, baseline)
    finally:
        await asyncio.gather(*(g.stop() for g in generators))
    rest = [n for n in options.steps if n > (steps[-1]["sockets"] if steps else 0)]
    extrapolated = [extrapolated_step(n, steps, baseline) for n in rest] if stopped and steps else []
    return {"baseline": baseline, "steps": steps, "stopped": stopped, "extrapolated": extrapolated}


def sockets_curve(start, options: CurveOptions, env: dict[str, str], server: str, out: Path) -> dict:
    """The whole curve on fresh servers of `start("full", processes)`; its report (JSON-ready)."""
    limits = system_limits()
    most = max(options.steps)
    plan = layout(
        most,
        generators=options.generators,
        addresses=options.source_addresses,
        per_generator=options.per_generator,
        per_address=options.per_address,
        fd_limit=limits["fd_hard"],
        ports=limits["ports_per_source_address"],
    )
    sys.stderr.write(
        f"sockets: limits {limits}; {plan.generators} generator(s), source addresses {', '.join(plan.addresses)}\n"
    )
    started = time.perf_counter()
    bulk_sessions(env, most, PREFIX, out)
    signed_in = time.perf_counter() - started
    servers = start("full", options.processes)
    try:
        found = asyncio.run(run_curve(servers, options, limits, plan, out / f"sessions-{PREFIX}.txt", out))
    finally:
        for s in servers:
            s.stop()
    return {
        "server": server,
        "processes": options.processes,
        "cpus": os.cpu_count(),
        "limits": limits,
        # The handshake throttle: 0 is off (the bench's servers), anything else would refuse sockets.
        "connect_rate": env.get("CONNECT_RATE"),
        "generators": plan.generators,
        "source_addresses": list(plan.addresses),
        "options": {k: v for k, v in options.__dict__.items()},
        "users_and_sessions_seconds": round(signed_in, 1),
        **found,
    }
