"""Real server processes for tests: daphne on a free port, guest sign-in over HTTP, protocol calls over a real WebSocket."""
from __future__ import annotations

import asyncio
import http.client
import json
import re
import signal
import socket
import subprocess
import time
import uuid
from pathlib import Path
from urllib.parse import urlencode

from websockets.asyncio.client import ClientConnection, connect


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class LiveServer:
    """One daphne process serving `app`; its output goes to `log`, shown when it fails to start.

    `daphne` is the command that runs daphne, e.g. `[python, "-m", "daphne"]`.
    """

    def __init__(self, daphne: list[str], app: str, *, cwd: Path, env: dict[str, str], log: Path) -> None:
        self.port = free_port()
        self.command = [*daphne, "-b", "127.0.0.1", "-p", str(self.port), app]
        self.cwd, self.env, self.log = cwd, env, log
        self.process: subprocess.Popen | None = None

    def start(self, timeout: float = 60) -> "LiveServer":
        with open(self.log, "ab") as out:
            self.process = subprocess.Popen(self.command, cwd=self.cwd, env=self.env, stdout=out, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                break
            try:
                if self.request("GET", "/healthz")[0] == 200:
                    return self
            except OSError:
                pass
            time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"daphne did not become healthy:\n{self.log.read_text()[-4000:]}")

    def stop(self, sig: int = signal.SIGTERM) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(sig)
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.process = None

    @property
    def origin(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def request(self, method: str, path: str, body: str | None = None, headers: dict | None = None) -> tuple[int, dict, bytes]:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=10)
        try:
            conn.request(method, path, body=body, headers=headers or {})
            response = conn.getresponse()
            return response.status, {k.lower(): v for k, v in response.getheaders()}, response.read()
        finally:
            conn.close()

    def sign_in(self, name: str) -> str:
        """Sign in a new guest through the login form; returns the Cookie header for its session."""
        status, headers, _ = self.request("GET", "/login/")
        assert status == 200, status
        csrf = re.search(r"csrftoken=([^;]+)", headers["set-cookie"]).group(1)
        status, headers, body = self.request(
            "POST", "/login/", urlencode({"name": name, "csrfmiddlewaretoken": csrf}),
            {"Content-Type": "application/x-www-form-urlencoded", "Cookie": f"csrftoken={csrf}"},
        )
        assert status == 302, (status, body[:500])
        session = re.search(r"sessionid=([^;]+)", headers["set-cookie"]).group(1)
        return f"sessionid={session}"

    def websocket(self, cookie: str) -> connect:
        return connect(f"ws://127.0.0.1:{self.port}/ws/", origin=self.origin, additional_headers={"Cookie": cookie})


async def call(ws: ClientConnection, t: object, d: object, id: str | None = None, timeout: float = 10) -> tuple[dict, list[dict]]:
    """Send one command; returns its ack and the other frames received before it."""
    id = id or uuid.uuid4().hex
    await ws.send(json.dumps({"id": id, "t": t, "d": d}))
    others = []
    deadline = time.monotonic() + timeout
    while True:
        frame = json.loads(await asyncio.wait_for(ws.recv(), max(0.1, deadline - time.monotonic())))
        if frame.get("t") == "ack" and frame.get("id") == id:
            return frame, others
        others.append(frame)
