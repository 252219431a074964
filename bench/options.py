"""The bench's command line (`python -m bench --help`)."""

from __future__ import annotations

import argparse
from pathlib import Path

from .spread import parse_counts

ROOT = Path(__file__).resolve().parents[1]
DESCRIPTION = "start the servers, drive them, write JSON and a plot."


def counts(text: str) -> list[int]:
    """argparse's reading of a list of steps: "10000,25000"."""
    try:
        return parse_counts(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def sizes(text: str) -> list[int]:
    """Like `counts`, and "0" for none."""
    return [] if text.strip() == "0" else counts(text)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m bench", description=DESCRIPTION)
    p.add_argument("--database", default="postgres://postgres@127.0.0.1:5432/messaging_bench")
    p.add_argument("--redis", default="redis://127.0.0.1:6379/12", help="a db of the bench's own: it is flushed")
    p.add_argument("--load-sockets", type=int, default=16, help="sockets of the reference load")
    p.add_argument("--window", type=int, default=4)
    p.add_argument("--messages", type=int, default=150, help="commands per socket and run")
    p.add_argument("--duplicates", type=float, default=0.1)
    p.add_argument("--room-size", type=int, default=4)
    p.add_argument(
        "--rooms",
        type=int,
        default=0,
        help="other people's rooms in the database before the runs, untimed (bench/seed.py)",
    )
    p.add_argument("--room-members", type=int, default=10, help="members of each of --rooms")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument(
        "--seconds",
        type=float,
        default=3.0,
        help="a calibration round (not reported) sizes each peak run to last about this long, "
        "with at least --messages per socket (0: no calibration, --messages only)",
    )
    p.add_argument(
        "--server",
        choices=["daphne", "uvicorn"],
        default="daphne",
        help="for every config without a SERVER= lever of its own",
    )
    p.add_argument(
        "--server-args",
        default=None,
        help="the server's own options in place of the defaults (uvicorn: bench.servers.UVICORN_ARGS), "
        'e.g. "--ws websockets --loop asyncio"',
    )
    p.add_argument("--idle", type=int, default=10000, help="idle sockets for the memory check (0: skip)")
    p.add_argument(
        "--idle-floor",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="the idle check also holds as many sockets on the server alone (bench/floor.py: "
        "an app that only accepts them), for what of the full path's memory and CPU the server keeps",
    )
    p.add_argument(
        "--configs",
        default=None,
        help='comma-separated; a lever rides on a config as "full+KEY=VALUE+KEY=VALUE" '
        "(the server's environment; IDS=random: the load generator's command ids; "
        "SERVER=daphne or uvicorn: the server of this config). Default: full,echo,tutorial, "
        "and with --server uvicorn also echo+SERVER=daphne, the plain stack on its reference "
        "server, measured in the same run as the full path on uvicorn",
    )
    p.add_argument("--env", action="append", default=[], help="KEY=VALUE for the full path's server (a lever)")
    p.add_argument(
        "--rate",
        type=float,
        default=None,
        help="only paced runs at this many commands/s (each config, every round, about 6 s each): "
        "latency at one load, for lever studies",
    )
    p.add_argument(
        "--peak-only", action="store_true", help="skip the latency curve and the idle sockets (lever studies)"
    )
    p.add_argument(
        "--profile", action="store_true", help="only profile the full path under the reference load (py-spy)"
    )
    p.add_argument(
        "--profile-wall",
        action="store_true",
        help="with --profile: sample every thread all the time (where it waits), not only while it holds the GIL",
    )
    p.add_argument(
        "--big-room",
        "--big-room-members",
        type=sizes,
        default=[1000],
        help="sockets of the big room (half on each of two processes), bench/bigroom.py; "
        "several, comma-separated, are run one after the other (1000,10000); 0: skip",
    )
    p.add_argument("--big-room-only", action="store_true", help="only the big room")
    p.add_argument("--idle-only", action="store_true", help="only the idle sockets' memory (--idle of them)")
    p.add_argument(
        "--events",
        action="store_true",
        help="only the events downstream: acks/s with and without the outbox, the relay's events/s and lag",
    )
    p.add_argument("--no-events", action="store_true", help="skip the events downstream's part of a full run")
    p.add_argument(
        "--search",
        action="store_true",
        help="only room.search's latency on a room of --search-messages, and 1 MiB uploads (bench/search.py)",
    )
    p.add_argument("--no-search", action="store_true", help="skip the search and uploads part of a full run")
    p.add_argument("--search-messages", type=int, default=1_000_000, help="messages of the searched room")
    p.add_argument("--search-queries", type=int, default=30, help="searches of each kind")
    p.add_argument("--uploads", type=int, default=60, help="uploads of 1 MiB")
    p.add_argument("--out", default=str(ROOT / "artifacts" / "bench"))
    curve = p.add_argument_group("the sockets curve (bench/sockets.py): only it runs when --sockets is given")
    curve.add_argument(
        "--sockets",
        type=counts,
        default=None,
        help="signed-in idle sockets to hold, step after step (10000,25000,50000,100000)",
    )
    curve.add_argument("--processes", type=int, default=1, help="server processes the sockets are spread over")
    curve.add_argument(
        "--generators",
        type=int,
        default=0,
        help="load-generator processes (0: one per --per-generator sockets of the largest step)",
    )
    curve.add_argument(
        "--source-addresses",
        type=int,
        default=0,
        help="loopback source addresses from 127.0.0.2 up (0: one per --per-address sockets)",
    )
    curve.add_argument("--per-generator", type=int, default=20000, help="most sockets of one generator process")
    curve.add_argument(
        "--per-address",
        type=int,
        default=20000,
        help="most sockets from one source address (and never more than its ephemeral ports)",
    )
    curve.add_argument("--open-rate", type=float, default=2000.0, help="sockets opened per second, at most")
    curve.add_argument(
        "--step-timeout",
        type=float,
        default=1800.0,
        help="seconds a step's sockets may take to open before the curve stops there",
    )
    curve.add_argument("--settle", type=float, default=30.0, help="seconds after a step's last socket opened")
    curve.add_argument(
        "--idle-window", type=float, default=60.0, help="seconds over which a step's idle CPU is measured"
    )
    args = p.parse_args(argv)
    for name in ("processes", "per_generator", "per_address", "open_rate", "step_timeout", "idle_window"):
        if getattr(args, name) <= 0:
            p.error(f"--{name.replace('_', '-')} must be positive")
    for name in ("generators", "source_addresses", "settle"):
        if getattr(args, name) < 0:
            p.error(f"--{name.replace('_', '-')} must not be negative")
    return args
