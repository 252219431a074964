"""Server CPU per ack (bench/cpu.py, bench/report.py): a process's CPU time from
/proc/<pid>/stat, divided by the acks of the timed window; the full path against
plain Channels echo on one server, in the results table and the JSON."""

from __future__ import annotations

import os

import pytest

from bench.cpu import cores, cpu_per_ack_us, process_cpu_seconds, ratio, stat_cpu_seconds
from bench.report import cpu_per_ack, markdown

# A /proc/<pid>/stat line whose command name holds a space and a parenthesis: utime 250, stime 50 ticks.
STAT = (
    "4242 (daphne (x) y) S 1 4242 4242 0 -1 4194560 9000 0 0 0 250 50 0 0 20 0 3 0 1000 "
    "300000000 20000 18446744073709551615 1 1 0 0 0 0 0 16781312 2 0 0 0 17 1 0 0 0 0 0"
)


def test_utime_and_stime_are_read_past_the_command_name():
    assert stat_cpu_seconds(STAT, ticks_per_second=100) == 3.0
    assert stat_cpu_seconds(STAT, ticks_per_second=50) == 6.0


def test_this_process_has_spent_some_cpu():
    assert process_cpu_seconds(os.getpid()) >= 0.0


def test_cpu_per_ack_is_the_servers_cpu_over_its_acks():
    assert cpu_per_ack_us(1.5, 10_000) == 150.0
    assert cpu_per_ack_us(0.0123456, 100) == 123.5
    assert cpu_per_ack_us(1.0, 0) is None
    assert cores(30.0, 60.0) == 0.5
    assert cores(1.0, 0.0) is None
    assert ratio(300.0, 120.0) == 2.5
    assert ratio(None, 1.0) is None and ratio(1.0, 0.0) is None


def run(acks: float, us: float | None) -> dict:
    return {"acks_per_s": acks, "server_cpu_us_per_ack": us, "p50_ms": 1.0}


def test_the_full_path_is_set_against_echo_on_the_same_server():
    median = {
        "full": run(6000, 160.0),
        "echo": run(10000, 80.0),
        "echo+SERVER=daphne": run(9000, 90.0),
        "full, two processes": run(7000, 200.0),
        "echo, two processes": run(14000, 90.0),
    }
    rows = cpu_per_ack(median, "uvicorn")
    assert rows == [
        {
            "server": "uvicorn",
            "full_acks_per_s": 6000,
            "echo_acks_per_s": 10000,
            "acks_full_over_echo": 0.6,
            "full_server_cpu_us_per_ack": 160.0,
            "echo_server_cpu_us_per_ack": 80.0,
            "cpu_per_ack_full_over_echo": 2.0,
        },
        {
            "server": "uvicorn, two processes",
            "full_acks_per_s": 7000,
            "echo_acks_per_s": 14000,
            "acks_full_over_echo": 0.5,
            "full_server_cpu_us_per_ack": 200.0,
            "echo_server_cpu_us_per_ack": 90.0,
            "cpu_per_ack_full_over_echo": 2.22,
        },
    ]
    assert cpu_per_ack({"full": run(6000, 160.0)}, "daphne") == [], "no echo: nothing to hold it against"


def test_the_results_table_shows_cpu_per_ack_beside_acks_and_the_ratios():
    median = {"full": run(6000, 160.0), "echo": run(10000, 80.0)}
    report = {
        "median": median,
        "rounds": {name: [m] for name, m in median.items()},
        "latency_vs_load": {},
        "latency_rounds": {},
        "idle": None,
        "targets": {},
        "cpu_per_ack": cpu_per_ack(median, "daphne"),
    }
    text = markdown(report)
    assert "| server CPU per ack (us) |" in text.splitlines()[0], "a column of the peak table"
    assert "| daphne | 6000 | 10000 | 0.60 | 160.0 | 80.0 | 2.00 |" in text


@pytest.mark.parametrize("acks", [0, -1])
def test_no_acks_no_cpu_per_ack(acks):
    assert cpu_per_ack_us(2.0, acks) is None
