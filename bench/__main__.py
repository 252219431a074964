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
from .configs import IDS_LEVER, RANDOM_IDS, default_configs, kind_of, levers_of, server_env, server_of
from .load import Load
from .measure import METRICS_TOKEN, Progress, idle_memory, median_of, quiesce, run_load
from .profiling import profile
from .report import markdown, plot
from .seed import seed_rooms
from .servers import ROOT, Server
from .targets import targets

SECRET = "bench-secret-not-for-production"


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


def paced(load: Load, rate: float) -> Load:
    """`load` offered at `rate` commands/s for about 6 s, whatever the rate:
    the p99 of a short run is one hiccup of the shared machine."""
    return Load(**{**load.__dict__, "rate": rate, "messages": max(20, int(rate * 6 / load.sockets))})


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


if __name__ == "__main__":
    main()
