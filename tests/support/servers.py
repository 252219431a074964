"""Real server processes for tests: daphne (or uvicorn) and a private Redis."""
from __future__ import annotations

import http.client
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path

import redis

ROOT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_until(check, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if check():
                return
        except Exception:
            pass
        time.sleep(0.05)
    raise RuntimeError(f"{what} did not come up within {timeout}s")


class RedisServer:
    """A Redis server of the test's own, on its own port, so stopping it harms nothing else."""

    def __init__(self, directory: Path, port: int | None = None) -> None:
        self.port = port or free_port()
        self.dir = directory
        self.process: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> "RedisServer":
        self.process = subprocess.Popen(
            [shutil.which("redis-server") or "redis-server", "--port", str(self.port), "--bind", "127.0.0.1",
             "--save", "", "--appendonly", "no", "--dir", str(self.dir)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        wait_until(lambda: redis.Redis(port=self.port).ping(), 10, "redis-server")
        return self

    def stop(self) -> None:
        if self.process is not None:
            self.process.kill()
            self.process.wait()
            self.process = None


class Daphne:
    """One daphne process on its own port; by default `project.asgi:application` of this checkout.

    `env` is laid over `base_env` (this process's environment unless given).
    """

    def __init__(
        self,
        env: dict[str, str],
        port: int | None = None,
        log_dir: Path | None = None,
        args: tuple[str, ...] = (),
        *,
        app: str = "project.asgi:application",
        python: str | Path = sys.executable,
        cwd: Path = ROOT,
        base_env: Mapping[str, str] | None = None,
        ready_path: str = "/login/",
    ) -> None:
        self.port = port or free_port()
        self.env = {**(os.environ if base_env is None else base_env), **env}
        self.args = args
        self.app = app
        self.python = str(python)
        self.cwd = cwd
        # Answers 200 once the app is up (a server that redirects to https needs one exempt from that).
        self.ready_path = ready_path
        self.log_path = (log_dir or Path("/tmp")) / f"daphne-{self.port}.log"
        self.process: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def command(self) -> list[str]:
        return [self.python, "-m", "daphne", "-b", "127.0.0.1", "-p", str(self.port), *self.args, self.app]

    def start(self) -> "Daphne":
        with open(self.log_path, "ab") as log:
            self.process = subprocess.Popen(self.command(), cwd=self.cwd, env=self.env, stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"{self.command()[2]} exited: {self.log()}")
            try:
                if self.request("GET", self.ready_path)[0] == 200:
                    return self
            except OSError:
                time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"{self.command()[2]} on {self.port} did not come up: {self.log()}")

    def request(self, method: str, path: str, body: str | None = None, headers: dict | None = None) -> tuple[int, dict, bytes]:
        """One plain HTTP request; returns status, lower-cased headers and body."""
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=10)
        try:
            conn.request(method, path, body=body, headers=headers or {})
            response = conn.getresponse()
            return response.status, {k.lower(): v for k, v in response.getheaders()}, response.read()
        finally:
            conn.close()

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")[-4000:] if self.log_path.exists() else ""

    def signal(self, sig: int) -> None:
        assert self.process is not None
        self.process.send_signal(sig)

    def kill(self) -> None:
        """SIGKILL: no cleanup, no goodbye, like a crash."""
        if self.process is not None:
            self.process.kill()
            self.process.wait()
            self.process = None

    def stop(self) -> None:
        if self.process is not None:
            self.process.send_signal(signal.SIGCONT)
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
            self.process = None


class Uvicorn(Daphne):
    """The same, served by uvicorn (`args` are uvicorn's, e.g. `("--ws", "websockets")`)."""

    def command(self) -> list[str]:
        return [self.python, "-m", "uvicorn", "--host", "127.0.0.1", "--port", str(self.port), "--log-level", "warning",
                *self.args, self.app]
