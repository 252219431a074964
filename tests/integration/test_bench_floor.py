"""The idle check's floor (bench/floor.py): the server alone holds idle sockets as the full path does, under
real daphne and uvicorn processes, and imports nothing of Django, Channels or the app."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import urllib.request

import pytest
import websockets

# Not bench.load: its load generator needs the bench's own packages (requirements-bench.txt).
from bench.configs import APPS, FLOOR
from bench.servers import ROOT, Server


@pytest.mark.parametrize("kind", ["daphne", "uvicorn"])
def test_the_floor_holds_idle_sockets_until_they_close(kind, tmp_path):
    server = Server(kind, dict(os.environ), tmp_path, app=APPS[FLOOR]).start()
    try:

        async def hold() -> tuple[int, int]:
            url = server.url.replace("http", "ws", 1) + "/ws/"
            sockets = [await websockets.connect(url, compression=None, ping_interval=None) for _ in range(20)]
            # A frame is read and dropped; the socket stays open.
            await sockets[0].send("hello")
            await asyncio.sleep(0.5)
            still_open = sum(ws.close_code is None for ws in sockets)
            await asyncio.gather(*(ws.close() for ws in sockets))
            return still_open, sum(ws.close_code == 1000 for ws in sockets)

        assert asyncio.run(hold()) == (20, 20)
        with urllib.request.urlopen(f"{server.url}/healthz", timeout=5) as answer:
            assert answer.status == 200
        assert "Traceback" not in server.log()
    finally:
        server.stop()


def test_the_floor_is_the_server_alone():
    loaded = subprocess.run(
        [sys.executable, "-c", "import sys, bench.floor; print(sorted({m.split('.')[0] for m in sys.modules}))"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    for package in ("django", "channels", "messaging"):
        assert f"'{package}'" not in loaded
