"""The link nemesis in the suite: half a minute of faults between two deployments, from a fixed seed,
and the checker's own proof that it sees a double and a loss (`make chaos` runs longer, docs/RELIABILITY.md)."""

from __future__ import annotations

import pytest
from asgiref.sync import sync_to_async

from .link.checker import Checker, Side
from .link.clients import History, Sent
from .link.nemesis import KINDS, schedule
from .link.run import Config, run

pytestmark = [pytest.mark.e2e]

# Its schedule strikes with every kind of fault within the half minute.
SEED = 3


def test_the_seed_plans_every_kind_of_fault():
    assert {p.kind for p in schedule(SEED, 30)} == set(KINDS)


async def test_half_a_minute_of_link_faults_keeps_every_guarantee(start_pair, tmp_path):
    pair = await sync_to_async(start_pair)(seed=SEED)
    report = await run(Config(seconds=30, seed=SEED, clients=2, drain=60, converge=60), pair, tmp_path)
    print(report.summary())
    assert not report.violations, report.summary()
    assert (report.doubles, report.losses) == (0, 0)
    assert {k[len("fault ") :] for k in report.counts if k.startswith("fault ")} == set(KINDS), report.counts
    assert report.counts.get("answer unavailable") and report.counts.get("answer dup"), report.counts
    assert report.converged_in is not None


def sides(home_messages: dict, replica_messages: dict, records: dict) -> dict[str, Side]:
    users = {"a0": (1, "guest-a0"), "b1": (2, "guest-b1")}
    return {
        "a": Side("a", {"hall": home_messages}, {"hall": (len(home_messages), len(home_messages))}, records, users),
        "b": Side(
            "b", {"hall@a": replica_messages}, {"hall@a": (len(replica_messages), len(replica_messages))}, {}, users
        ),
    }


def test_the_checker_counts_a_double_and_a_loss():
    history = History()
    post = Sent(
        1, "p1", "room.post", {"room": "hall@a", "body": "x"}, ok={"d": {"room": "hall@a", "seq": 1, "at": "t"}}
    )
    lost = Sent(
        1, "p2", "room.post", {"room": "hall@a", "body": "y"}, ok={"d": {"room": "hall@a", "seq": 3, "at": "t"}}
    )
    history.commands = {(1, "p1"): post, (1, "p2"): lost}
    stored = {1: ("p1", "b:2", "x", 1, 1), 2: ("p1", "b:2", "x", 1, 2)}
    copies = {1: ("p1", "guest-b1", "x", 1, 1), 2: ("p1", "guest-b1", "x", 1, 2)}
    records = {("b:2", "p1"): ("room.post", {"room": "hall", "seq": 1, "at": "t"})}
    checker = Checker(history, sides(stored, copies, records), {0: ("a", "a0"), 1: ("b", "b1")})
    checker.check()
    assert (checker.doubles, checker.losses) == (1, 1), history.violations
