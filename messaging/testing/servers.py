"""A real server process: daphne, uvicorn or gunicorn (uvicorn's workers) serving an ASGI app on a port of its own.

    server = ServerProcess("daphne", "project.asgi:application", ready_path="/login/").start()
    try:
        session = sign_in(server.url, "ana")          # messaging_client
        ...
    finally:
        server.stop()

For tests that need what `Communicator` leaves out (the server's own
WebSocket stack, its handshake, a process that is killed or stopped) and for
benches. Its output goes to a log file (`log()` reads its end); `start`
returns once `ready_path` answers 200, and raises, with the log, if the
process exits first or does not come up in time.
"""

from __future__ import annotations

import http.client
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

SERVERS = ("daphne", "uvicorn", "gunicorn")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


class ServerProcess:
    """One `kind` process of `app` (a `module:attribute` path) on 127.0.0.1.

    `env` is the process's whole environment (this one's if None); `args`,
    the server's own options, go before the app.
    """

    def __init__(
        self,
        kind: str = "daphne",
        app: str = "project.asgi:application",
        *,
        env: Mapping[str, str] | None = None,
        args: Sequence[str] = (),
        port: int | None = None,
        log_dir: Path | None = None,
        python: str | Path = sys.executable,
        cwd: Path | None = None,
        ready_path: str = "/healthz",
        ready_within: float = 60,
    ) -> None:
        if kind not in SERVERS:
            raise ValueError(f"kind must be one of {SERVERS}, not {kind!r}")
        self.kind = kind
        self.app = app
        self.env = dict(os.environ if env is None else env)
        self.args = tuple(args)
        self.port = port or free_port()
        self.python = str(python)
        self.cwd = cwd
        self.ready_path = ready_path
        self.ready_within = ready_within
        self.log_path = Path(log_dir or tempfile.gettempdir()) / f"{kind}-{self.port}.log"
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def pid(self) -> int:
        assert self.process is not None, "not started"
        return self.process.pid

    def command(self) -> list[str]:
        if self.kind == "daphne":
            return [self.python, "-m", "daphne", "-b", "127.0.0.1", "-p", str(self.port), *self.args, self.app]
        if self.kind == "gunicorn":
            # uvicorn's workers under gunicorn's supervision (the `uvicorn-worker` package);
            # `args` may name a config file (`-c`), whose bind this one overrides.
            return [
                self.python,
                "-m",
                "gunicorn",
                "--worker-class",
                "uvicorn_worker.UvicornWorker",
                *self.args,
                "--bind",
                f"127.0.0.1:{self.port}",
                self.app,
            ]
        return [
            self.python,
            "-m",
            "uvicorn",
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--log-level",
            "warning",
            *self.args,
            self.app,
        ]

    def start(self) -> ServerProcess:
        with open(self.log_path, "ab") as log:
            self.process = subprocess.Popen(
                self.command(), cwd=self.cwd, env=self.env, stdout=log, stderr=subprocess.STDOUT
            )
        deadline = time.monotonic() + self.ready_within
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"{self.kind} exited: {self.log()}")
            try:
                if self.request("GET", self.ready_path)[0] == 200:
                    return self
            except OSError:  # not listening yet
                pass
            time.sleep(0.05)
        self.stop()
        raise RuntimeError(f"{self.kind} on {self.port} did not come up within {self.ready_within}s: {self.log()}")

    def request(
        self, method: str, path: str, body: str | bytes | None = None, headers: Mapping[str, str] | None = None
    ) -> tuple[int, dict[str, str], bytes]:
        """One plain HTTP request; returns status, lower-cased headers and body."""
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=10)
        try:
            conn.request(method, path, body=body, headers=dict(headers or {}))
            response = conn.getresponse()
            return response.status, {k.lower(): v for k, v in response.getheaders()}, response.read()
        finally:
            conn.close()

    def log(self, tail: int = 4000) -> str:
        """The last `tail` characters of the process's output."""
        return self.log_path.read_text(errors="replace")[-tail:] if self.log_path.exists() else ""

    def signal(self, sig: int) -> None:
        assert self.process is not None, "not started"
        self.process.send_signal(sig)

    def kill(self) -> None:
        """SIGKILL: no cleanup, no goodbye, like a crash."""
        if self.process is not None:
            self.process.kill()
            self.process.wait()
            self.process = None

    def stop(self) -> None:
        """SIGTERM (after SIGCONT, should a test have stopped it), SIGKILL after 10 s."""
        if self.process is not None:
            self.process.send_signal(signal.SIGCONT)
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
            self.process = None
