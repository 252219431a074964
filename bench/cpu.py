"""CPU time of one process, from `/proc/<pid>/stat`, and what it costs per ack.

A process's CPU time (user + system, every thread of it) is its own,
whatever else shares the cores: divided by the acks it gave in a timed
window it is the server's cost per command, which does not depend on
PostgreSQL, Redis and the load generator running on the same two cores
(they slow the window down, not the CPU the server spends per ack).
"""

from __future__ import annotations

import os

# Clock ticks per second of /proc's times (USER_HZ: 100 on Linux).
CLOCK_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def stat_cpu_seconds(stat: str, ticks_per_second: int = CLOCK_TICKS) -> float:
    """utime + stime of a `/proc/<pid>/stat` line, in seconds. The second field,
    the command's name in parentheses, may hold spaces and parentheses itself:
    the fields are counted from the last ")"."""
    fields = stat[stat.rindex(")") + 2 :].split()
    # After the name: state (field 3), ..., utime (14) and stime (15), counted from 1.
    utime, stime = int(fields[11]), int(fields[12])
    return (utime + stime) / ticks_per_second


def process_cpu_seconds(pid: int) -> float:
    """The CPU seconds process `pid` has run so far (its threads included, its children not)."""
    with open(f"/proc/{pid}/stat") as f:
        return stat_cpu_seconds(f.read())


def cores(cpu_seconds: float, wall_seconds: float) -> float | None:
    """CPU seconds spent over a window as a share of one core."""
    return cpu_seconds / wall_seconds if wall_seconds > 0 else None


def cpu_per_ack_us(cpu_seconds: float, acks: int) -> float | None:
    """The server's CPU per ack in microseconds (None without acks)."""
    return round(cpu_seconds / acks * 1e6, 1) if acks > 0 else None


def ratio(a: float | None, b: float | None) -> float | None:
    """a / b to two places, None when either is missing or b is 0."""
    return round(a / b, 2) if a is not None and b else None
