"""What the tests of the app's changes to daphne share: the ASGI apps' side
(tests/support/sweep_app.py, pings_app.py, served by a real daphne) and the
tests' side (tests/e2e/test_daphne_sweeps.py, test_daphne_pings.py)."""

from __future__ import annotations

import base64
import functools
import gc
import json
import os
import socket
import sys
from collections.abc import Callable, Iterator
from typing import Any

import httpx

from .servers import Daphne

# The apps' side, in the daphne process.


def daphne_server() -> Any:
    Server = sys.modules["daphne.server"].Server
    return next(thing for thing in gc.get_objects() if isinstance(thing, Server))


def count_calls(
    owner: Any, name: str, counts: dict[str, int], key: str, when: Callable[..., bool] | None = None
) -> None:
    """Count in `counts[key]` each call of `owner.name` (a class's method, or an object's), or only
    those whose arguments `when` holds for."""
    original = getattr(owner, name)

    @functools.wraps(original)  # its name kept: a count may ask which method a callback is
    def counted(*args: Any, **kwargs: Any) -> Any:
        if when is None or when(*args, **kwargs):
            counts[key] += 1
        return original(*args, **kwargs)

    setattr(owner, name, counted)


async def answer_http(scope: dict, send: Callable, counts: dict[str, int]) -> None:
    """`GET /state`: the app's `counts` and the server's connections; anything else: ok."""
    body = b"ok"
    if scope["path"] == "/state":
        body = json.dumps({**counts, "connections": len(daphne_server().connections)}).encode()
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"application/json")]})
    await send({"type": "http.response.body", "body": body})


async def answer_frames(receive: Callable, send: Callable, answer: Callable[[str], Any]) -> None:
    """Accept a WebSocket, then `await answer(text)` for each of its text frames until it disconnects."""
    await receive()  # websocket.connect
    await send({"type": "websocket.accept"})
    while True:
        event = await receive()
        if event["type"] == "websocket.disconnect":
            return
        await answer(event.get("text") or "")


# The tests' side.


def daphnes_serving(app: str, tmp_path, *options: str) -> Iterator[Callable[..., Daphne]]:
    """A fixture's `start(*args, env=...)`: one more daphne serving `app` with `options` and `args` (and `env`
    in its environment), stopped at the end."""
    servers = []

    def start(*args: str, env: dict[str, str] | None = None) -> Daphne:
        server = Daphne(env or {}, log_dir=tmp_path, args=(*options, *args), app=app, ready_path="/ready")
        servers.append(server.start())
        return server

    yield start
    for server in servers:
        server.stop()


def state(server: Daphne) -> dict:
    return httpx.get(f"{server.url}/state", timeout=5).json()


def ws_url(server: Daphne, path: str) -> str:
    return server.url.replace("http://", "ws://") + path


def raw_handshake(server: Daphne, path: str) -> socket.socket:
    """A WebSocket opened on a plain socket, which answers pings only as the test does."""
    conn = socket.create_connection(("127.0.0.1", server.port), timeout=15)
    key = base64.b64encode(os.urandom(16)).decode()
    conn.sendall(
        (
            f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{server.port}\r\nUpgrade: websocket\r\n"
            f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n"
        ).encode()
    )
    response = b""
    while b"\r\n\r\n" not in response:
        chunk = conn.recv(4096)
        if not chunk:
            break
        response += chunk
    assert response.startswith(b"HTTP/1.1 101"), response
    return conn
