"""`python -m bench --events`: what the outbox costs a post, and whether the relay keeps up.

1. acks/s of the full path with the outbox and without it
   (`MESSAGING_EVENTS_OUTBOX=0`), in interleaved rounds, each a fresh server;
2. the relay's drain rate: the events those runs left unpublished, published by
   one `messaging_relay` process, in events/s;
3. the lag under the reference load: the relay running while the full path
   takes the reference load at its peak, the oldest unpublished event's age
   sampled every 0.1 s, and the relay's events/s against the posts/s;
4. the posts' statement alone with and without the outbox (`bench.outbox_cost`).

`make bench` runs it after the rest (`--no-events` skips it); `--events` runs only it.
"""

from __future__ import annotations

import json
import math
import os
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

import psycopg
import redis

from .servers import ROOT


def backlog(database: str) -> tuple[int, float]:
    with psycopg.connect(database) as conn:
        count, age = conn.execute(
            "SELECT count(*), coalesce(extract(epoch FROM now() - min(created_at)), 0) "
            "FROM messaging_event WHERE published_at IS NULL"
        ).fetchone()
    return count, float(age)


def events_total(database: str) -> int:
    with psycopg.connect(database) as conn:
        return conn.execute("SELECT count(*) FROM messaging_event").fetchone()[0]


class Relay:
    """One `messaging_relay` process on the bench's database and Redis."""

    def __init__(self, env: dict[str, str], out: Path) -> None:
        self.log = open(out / "relay.log", "ab")
        self.process = subprocess.Popen(
            [sys.executable, "manage.py", "messaging_relay"],
            cwd=ROOT,
            env={**os.environ, **env},
            stdout=self.log,
            stderr=subprocess.STDOUT,
        )

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(30)
        self.log.close()


def drain(env: dict[str, str], database: str, out: Path) -> dict:
    """Publish the whole backlog with one relay; its events/s."""
    count, _ = backlog(database)
    started = time.perf_counter()
    relay = Relay(env, out)
    try:
        while backlog(database)[0]:
            time.sleep(0.05)
    finally:
        relay.stop()
    seconds = time.perf_counter() - started
    # The process's start (Django's setup, ~0.5 s) is in it: a floor, not the relay's best.
    return {"events": count, "seconds": round(seconds, 2), "events_per_s": round(count / seconds, 1)}


def lag_under_load(env: dict[str, str], database: str, out: Path, run) -> dict:
    """The relay running beside a peak run of the full path: lag samples, and events/s against posts/s."""
    relay = Relay(env, out)
    samples: list[float] = []
    stop = threading.Event()

    def sample() -> None:
        while not stop.is_set():
            samples.append(backlog(database)[1])
            time.sleep(0.1)

    try:
        time.sleep(2)  # the relay's start, outside the timed part
        before = events_total(database)
        sampler = threading.Thread(target=sample)
        sampler.start()
        result = run()
        written = events_total(database) - before
        stop.set()
        sampler.join()
        caught_up = time.perf_counter()
        while backlog(database)[0]:
            time.sleep(0.05)
        catch_up = time.perf_counter() - caught_up
    finally:
        stop.set()
        relay.stop()
    seconds = result["seconds"]
    third = max(1, len(samples) // 3)
    return {
        "acks_per_s": result["acks_per_s"],
        "events_written_per_s": round(written / seconds, 1),
        "lag_p50_s": round(statistics.median(samples), 3) if samples else None,
        "lag_max_s": round(max(samples), 3) if samples else None,
        # Bounded, not growing: the last third's mean against the first third's.
        "lag_first_third_mean_s": round(statistics.fmean(samples[:third]), 3) if samples else None,
        "lag_last_third_mean_s": round(statistics.fmean(samples[-third:]), 3) if samples else None,
        "catch_up_after_s": round(catch_up, 3),
    }


def events_bench(args, start, run_load, sessions: list[str], reference, out: Path, base: dict[str, str]) -> dict:
    configs = {"with outbox": "full", "without outbox": "full+MESSAGING_EVENTS_OUTBOX=0"}
    rounds: dict[str, list[float]] = {name: [] for name in configs}
    # Sized to last about --seconds (at least 3 s) at the full path's rate, from one run not reported.
    servers = start("full")
    try:
        rate = run_load(servers, "full", sessions, reference, "calibration")["acks_per_s"]
    finally:
        for s in servers:
            s.stop()
    per_socket = max(reference.messages, math.ceil(max(args.seconds, 3.0) * rate / reference.sockets))
    reference = type(reference)(**{**reference.__dict__, "messages": per_socket})
    for r in range(args.rounds):
        # Alternating which goes first: on a shared box the later run of a round often meets other load.
        for name, config in list(configs.items()) if r % 2 == 0 else list(configs.items())[::-1]:
            servers = start(config)
            try:
                rounds[name].append(
                    run_load(servers, "full", sessions, reference, f"round {r + 1} {name}")["acks_per_s"]
                )
            finally:
                for s in servers:
                    s.stop()
    cost = {name: {"acks_per_s_median": statistics.median(v), "rounds": v} for name, v in rounds.items()}
    # Paired per round (the two runs were back to back), which cancels the noise shared by a round.
    ratios = [w / wo for w, wo in zip(rounds["with outbox"], rounds["without outbox"]) if wo]
    cost["with / without, median of the rounds' ratios"] = round(statistics.median(ratios), 3) if ratios else None
    drained = drain(base, args.database, out)
    servers = start("full")
    try:
        longer = type(reference)(**{**reference.__dict__, "messages": reference.messages * 3})
        lag = lag_under_load(
            base,
            args.database,
            out,
            lambda: run_load(servers, "full", sessions, longer, "full path with the relay running"),
        )
    finally:
        for s in servers:
            s.stop()
    redis.Redis.from_url(args.redis).delete("messaging:events")
    return {
        "outbox_cost": cost,
        "outbox_cost_statement": statement_cost(base),
        "relay_drain": drained,
        "relay_under_reference_load": lag,
    }


def statement_cost(base: dict[str, str]) -> dict:
    """`bench.outbox_cost` in a process of its own (it sets Django up)."""
    found = subprocess.run(
        [sys.executable, "-m", "bench.outbox_cost"],
        cwd=ROOT,
        env={**os.environ, **base},
        check=True,
        capture_output=True,
        text=True,
    )
    return json.loads(found.stdout)
