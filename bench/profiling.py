"""`python -m bench --profile`: py-spy samples of the full path's server under the reference load."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

from .load import Load
from .measure import run_load


def profile(start, sessions: list[str], load: Load, out: Path, *, wall: bool = False) -> None:
    """Sample the full path's server with py-spy under the reference load; print the top frames."""
    servers = start("full")
    raw = out / "profile.txt"
    try:
        spy = subprocess.Popen(
            [
                str(Path(sys.executable).parent / "py-spy"),
                "record",
                "-p",
                str(servers[0].pid),
                "-r",
                "250",
                "-f",
                "raw",
                "-o",
                str(raw),
                "--threads",
                "--idle" if wall else "--gil",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        time.sleep(1)
        run_load(
            servers, "full", sessions, Load(**{**load.__dict__, "messages": load.messages * 2}), "profiled full path"
        )
        spy.send_signal(signal.SIGINT)
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
