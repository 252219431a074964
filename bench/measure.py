"""What one load of the bench measures: the servers' acks and latency (from
`load.drive`), the CPU of every process on the box over its timed part, the
full path's batches from the servers' `/metrics`; and the idle sockets' memory."""

from __future__ import annotations

import asyncio
import statistics
import sys
import time
import urllib.request

import psutil
import psycopg
from prometheus_client.parser import text_string_to_metric_families

from messaging.ops.metrics import BATCH_PHASE_NAMES

from .cpu import cores, cpu_per_ack_us, process_cpu_seconds
from .curve import per_10k
from .load import Load, Target, drive, hold_idle
from .servers import Server

MB = 2**20
# The servers' `/metrics`, read around each full-path load for its batches.
METRICS_TOKEN = "bench-metrics"


class Progress:
    """A one-line progress bar on stderr."""

    def __init__(self, label: str) -> None:
        self.label = label
        self.last = 0.0

    def __call__(self, done: int, total: int) -> None:
        now = time.monotonic()
        if now - self.last < (0.2 if sys.stderr.isatty() else 5.0) and done < total:
            return
        self.last = now
        filled = int(30 * done / total)
        sys.stderr.write(f"\r{self.label:<34} [{'#' * filled}{'.' * (30 - filled)}] {done}/{total}")
        if done >= total:
            sys.stderr.write("\n")
        sys.stderr.flush()


def quiesce(database: str) -> None:
    """Vacuum, analyze and checkpoint what the runs before wrote, so that
    autovacuum and a checkpoint they triggered do not land inside the next runs."""
    with psycopg.connect(database, autocommit=True) as conn:
        conn.execute("VACUUM ANALYZE")
        conn.execute("CHECKPOINT")


class Measured:
    """Over the timed part of one load: the server processes' CPU, and what the
    rest of the box spent (PostgreSQL's and Redis's processes, every core's
    busy time); then the servers' memory. The box's two cores carry them all,
    and the load generator: what a second server process can add depends on
    what is left."""

    def __init__(self, servers: list[Server], *, batches: bool = False) -> None:
        self.procs = [psutil.Process(s.pid) for s in servers]
        # The full path's servers: their batches' counters too.
        self.urls = [s.url for s in servers] if batches else []
        self.marks: dict[str, tuple] = {}
        self.batches: dict[str, dict[str, float]] = {}

    def mark(self, when: str) -> None:
        """`drive`'s `timed`: the counters at "start" and at "end"; the servers'
        metrics are read outside that span, so reading them is not counted."""
        if when == "start" and self.urls:
            self.batches[when] = batch_counters(self.urls)
        servers = sum(t.user + t.system for t in (p.cpu_times() for p in self.procs))
        self.marks[when] = (time.perf_counter(), servers, service_cpu(), busy_cpu())
        if when == "end" and self.urls:
            self.batches[when] = batch_counters(self.urls)

    def done(self) -> dict:
        (t0, servers0, services0, box0), (t1, servers1, services1, box1) = self.marks["start"], self.marks["end"]
        wall = t1 - t0
        spent = services_spent(services0, services1)
        return {
            "server_cpu_s": round(servers1 - servers0, 3),
            "server_cpu_cores": round((servers1 - servers0) / wall, 2),
            "server_rss_mb": round(sum(p.memory_info().rss for p in self.procs) / 2**20, 1),
            "postgresql_cpu_cores": round(spent["postgresql"] / wall, 2),
            "redis_cpu_cores": round(spent["redis"] / wall, 2),
            "box_busy_cores": round((box1 - box0) / wall, 2),
            **self.batch_summary(wall),
        }

    def batch_summary(self, wall: float) -> dict:
        """The full path's batches over the timed part: how many, how large, and
        where each one's time went (mean ms per phase; the phases add up to its cycle)."""
        if not self.batches:
            return {}
        spent = {key: self.batches["end"][key] - self.batches["start"].get(key, 0.0) for key in self.batches["end"]}
        # Receipts: gathered batches, from every sender, one call each.
        gathered = spent.get("gathered_count", 0.0)
        receipts = (
            {
                "gathered_batches_per_s": round(gathered / wall, 1),
                "gathered_mean_size": round(spent["gathered_size"] / gathered, 1),
            }
            if gathered
            else {}
        )
        count = spent.get("count", 0.0)
        if not count:
            return receipts
        return {
            **receipts,
            "batches_per_s": round(count / wall, 1),
            "batch_mean_size": round(spent["size"] / count, 1),
            **{f"batch_{phase}_ms": round(spent[phase] / count * 1000, 2) for phase in BATCH_PHASE_NAMES},
        }


def batch_counters(urls: list[str]) -> dict[str, float]:
    """Summed over the servers: batches run, commands they carried, seconds in each phase."""
    totals: dict[str, float] = {}
    for url in urls:
        request = urllib.request.Request(url + "/metrics", headers={"Authorization": f"Bearer {METRICS_TOKEN}"})
        text = urllib.request.urlopen(request, timeout=10).read().decode()
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                if sample.name == "messaging_command_batch_size_count":
                    key = "count"
                elif sample.name == "messaging_command_batch_size_sum":
                    key = "size"
                elif sample.name == "messaging_gathered_batch_size_count":
                    key = "gathered_count"
                elif sample.name == "messaging_gathered_batch_size_sum":
                    key = "gathered_size"
                elif sample.name == "messaging_command_batch_phase_seconds_sum":
                    key = sample.labels["phase"]
                else:
                    continue
                totals[key] = totals.get(key, 0.0) + sample.value
    return totals


def service_cpu() -> dict[str, dict[int, float]]:
    """CPU seconds so far of every PostgreSQL and Redis process, by pid (a
    backend that starts during a load counts from zero; one that ends is lost)."""
    spent: dict[str, dict[int, float]] = {"postgresql": {}, "redis": {}}
    for proc in psutil.process_iter(["name", "cpu_times"]):
        name, times = proc.info["name"] or "", proc.info["cpu_times"]
        kind = "postgresql" if name.startswith("postgres") else "redis" if name.startswith("redis-server") else None
        if kind and times is not None:
            spent[kind][proc.pid] = times.user + times.system
    return spent


def services_spent(before: dict[str, dict[int, float]], after: dict[str, dict[int, float]]) -> dict[str, float]:
    """CPU seconds each kind of service spent between two `service_cpu()` readings."""
    return {
        kind: sum(seconds - before[kind].get(pid, 0.0) for pid, seconds in by_pid.items())
        for kind, by_pid in after.items()
    }


def busy_cpu() -> float:
    """CPU seconds the box's cores have run anything, summed over the cores
    (Linux: idle, I/O wait and time stolen by the hypervisor left out)."""
    t = psutil.cpu_times()
    return t.user + t.nice + t.system + getattr(t, "irq", 0.0) + getattr(t, "softirq", 0.0)


def run_load(servers: list[Server], kind: str, sessions: list[str], load: Load, label: str) -> dict:
    measured = Measured(servers, batches=kind == "full")
    result = asyncio.run(drive(Target(kind, [s.url for s in servers]), sessions, load, Progress(label), measured.mark))
    summary = {**result.summary(), **measured.done()}
    # The server processes' own CPU per ack: theirs alone, whatever shares the cores with them.
    summary["server_cpu_us_per_ack"] = cpu_per_ack_us(summary.pop("server_cpu_s"), summary["acks"])
    if summary["acks_per_s"]:
        # All the box spent per ack: the server's share, the database's, Redis's and the load generator's.
        summary["box_cpu_us_per_ack"] = round(summary["box_busy_cores"] / summary["acks_per_s"] * 1e6, 1)
    sys.stderr.write(f"{label}: {summary}\n")
    return summary


def median_of(runs: list[dict]) -> dict:
    keys = [k for k, v in runs[0].items() if isinstance(v, (int, float)) and v is not None]
    return {k: statistics.median(r[k] for r in runs if r.get(k) is not None) for k in keys}


def rss_mb(pids: list[int]) -> float:
    return sum(psutil.Process(pid).memory_info().rss for pid in pids) / MB


def reading(servers: list[int], generators: list[int]) -> tuple:
    return (
        time.perf_counter(),
        sum(map(process_cpu_seconds, servers)),
        sum(map(process_cpu_seconds, generators)),
        service_cpu(),
    )


async def measure_window(servers: list[int], generators: list[int], seconds: float) -> dict:
    """Over `seconds` of holding still: every process's CPU as a share of a core; then their memory."""
    t0, server0, gen0, services0 = reading(servers, generators)
    await asyncio.sleep(seconds)
    t1, server1, gen1, services1 = reading(servers, generators)
    wall = t1 - t0
    spent = services_spent(services0, services1)
    return {
        "window_seconds": round(wall, 1),
        "server_rss_mb": round(rss_mb(servers), 1),
        "server_cpu_cores": round(cores(server1 - server0, wall), 4),
        "generators_rss_mb": round(rss_mb(generators), 1) if generators else 0.0,
        "generators_cpu_cores": round(cores(gen1 - gen0, wall), 4) if generators else 0.0,
        "postgresql_cpu_cores": round(cores(spent["postgresql"], wall), 3),
        "redis_cpu_cores": round(cores(spent["redis"], wall), 3),
    }


def idle_memory(
    start, sessions: list[str], count: int, settle: float = 0.0, window: float = 0.0, kind: str = "full"
) -> dict:
    """`count` idle signed-in sockets on one server of `kind` ("full"; "floor", the server alone), one per
    session of `sessions`: the server's memory before the first and with all of them open, and, after
    `settle` seconds, its CPU over `window` seconds (0: not measured) while they do nothing, and the box's
    PostgreSQL's and Redis's (`measure_window`, as the sockets curve measures a step), beside how many
    were still open."""
    servers = start(kind)
    pid = servers[0].pid
    try:
        before = psutil.Process(pid).memory_info().rss

        async def hold() -> dict:
            sockets = await hold_idle(Target(kind, [servers[0].url]), sessions, count)
            await asyncio.sleep(max(settle, 2.0))
            held = {"rss": psutil.Process(pid).memory_info().rss}
            if window > 0:
                held["window"] = await measure_window([pid], [], window)
            held["open_at_end"] = sum(ws.close_code is None for ws in sockets)
            await asyncio.gather(*(ws.close() for ws in sockets), return_exceptions=True)
            return held

        sys.stderr.write(f"opening {count} idle sockets...\n")
        held = asyncio.run(hold())
    finally:
        for s in servers:
            s.stop()
    after = held["rss"]
    found = {
        "sockets": count,
        "rss_before_mb": round(before / MB, 1),
        "rss_mb": round(after / MB, 1),
        # kB of 1,024 bytes, as every per-socket figure of the bench.
        "kb_per_socket": round((after - before) / count / 1024, 2),
        "open_at_end": held["open_at_end"],
    }
    window_found = held.get("window")
    if window_found and window_found["server_cpu_cores"] is not None:
        found.update(
            window_seconds=window_found["window_seconds"],
            server_cpu_cores=window_found["server_cpu_cores"],
            server_cpu_cores_per_10k=round(per_10k(window_found["server_cpu_cores"], count), 4),
            postgresql_cpu_cores=window_found["postgresql_cpu_cores"],
            redis_cpu_cores=window_found["redis_cpu_cores"],
        )
    return found
