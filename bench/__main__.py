"""`python -m bench` (`make bench`): start the servers, drive them, write JSON and a plot.

Every configuration runs in its own freshly started server process, and the
configurations are interleaved in rounds, so a neighbour's noise on a shared
machine hits them all alike; the report takes the median of the rounds.
Traffic goes to 127.0.0.1 only; every load is bounded in count and time.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shlex
import subprocess
import sys
from pathlib import Path

import psycopg
import redis

from messaging_client import sign_in

from . import bigroom
from .configs import (
    APP,
    APPS,
    FLOOR,
    IDS_LEVER,
    RANDOM_IDS,
    default_configs,
    kind_of,
    levers_of,
    server_env,
    server_of,
)
from .limits import raise_fd_limit
from .load import Load
from .measure import METRICS_TOKEN, Progress, idle_memory, median_of, quiesce, run_load
from .options import parse_args
from .profiling import profile
from .report import cpu_per_ack, markdown, plot
from .seed import seed_rooms
from .servers import ROOT, Server
from .signins import bulk_sessions
from .targets import curve_targets, targets

SECRET = "bench-secret-not-for-production"


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
        "MESSAGING_ROOMS_CREATED_PER_ADDRESS_PER_HOUR": "0",
    }
    run_env = {**os.environ, **env}
    subprocess.run([sys.executable, "manage.py", "migrate", "--noinput", "-v0"], cwd=ROOT, env=run_env, check=True)
    subprocess.run(
        [sys.executable, "manage.py", "collectstatic", "--noinput", "-v0"], cwd=ROOT, env=run_env, check=True
    )
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


def paced(load: Load, rate: float) -> Load:
    """`load` offered at `rate` commands/s for about 6 s, whatever the rate:
    the p99 of a short run is one hiccup of the shared machine."""
    return Load(**{**load.__dict__, "rate": rate, "messages": max(20, int(rate * 6 / load.sockets))})


def main() -> None:
    args = parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    # Up to the hard limit: the servers and the generators it starts inherit it.
    raise_fd_limit()
    base = prepare(args, out)
    levers = dict(kv.split("=", 1) for kv in args.env)
    configs = (args.configs or default_configs(args.server)).split(",")
    reference = Load(
        sockets=args.load_sockets,
        window=args.window,
        messages=args.messages,
        duplicates=args.duplicates,
        room_size=args.room_size,
    )
    if args.rate:
        reference = paced(reference, args.rate)
        args.seconds, args.peak_only = 0, True

    server_args = None if args.server_args is None else tuple(shlex.split(args.server_args))

    def start(config: str, count: int = 1) -> list[Server]:
        server = server_of(config, args.server)
        # --server-args are the options of --server's server.
        own_args = server_args if server == args.server else None
        app = APPS.get(kind_of(config), APP)
        return [
            Server(server, server_env(config, base, levers), out, app=app, args=own_args).start() for _ in range(count)
        ]

    if args.sockets:
        sockets_only(args, start, base, out)
        return
    with_sessions = start("full")
    try:
        sessions = [sign_in(with_sessions[0].url, f"bench{n}") for n in range(args.load_sockets)]
    finally:
        for s in with_sessions:
            s.stop()

    if args.profile:
        profile(start, sessions, reference, out, wall=args.profile_wall)
        return
    if args.idle_only:
        idle = idle_check(args, start, base, out)
        (out / "idle.json").write_text(json.dumps(idle, indent=2))
        print(json.dumps(idle, indent=2))
        return
    if args.search:
        from .search import search_bench

        found = search_bench(args, start, base, out)
        print(json.dumps(found, indent=2))
        return
    if args.events:
        from .events import events_bench

        found = events_bench(args, start, run_load, sessions, reference, out, base)
        (out / "events.json").write_text(json.dumps(found, indent=2))
        print(json.dumps(found, indent=2))
        return
    bigs = [] if args.rate else big_rooms(args, start, base, out)
    # The targets hold the 1,000-member room (the first, if none has 1,000).
    big = next((b for b in bigs if b["sockets"] == 1000), bigs[0] if bigs else None)
    if args.big_room_only:
        (out / "bigroom.json").write_text(json.dumps(bigs, indent=2))
        print(json.dumps(bigs, indent=2))
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

        def measure(
            name: str, servers: list[Server], kind: str, load: Load, what: str, label: str = label, r: int = r
        ) -> None:
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
                        measure(
                            "full, duplicates only, two processes", servers, config, dups, "full x2 duplicates only"
                        )
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

    idle = idle_check(args, start, base, out) if args.idle and not args.peak_only else None
    events = None
    if not (args.no_events or args.peak_only or args.rate):
        from .events import events_bench

        events = events_bench(args, start, run_load, sessions, reference, out, base)
    search = None
    if not (args.no_search or args.peak_only or args.rate):
        from .search import search_bench

        search = search_bench(args, start, base, out)
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
        "big_rooms": bigs,
        "cpu_per_ack": cpu_per_ack(peak, args.server),
        "events": events,
        "search": search,
        "targets": {} if args.rate else targets(peak, curves, idle, big, server=args.server),
    }
    (out / "results.json").write_text(json.dumps(report, indent=2))
    tables = markdown(report)
    (out / "results.md").write_text(tables)
    if curves:
        plot(curves, out / "latency.png")
    print(tables)
    print(f"wrote {out / 'results.json'}, {out / 'results.md'}" + (f" and {out / 'latency.png'}" if curves else ""))


def sockets_only(args: argparse.Namespace, start, base: dict[str, str], out: Path) -> None:
    """The sockets curve alone: sockets.json, sockets.md and sockets.png in `out`."""
    from .sockets import CurveOptions, sockets_curve
    from .sockets_report import markdown as curve_markdown
    from .sockets_report import plot as curve_plot

    options = CurveOptions(
        steps=args.sockets,
        processes=args.processes,
        generators=args.generators,
        source_addresses=args.source_addresses,
        per_generator=args.per_generator,
        per_address=args.per_address,
        open_rate=args.open_rate,
        step_timeout=args.step_timeout,
        settle=args.settle,
        window=args.idle_window,
    )
    curve = sockets_curve(start, options, base, args.server, out)
    curve["targets"] = curve_targets(curve)
    (out / "sockets.json").write_text(json.dumps(curve, indent=2))
    text = curve_markdown(curve)
    (out / "sockets.md").write_text(text)
    if curve["steps"]:
        curve_plot(curve, out / "sockets.png")
    print(text)
    print(
        f"wrote {out / 'sockets.json'}, {out / 'sockets.md'}"
        + (f" and {out / 'sockets.png'}" if curve["steps"] else "")
    )


def idle_check(args: argparse.Namespace, start, base: dict[str, str], out: Path) -> dict:
    """--idle idle sockets of as many users, each signed in with a session of its own, so that what a
    user costs (the hub's entry, the presence beat, the credential checks) is counted once per socket:
    their memory, and the server's CPU over --idle-window after --settle; with --idle-floor, beside it
    the same of as many on the server alone (`floor`)."""
    sessions = bulk_sessions(base, args.idle, "idle-", out)
    found = idle_memory(start, sessions, args.idle, settle=args.settle, window=args.idle_window)
    if args.idle_floor:
        found["floor"] = idle_memory(
            start, sessions, args.idle, settle=args.settle, window=args.idle_window, kind=FLOOR
        )
    return found


def big_rooms(args: argparse.Namespace, start, base: dict[str, str], out: Path) -> list[dict]:
    """The big room at each of --big-room's sizes, one after the other; its members signed in in bulk."""
    found = []
    for members in args.big_room:
        sessions = bulk_sessions(base, members, "big-", out)
        shape = bigroom.BigRoom(sockets=members, per_address=args.per_address)
        big = bigroom.measure(start, shape, sessions, Progress(f"big room of {members:,}: joining"))
        sys.stderr.write(f"big room: {big}\n")
        found.append(big)
        # Kept as each size ends: a later, larger room that fails leaves the earlier ones' figures.
        (out / "bigroom.json").write_text(json.dumps(found, indent=2))
    return found


if __name__ == "__main__":
    main()
