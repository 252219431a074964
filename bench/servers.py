"""The bench's server processes: daphne or uvicorn serving `bench.asgi`
(messaging.testing's `ServerProcess`), their logs in the run's directory."""

from __future__ import annotations

from pathlib import Path

from messaging.testing.servers import ServerProcess

from .configs import APP

ROOT = Path(__file__).resolve().parents[1]

# Uvicorn as a deployment runs it (docs/OPERATIONS.md): uvloop, websockets' Sans-I/O implementation, and no
# permessage-deflate, so that the uvicorn adapter writes frames itself (messaging/transport/servers/uvicorn.py).
# Before it the bench ran `--ws websockets` (the legacy implementation) on asyncio's loop.
UVICORN_ARGS = ("--loop", "uvloop", "--ws", "websockets-sansio", "--ws-per-message-deflate", "false")


class Server(ServerProcess):
    """A daphne or uvicorn process of `bench.asgi:application` on a port of its own, ready once `/healthz` is.

    `env`: the process's whole environment. `args`: the server's own options,
    in place of the defaults (none for daphne, `UVICORN_ARGS`; uvicorn logs no access lines either way).
    """

    def __init__(
        self,
        kind: str,
        env: dict[str, str],
        log_dir: Path,
        app: str = APP,
        args: tuple[str, ...] | None = None,
    ) -> None:
        own = args if args is not None else UVICORN_ARGS if kind == "uvicorn" else ()
        # Another app for a study of the deployed stack (bench/http_vs_socket.py: `project.asgi`).
        super().__init__(
            kind,
            app,
            env=env,
            args=(*own, "--no-access-log") if kind == "uvicorn" else own,
            log_dir=log_dir,
            cwd=ROOT,
            ready_within=30,
        )

    def start(self) -> Server:
        try:
            super().start()
        except RuntimeError as exc:
            raise SystemExit(str(exc)) from None  # the bench ends with what the server said
        return self
