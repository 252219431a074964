"""`python -m bench` (`make bench`): start the servers, drive them, write JSON and a plot.

Every configuration runs in its own freshly started server process, and the
configurations are interleaved in rounds, so a neighbour's noise on a shared
machine hits them all alike; the report takes the median of the rounds.
Traffic goes to 127.0.0.1 only; every load is bounded in count and time.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import statistics
import shlex
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import psutil
import psycopg
import redis
from prometheus_client.parser import text_string_to_metric_families

from messaging.client import sign_in
from messaging.ops.metrics import BATCH_PHASE_NAMES

from . import bigroom
from .load import Load, Target, drive, hold_idle
from .configs import IDS_LEVER, RANDOM_IDS, default_configs, kind_of, levers_of, server_env, server_of
from .report import markdown
from .seed import seed_rooms
from .servers import ROOT, Server
from .targets import targets

SECRET = "bench-secret-not-for-production"
# The servers' `/metrics`, read around each full-path load for its batches.
METRICS_TOKEN = "bench-metrics"


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m bench", description=__doc__.splitlines()[0])
    p.add_argument("--database", default="postgres://postgres@127.0.0.1:5432/messaging_bench")
    p.add_argument("--redis", default="redis://127.0.0.1:6379/12", help="a db of the bench's own: it is flushed")
    p.add_argument("--sockets", type=int, default=16)
    p.add_argument("--window", type=int, default=4)
    p.add_argument("--messages", type=int, default=150, help="commands per socket and run")
    p.add_argument("--duplicates", type=float, default=0.1)
    p.add_argument("--room-size", type=int, default=4)
    p.add_argument("--rooms", type=int, default=0,
                   help="other people's rooms in the database before the runs, untimed (bench/seed.py)")
    p.add_argument("--room-members", type=int, default=10, help="members of each of --rooms")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--seconds", type=float, default=3.0,
                   help="a calibration round (not reported) sizes each peak run to last about this long, "
                        "with at least --messages per socket (0: no calibration, --messages only)")
    p.add_argument("--server", choices=["daphne", "uvicorn"], default="daphne",
                   help="for every config without a SERVER= lever of its own")
    p.add_argument("--server-args", default=None,
                   help='the server\'s own options in place of the defaults (uvicorn: bench.servers.UVICORN_ARGS), '
                        'e.g. "--ws websockets --loop asyncio"')
    p.add_argument("--idle", type=int, default=10000, help="idle sockets for the memory check (0: skip)")
    p.add_argument("--configs", default=None,
                   help='comma-separated; a lever rides on a config as "full+KEY=VALUE+KEY=VALUE" '
                        '(the server\'s environment; IDS=random: the load generator\'s command ids; '
                        'SERVER=daphne or uvicorn: the server of this config). Default: full,echo,tutorial, '
                        'and with --server uvicorn also echo+SERVER=daphne, the plain stack on its reference '
                        'server, measured in the same run as the full path on uvicorn')
    p.add_argument("--env", action="append", default=[], help="KEY=VALUE for the full path's server (a lever)")
    p.add_argument("--rate", type=float, default=None,
                   help="only paced runs at this many commands/s (each config, every round, about 6 s each): "
                        "latency at one load, for lever studies")
    p.add_argument("--peak-only", action="store_true", help="skip the latency curve and the idle sockets (lever studies)")
    p.add_argument("--profile", action="store_true", help="only profile the full path under the reference load (py-spy)")
    p.add_argument("--profile-wall", action="store_true",
                   help="with --profile: sample every thread all the time (where it waits), not only while it holds the GIL")
    p.add_argument("--big-room", type=int, default=1000,
                   help="sockets of the big room (half on each of two processes; 0: skip), bench/bigroom.py")
    p.add_argument("--big-room-only", action="store_true", help="only the big room")
    p.add_argument("--idle-only", action="store_true", help="only the idle sockets' memory (--idle of them)")
    p.add_argument("--events", action="store_true",
                   help="only the events downstream: acks/s with and without the outbox, the relay's events/s and lag")
    p.add_argument("--no-events", action="store_true", help="skip the events downstream's part of a full run")
    p.add_argument("--out", default=str(ROOT / "artifacts" / "bench"))
    return p.parse_args()


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


def prepare(args: argparse.Namespace, out: Path) -> dict[str, str]:
    """Create and migrate the bench database, empty the bench's Redis db, collect static files."""
    url = psycopg.conninfo.conninfo_to_dict(args.database.replace("postgres://", "postgresql://", 1))
    name = url.pop("dbname")
    with psycopg.connect(**{**url, "dbname": "postgres"}, autocommit=True) as conn:
        if not conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone():
            conn.execute(f'CREATE DATABASE "{name}"')
    env = {
        "DJANGO_SETTINGS_MODULE": "bench.settings",
        "DATABASE_URL": args.database,
        "REDIS_URL": args.redis,
        "DEBUG": "0",
        "SECRET_KEY": SECRET,
        "ALLOWED_HOSTS": "127.0.0.1,localhost",
        "STATIC_ROOT": str(out / "static"),
        "LOG_LEVEL": "WARNING",
        "METRICS_TOKEN": METRICS_TOKEN,
        # Each of the bench's 16 users sends far above the default limits (20
        # commands/s per socket, 600 per 10 s per user), which would answer a
        # share of the load `rate_limited`. Raised, not off: every command
        # still takes a token and counts in the per-user window.
        "MESSAGING_RATE_BURST": "100000",
        "MESSAGING_RATE_PER_SECOND": "100000",
        "MESSAGING_USER_RATE_LIMIT": "10000000",
        # The bench's clients all come from one address, and each round makes new rooms.
        "CONNECT_RATE": "0",
        "SIGNIN_RATE": "0",
        "MESSAGING_ROOMS_CREATED_PER_HOUR": "0",
    }
    run_env = {**os.environ, **env}
    subprocess.run([sys.executable, "manage.py", "migrate", "--noinput", "-v0"], cwd=ROOT, env=run_env, check=True)
    subprocess.run([sys.executable, "manage.py", "collectstatic", "--noinput", "-v0"], cwd=ROOT, env=run_env, check=True)
    with psycopg.connect(args.database) as conn:
        # CASCADE: every table that refers to these (reactions, watermark moves) goes too.
        conn.execute(
            "TRUNCATE messaging_message, messaging_commandrecord, messaging_membership, messaging_room, bench_chatmessage,"
            " messaging_event"
            " CASCADE"
        )
    seed_rooms(args.database, args.rooms, args.room_members)
    redis.Redis.from_url(args.redis).flushdb()
    return env


def quiesce(database: str) -> None:
    """Vacuum, analyze and checkpoint what the runs before wrote, so that
    autovacuum and a checkpoint they triggered do not land inside the next runs."""
    with psycopg.connect(database, autocommit=True) as conn:
        conn.execute("VACUUM ANALYZE")
        conn.execute("CHECKPOINT")


def paced(load: Load, rate: float) -> Load:
    """`load` offered at `rate` commands/s for about 6 s, whatever the rate:
    the p99 of a short run is one hiccup of the shared machine."""
    return Load(**{**load.__dict__, "rate": rate, "messages": max(20, int(rate * 6 / load.sockets))})


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
        spent = {
            kind: sum(seconds - services0[kind].get(pid, 0.0) for pid, seconds in by_pid.items())
            for kind, by_pid in services1.items()
        }
        return {
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
        receipts = {"gathered_batches_per_s": round(gathered / wall, 1),
                    "gathered_mean_size": round(spent["gathered_size"] / gathered, 1)} if gathered else {}
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


def busy_cpu() -> float:
    """CPU seconds the box's cores have run anything, summed over the cores
    (Linux: idle, I/O wait and time stolen by the hypervisor left out)."""
    t = psutil.cpu_times()
    return t.user + t.nice + t.system + getattr(t, "irq", 0.0) + getattr(t, "softirq", 0.0)


def run_load(servers: list[Server], kind: str, sessions: list[str], load: Load, label: str) -> dict:
    measured = Measured(servers, batches=kind == "full")
    result = asyncio.run(drive(Target(kind, [s.url for s in servers]), sessions, load, Progress(label), measured.mark))
    summary = {**result.summary(), **measured.done()}
    if summary["acks_per_s"]:
        # All the box spent per ack: the server's share, the database's, Redis's and the load generator's.
        summary["box_cpu_us_per_ack"] = round(summary["box_busy_cores"] / summary["acks_per_s"] * 1e6, 1)
    sys.stderr.write(f"{label}: {summary}\n")
    return summary


def median_of(runs: list[dict]) -> dict:
    keys = [k for k, v in runs[0].items() if isinstance(v, (int, float)) and v is not None]
    return {k: statistics.median(r[k] for r in runs if r.get(k) is not None) for k in keys}


def main() -> None:
    args = parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    base = prepare(args, out)
    levers = dict(kv.split("=", 1) for kv in args.env)
    configs = (args.configs or default_configs(args.server)).split(",")
    reference = Load(sockets=args.sockets, window=args.window, messages=args.messages,
                     duplicates=args.duplicates, room_size=args.room_size)
    if args.rate:
        reference = paced(reference, args.rate)
        args.seconds, args.peak_only = 0, True

    server_args = None if args.server_args is None else tuple(shlex.split(args.server_args))

    def start(config: str, count: int = 1) -> list[Server]:
        server = server_of(config, args.server)
        # --server-args are the options of --server's server.
        own_args = server_args if server == args.server else None
        return [Server(server, server_env(config, base, levers), out, args=own_args).start() for _ in range(count)]

    with_sessions = start("full")
    try:
        sessions = [sign_in(with_sessions[0].url, f"bench{n}") for n in range(args.sockets)]
    finally:
        for s in with_sessions:
            s.stop()

    if args.profile:
        profile(start, sessions, reference, out, wall=args.profile_wall)
        return
    if args.idle_only:
        idle = idle_memory(start, sessions[0], args.idle)
        (out / "idle.json").write_text(json.dumps(idle, indent=2))
        print(json.dumps(idle, indent=2))
        return
    if args.events:
        from .events import events_bench

        found = events_bench(args, start, run_load, sessions, reference, out, base)
        (out / "events.json").write_text(json.dumps(found, indent=2))
        print(json.dumps(found, indent=2))
        return
    big = bigroom.measure(start, bigroom.BigRoom(sockets=args.big_room), Progress("big room: joining")) \
        if args.big_room and not args.rate else None
    if big is not None:
        sys.stderr.write(f"big room: {big}\n")
    if args.big_room_only:
        (out / "bigroom.json").write_text(json.dumps(big, indent=2))
        print(json.dumps(big, indent=2))
        return

    # A run of 150 commands per socket lasts 0.4 s on echo and 15 s on the
    # tutorial: a hiccup of the shared machine moves a short run's rate a lot.
    # The calibration round measures each run's rate; the reported rounds then
    # send enough commands to last about --seconds each.
    calibrated: dict[str, float] = {}

    def sized(name: str, load: Load) -> Load:
        rate = calibrated.get(name)
        if not rate:
            return load
        return Load(**{**load.__dict__, "messages": max(load.messages, math.ceil(args.seconds * rate / load.sockets))})

    rounds: dict[str, list[dict]] = {}
    for r in range(-1 if args.seconds > 0 else 0, args.rounds):
        label = "calibration" if r < 0 else f"round {r + 1}"
        quiesce(args.database)

        def measure(name: str, servers: list[Server], kind: str, load: Load, what: str) -> None:
            if levers_of(name.split(",")[0]).get(IDS_LEVER) == RANDOM_IDS:
                load = Load(**{**load.__dict__, "random_ids": True})
            result = run_load(servers, kind, sessions, sized(name, load), f"{label} {what}")
            if r < 0:
                calibrated[name] = result["acks_per_s"]
            else:
                rounds.setdefault(name, []).append(result)

        for config in configs:
            servers = start(config)
            try:
                kind = kind_of(config)
                measure(config, servers, kind, reference, config)
                if kind == "full" and not args.rate:
                    # The full path and its levers: the duplicate and first-time
                    # shares; and receipts, which a chat sends for every message.
                    first = Load(**{**reference.__dict__, "duplicates": 0.0})
                    dups = Load(**{**reference.__dict__, "seed_only_duplicates": True})
                    receipts = Load(**{**reference.__dict__, "duplicates": 0.0, "receipts": True})
                    measure(config + ", first-time posts only", servers, kind, first, "first-time only")
                    measure(config + ", duplicates only", servers, kind, dups, "duplicates only")
                    measure(config + ", receipts", servers, kind, receipts, "receipts")
            finally:
                for s in servers:
                    s.stop()
        # Two processes on this box: the full path's, and the stack's own
        # (echo), which says how far a second process can take any app here;
        # and the full path's duplicates only, which Redis answers without
        # the database: how far it goes where PostgreSQL takes no share.
        for config in ("full", "echo"):
            if config in configs and not args.rate:
                servers = start(config, 2)
                try:
                    measure(f"{config}, two processes", servers, config, reference, f"{config} x2")
                    if config == "full":
                        dups = Load(**{**reference.__dict__, "seed_only_duplicates": True})
                        measure("full, duplicates only, two processes", servers, config, dups, "full x2 duplicates only")
                finally:
                    for s in servers:
                        s.stop()
    peak = {config: median_of(runs) for config, runs in rounds.items()}

    # Latency against offered load: paced runs at fractions of each config's
    # peak, in interleaved rounds like the peaks; each point is the median of
    # its rounds (a single run's p99 moved between 16 and 50 ms at one load).
    fractions = (0.25, 0.5, 0.75, 1.0)
    points: dict[str, dict[float, list[dict]]] = {}
    for r in range(0 if args.peak_only else args.rounds):
        # The curve is of this run's server; a config on another is there for its peak.
        for config in (c for c in configs if server_of(c, args.server) == args.server):
            quiesce(args.database)
            servers = start(config)
            try:
                for fraction in fractions:
                    rate = fraction * peak[config]["acks_per_s"]
                    label = f"round {r + 1} {config} at {fraction:.0%} of peak"
                    run = run_load(servers, kind_of(config), sessions, paced(reference, rate), label)
                    points.setdefault(config, {}).setdefault(fraction, []).append(
                        {"offered_per_s": round(rate, 1), **run}
                    )
            finally:
                for s in servers:
                    s.stop()
    curves = {
        config: [{"fraction": fraction, **median_of(runs[fraction])} for fraction in fractions]
        for config, runs in points.items()
    }

    idle = idle_memory(start, sessions[0], args.idle) if args.idle and not args.peak_only else None
    events = None
    if not (args.no_events or args.peak_only or args.rate):
        from .events import events_bench

        events = events_bench(args, start, run_load, sessions, reference, out, base)
    report = {
        "machine": {"cpus": os.cpu_count(), "load_avg_at_end": os.getloadavg(), "shared": True},
        "reference": reference.__dict__,
        "seconds_per_run": args.seconds,
        "calibrated_acks_per_s": calibrated,
        "server": args.server,
        "levers": levers,
        "rounds": rounds,
        "median": peak,
        "latency_vs_load": curves,
        "latency_rounds": points,
        "idle": idle,
        "big_room": big,
        "events": events,
        "targets": {} if args.rate else targets(peak, curves, idle, big, server=args.server),
    }
    (out / "results.json").write_text(json.dumps(report, indent=2))
    tables = markdown(report)
    (out / "results.md").write_text(tables)
    if curves:
        plot(curves, out / "latency.png")
    print(tables)
    print(f"wrote {out / 'results.json'}, {out / 'results.md'}" + (f" and {out / 'latency.png'}" if curves else ""))


def profile(start, sessions: list[str], load: Load, out: Path, *, wall: bool = False) -> None:
    """Sample the full path's server with py-spy under the reference load; print the top frames."""
    servers = start("full")
    raw = out / "profile.txt"
    try:
        spy = subprocess.Popen([str(Path(sys.executable).parent / "py-spy"), "record", "-p", str(servers[0].pid),
                                "-r", "250", "-f", "raw", "-o", str(raw), "--threads", "--idle" if wall else "--gil"],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(1)
        run_load(servers, "full", sessions, Load(**{**load.__dict__, "messages": load.messages * 2}), "profiled full path")
        spy.send_signal(subprocess.signal.SIGINT)
        spy.wait(30)
    finally:
        for s in servers:
            s.stop()
    print(summarize_profile(raw))


def summarize_profile(raw: Path, top: int = 25) -> str:
    """Per function: the share of samples it is on the stack (inclusive) and on top (self)."""
    inclusive: dict[str, int] = {}
    own: dict[str, int] = {}
    total = 0
    for line in raw.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        n = int(count)
        total += n
        frames = [f for f in stack.split(";") if not f.startswith("thread ") and not f.startswith("process ")]
        for frame in set(frames):
            inclusive[frame] = inclusive.get(frame, 0) + n
        if frames:
            own[frames[-1]] = own.get(frames[-1], 0) + n
    rows = sorted(inclusive.items(), key=lambda kv: -kv[1])[:top]
    lines = [f"{total} samples; inclusive %, self %, function"]
    lines += [f"{100 * n / total:6.1f} {100 * own.get(f, 0) / total:6.1f}  {f}" for f, n in rows]
    lines += ["", "top self:"]
    lines += [f"{100 * n / total:6.1f}  {f}" for f, n in sorted(own.items(), key=lambda kv: -kv[1])[:top]]
    return "\n".join(lines)


def idle_memory(start, session: str, count: int) -> dict:
    servers = start("full")
    try:
        before = psutil.Process(servers[0].pid).memory_info().rss

        async def hold() -> float:
            sockets = await hold_idle(Target("full", [servers[0].url]), session, count)
            await asyncio.sleep(2)
            rss = psutil.Process(servers[0].pid).memory_info().rss
            await asyncio.gather(*(ws.close() for ws in sockets), return_exceptions=True)
            return rss

        sys.stderr.write(f"opening {count} idle sockets...\n")
        after = asyncio.run(hold())
    finally:
        for s in servers:
            s.stop()
    return {"sockets": count, "rss_before_mb": round(before / 2**20, 1), "rss_mb": round(after / 2**20, 1)}


def plot(curves: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5))
    for config, points in curves.items():
        x = [p["offered_per_s"] for p in points]
        line, = ax.plot(x, [p["p99_ms"] for p in points], marker="o", label=f"{config} p99")
        ax.plot(x, [p["p50_ms"] for p in points], marker=".", linestyle="--", color=line.get_color(), label=f"{config} p50")
    ax.set_xlabel("offered load (commands/s)")
    ax.set_ylabel("ack latency (ms)")
    ax.set_yscale("log")
    ax.axhline(25, color="grey", linewidth=0.8, linestyle=":")
    ax.set_title("ack latency against offered load (16 sockets, W=4, 10% duplicates)")
    ax.legend(fontsize=8)
    ax.grid(True, which="both", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


if __name__ == "__main__":
    main()
