"""Hostile-load fixtures: a daphne process of the demo project, its memory and its metrics, and rooms seeded in SQL."""

from __future__ import annotations

import re
import time

import pytest
from django.contrib.auth import get_user_model
from django.db import connection

from messaging.models import Message, Room

from ..support.servers import Daphne, Uvicorn

METRICS_TOKEN = "hostile-metrics"


@pytest.fixture
def daphne(start_daphne):
    """`daphne(args=(...), **env)`: a server whose /metrics answers `scrape`."""

    def start(args: tuple[str, ...] = (), **env: str) -> Daphne:
        return start_daphne(args, METRICS_TOKEN=METRICS_TOKEN, **env)

    return start


@pytest.fixture
def uvicorn(start_uvicorn):
    """`uvicorn(args=(...), **env)`: the demo project served by uvicorn, its /metrics as `daphne`'s."""

    def start(args: tuple[str, ...] = (), **env: str) -> Uvicorn:
        return start_uvicorn(args, METRICS_TOKEN=METRICS_TOKEN, **env)

    return start


def proc_status_kib(pid: int, field: str) -> int:
    """A size in KiB from /proc/<pid>/status, e.g. `VmRSS` (resident set) or `VmHWM` (its peak)."""
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith(f"{field}:"):
                return int(line.split()[1])
    raise RuntimeError(f"no {field} for process {pid}")


def rss_kib(pid: int) -> int:
    return proc_status_kib(pid, "VmRSS")


def peak_rss_kib(pid: int) -> int:
    """The peak resident set since the process started or `reset_peak_rss`."""
    return proc_status_kib(pid, "VmHWM")


def reset_peak_rss(pid: int) -> None:
    """Start the process's peak resident set (VmHWM) again from its current one (proc(5), clear_refs)."""
    with open(f"/proc/{pid}/clear_refs", "w") as clear_refs:
        clear_refs.write("5")


def kernel_send_buffer() -> int:
    """The most a TCP socket's kernel send buffer grows to (tcp_wmem's largest), in bytes."""
    with open("/proc/sys/net/ipv4/tcp_wmem") as tcp_wmem:
        return int(tcp_wmem.read().split()[2])


def scrape(server: Daphne, name: str, /, **labels: str) -> float:
    """The value of one sample of the server's /metrics (0 when it has none yet)."""
    status, _, body = server.request("GET", "/metrics", headers={"Authorization": f"Bearer {METRICS_TOKEN}"})
    assert status == 200, status
    wanted = {f'{k}="{v}"' for k, v in labels.items()}
    for line in body.decode().splitlines():
        match = re.fullmatch(r"([a-z_]+)(?:\{(.*)\})? (\S+)", line)
        if match and match.group(1) == name and wanted <= set(filter(None, (match.group(2) or "").split(","))):
            return float(match.group(3))
    return 0.0


def until(check, what: str, timeout: float = 60):
    """Poll `check` until it returns something true; only bounds a precondition's wait."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def seed_room(slug: str, messages: int, chars: int) -> Room:
    """A room holding `messages` messages of `chars` characters each, inserted in one statement."""
    sender = get_user_model().objects.create_user(username=f"seeder-{slug}", first_name="seeder")
    room = Room.objects.create(slug=slug, last_seq=messages)
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {Message._meta.db_table} (room_id, seq, sender_id, client_msg_id, body, state, sent_at) "
            "SELECT %s, g, %s, 'seed-' || g, repeat('x', %s), 'sent', now() FROM generate_series(1, %s) g",
            [room.pk, sender.pk, chars, messages],
        )
    return room
