"""One server process for the bench: daphne or uvicorn serving `bench.asgi`.

The bench's own (it imports nothing from `tests/`): a process on a free port,
its log in the run's directory, stopped with SIGTERM.
"""
from __future__ import annotations

import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# Uvicorn as a deployment runs it (docs/OPERATIONS.md): uvloop, websockets' Sans-I/O implementation, and no
# permessage-deflate, so that the uvicorn adapter writes frames itself (messaging/transport/servers/uvicorn.py).
# Before it the bench ran `--ws websockets` (the legacy implementation) on asyncio's loop.
UVICORN_ARGS = ("--loop", "uvloop", "--ws", "websockets-sansio", "--ws-per-message-deflate", "false")


class Server:
    """A daphne or uvicorn process of `bench.asgi:application` on a port of its own.

    `args`: the server's own options, in place of the defaults (none for daphne, `UVICORN_ARGS`).
    """

    def __init__(self, kind: str, env: dict[str, str], log_dir: Path, app: str = "bench.asgi:application",
                 args: tuple[str, ...] | None = None) -> None:
        self.kind = kind
        self.args = args if args is not None else UVICORN_ARGS if kind == "uvicorn" else ()
        # Another app for a study of the deployed stack (bench/http_vs_socket.py: `project.asgi`).
        self.app = app
        self.env = env
        self.port = free_port()
        self.log_path = log_dir / f"{kind}-{self.port}.log"
        self.process: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")[-4000:] if self.log_path.exists() else ""

    def start(self) -> "Server":
        if self.kind == "daphne":
            argv = ["-m", "daphne", "-b", "127.0.0.1", "-p", str(self.port), *self.args, self.app]
        else:
            argv = ["-m", "uvicorn", "--host", "127.0.0.1", "--port", str(self.port), "--log-level", "warning",
                    "--no-access-log", *self.args, self.app]
        with open(self.log_path, "ab") as log:
            self.process = subprocess.Popen([sys.executable, *argv], cwd=ROOT, env=self.env,
                                            stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise SystemExit(f"{self.kind} exited: {self.log()}")
            try:
                if urllib.request.urlopen(self.url + "/healthz", timeout=2).status == 200:
                    return self
            except OSError:  # not listening yet, or 503 while a dependency comes up
                time.sleep(0.05)
        self.stop()
        raise SystemExit(f"{self.kind} on {self.port} did not come up: {self.log()}")

    def stop(self) -> None:
        if self.process is not None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
            self.process = None
