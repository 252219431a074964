"""One server process for the bench: daphne or uvicorn serving `bench.asgi`."""
from __future__ import annotations

import subprocess
import sys
import urllib.request
from pathlib import Path

from tests.support.servers import ROOT, Daphne, wait_until


class Server(Daphne):
    """The tests' `Daphne` (port, log, stop), started on the bench's ASGI app, with daphne or uvicorn."""

    def __init__(self, kind: str, env: dict[str, str], log_dir: Path) -> None:
        super().__init__(env, log_dir=log_dir)
        self.kind = kind

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    def start(self) -> "Server":
        if self.kind == "daphne":
            argv = ["-m", "daphne", "-b", "127.0.0.1", "-p", str(self.port), "bench.asgi:application"]
        else:
            argv = ["-m", "uvicorn", "--host", "127.0.0.1", "--port", str(self.port), "--log-level", "warning",
                    "--no-access-log", "--ws", "websockets", "bench.asgi:application"]
        with open(self.log_path, "ab") as log:
            self.process = subprocess.Popen([sys.executable, *argv], cwd=ROOT, env=self.env,
                                            stdout=log, stderr=subprocess.STDOUT)

        def ready() -> bool:
            if self.process.poll() is not None:
                raise SystemExit(f"{self.kind} exited: {self.log()}")
            return urllib.request.urlopen(self.url + "/login/", timeout=2).status == 200

        wait_until(ready, 30, f"{self.kind} on {self.port}")
        return self
