"""Real server processes for tests: daphne and a private Redis."""
from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
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
    """One `daphne project.asgi:application` process on its own port."""

    def __init__(self, env: dict[str, str], port: int | None = None, log_dir: Path | None = None,
                 args: tuple[str, ...] = ()) -> None:
        self.port = port or free_port()
        self.env = {**os.environ, **env}
        self.args = args
        self.log_path = (log_dir or Path("/tmp")) / f"daphne-{self.port}.log"
        self.process: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> "Daphne":
        log = open(self.log_path, "ab")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "daphne", "-b", "127.0.0.1", "-p", str(self.port), *self.args,
             "project.asgi:application"],
            cwd=ROOT, env=self.env, stdout=log, stderr=subprocess.STDOUT,
        )
        log.close()

        def ready() -> bool:
            if self.process.poll() is not None:
                raise RuntimeError(f"daphne exited: {self.log()}")
            return urllib.request.urlopen(self.url + "/login/", timeout=2).status == 200

        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                if ready():
                    return self
            except RuntimeError:
                raise
            except Exception:
                time.sleep(0.1)
        raise RuntimeError(f"daphne on {self.port} did not come up: {self.log()}")

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
