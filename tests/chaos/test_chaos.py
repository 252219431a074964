"""The chaos run in the suite: a minute of faults from a fixed seed, and the planted bugs it must catch.

`make chaos` runs the same harness for longer, from a seed of its own
(docs/RELIABILITY.md). Each run prints its summary (`-s` to see it).
"""

from __future__ import annotations

import os

import pytest

from .harness import Config, run
from .hooks import PLANTS
from .nemesis import KINDS, schedule
from .stack import Stack

pytestmark = [pytest.mark.e2e]

# Its schedule strikes with every kind of fault within the minute, and with
# fail-commits 2.6 s after the clients are ready.
SEED = 22

# What each planted bug is caught as: the first violation that shows it.
CAUGHT_AS = {
    "claim-kept": {"unexplained-in-progress"},
    "early-result": {"acked-not-applied", "ack-differs-from-record", "acks-differ", "counter-backwards"},
    "stale-cache": {"acked-not-applied", "ack-differs-from-record", "acks-differ", "counter-backwards"},
}


@pytest.fixture(scope="module")
def stack(tmp_path_factory, static_root):
    stack = Stack(os.environ["DATABASE_URL"], tmp_path_factory.mktemp("chaos"), static_root).start()
    yield stack
    stack.stop()
    stack.drop_databases()


def test_the_seed_plans_every_kind_of_fault():
    planned = schedule(SEED, 60, servers=2, clients=30, rooms=["room-0"])
    assert {p.kind for p in planned} == set(KINDS)
    assert min(p.at for p in planned if p.kind == "fail-commits") < 5


async def test_a_minute_of_chaos_keeps_every_guarantee(stack, tmp_path):
    report = await run(Config(seconds=60, seed=SEED), stack, tmp_path)
    print(report.summary())
    assert not report.violations, report.summary()
    assert set(report.faults) == set(KINDS), report.faults
    # What the run exercised, not how fast: each command type acked, duplicates answered.
    assert all(report.counts.get(f"command {t}") for t in ("room.post", "reaction.add", "wallet.add")), report.counts
    assert report.counts.get("answer dup") and report.counts.get("answer unavailable"), report.counts


@pytest.mark.parametrize("plant", PLANTS)
async def test_the_checker_catches_a_planted_bug(stack, tmp_path, plant):
    report = await run(Config(seconds=40, seed=SEED, plant=plant, stop_on_violation=True), stack, tmp_path)
    print(report.summary())
    assert {v["kind"] for v in report.violations} & CAUGHT_AS[plant], report.summary()
