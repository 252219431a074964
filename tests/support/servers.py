"""Real server processes for tests: daphne (or uvicorn) and a private Redis."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path

import redis

from messaging.testing.servers import ServerProcess, free_port

__all__ = [
    "ROOT",
    "Daphne",
    "Gunicorn",
    "RedisServer",
    "Uvicorn",
    "collected_static",
    "deployed_env",
    "free_port",
    "wait_until",
]

ROOT = Path(__file__).resolve().parents[2]


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


def deployed_env(database_url: str, redis_url: str, static_root: Path, secret: str = "e2e-secret") -> dict[str, str]:
    """The environment of a deployed server process of the demo project (DEBUG off), on these database and Redis."""
    return {
        "DATABASE_URL": database_url,
        "REDIS_URL": redis_url,
        "DEBUG": "0",
        "SECRET_KEY": secret,
        "ALLOWED_HOSTS": "127.0.0.1,localhost",
        "STATIC_ROOT": str(static_root),
        "LOG_LEVEL": "WARNING",
        # Every test client is 127.0.0.1: the per-address throttles are off,
        # as for load tests, except where a test sets them.
        "CONNECT_RATE": "0",
        "SIGNIN_RATE": "0",
        "MESSAGING_ROOMS_CREATED_PER_ADDRESS_PER_HOUR": "0",
    }


def collected_static(directory: Path) -> Path:
    """What a deployment serves with DEBUG off: `collectstatic` into a new folder of `directory`."""
    root = Path(tempfile.mkdtemp(prefix="static-", dir=directory))
    subprocess.run(
        [sys.executable, "manage.py", "collectstatic", "--noinput", "-v0"],
        cwd=ROOT,
        check=True,
        env={**os.environ, "DEBUG": "0", "SECRET_KEY": "static", "STATIC_ROOT": str(root)},
    )
    return root


class RedisServer:
    """A Redis server of the test's own, on its own port, so stopping it harms nothing else."""

    def __init__(self, directory: Path, port: int | None = None) -> None:
        self.port = port or free_port()
        self.dir = directory
        self.process: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> RedisServer:
        self.process = subprocess.Popen(
            [
                shutil.which("redis-server") or "redis-server",
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
                "--dir",
                str(self.dir),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        wait_until(lambda: redis.Redis(port=self.port).ping(), 10, "redis-server")
        return self

    def stop(self) -> None:
        if self.process is not None:
            self.process.kill()
            self.process.wait()
            self.process = None


class Daphne(ServerProcess):
    """One daphne process on its own port (messaging.testing's `ServerProcess`);
    by default `project.asgi:application` of this checkout, ready once `/login/` answers.

    `env` is laid over `base_env` (this process's environment unless given).
    """

    kind = "daphne"

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
        super().__init__(
            self.kind,
            app,
            env={**(os.environ if base_env is None else base_env), **env},
            args=args,
            port=port,
            log_dir=log_dir,
            python=python,
            cwd=cwd,
            ready_path=ready_path,
        )


class Uvicorn(Daphne):
    """The same, served by uvicorn (`args` are uvicorn's, e.g. `("--ws", "websockets")`)."""

    kind = "uvicorn"


class Gunicorn(Daphne):
    """The same, served by gunicorn with uvicorn's workers (`args` are gunicorn's, e.g. `("-c", "deploy/gunicorn.conf.py")`)."""

    kind = "gunicorn"
