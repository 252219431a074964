"""A protocol client over a real socket: sign in through the form, then speak PROTOCOL.md."""
from __future__ import annotations

import asyncio
import http.cookiejar
import json
import time
import urllib.parse
import urllib.request
import uuid

import websockets


def sign_in(base_url: str, name: str) -> str:
    """Sign in as a new guest through `/login/`; returns the session cookie's value."""
    jar = http.cookiejar.CookieJar()
    opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar))
    opener.open(base_url + "/login/", timeout=10).read()
    csrf = next(c.value for c in jar if c.name == "csrftoken")
    form = urllib.parse.urlencode({"name": name, "csrfmiddlewaretoken": csrf}).encode()
    opener.open(base_url + "/login/", form, timeout=10).read()
    return next(c.value for c in jar if c.name == "sessionid")


class WsClient:
    def __init__(self, base_url: str, session: str) -> None:
        self.base_url = base_url
        self.session = session
        self.ws = None
        self.inbox: list[dict] = []

    async def connect(self) -> "WsClient":
        self.ws = await websockets.connect(
            self.base_url.replace("http", "ws", 1) + "/ws/",
            additional_headers={"Cookie": f"sessionid={self.session}", "Origin": self.base_url},
            max_size=None,
        )
        return self

    async def close(self) -> None:
        if self.ws is not None:
            await self.ws.close()

    async def send(self, t: str, d: dict, id: str | None = None) -> str:
        id = id or uuid.uuid4().hex
        await self.ws.send(json.dumps({"id": id, "t": t, "d": d}))
        return id

    async def receive(self, timeout: float = 10) -> dict:
        return json.loads(await asyncio.wait_for(self.ws.recv(), timeout))

    async def ack(self, id: str, timeout: float = 15) -> dict:
        deadline = time.monotonic() + timeout
        while True:
            frame = await self.receive(max(0.1, deadline - time.monotonic()))
            if frame.get("t") == "ack" and frame.get("id") == id:
                return frame
            self.inbox.append(frame)

    async def call(self, t: str, d: dict, id: str | None = None) -> dict:
        return await self.ack(await self.send(t, d, id))

    async def messages_until(self, room: str, seq: int, timeout: float = 15) -> dict[int, dict]:
        """Collect `msg` frames of a room until `seq` has arrived; keyed by seq, repeats dropped."""
        seen = {f["d"]["seq"]: f for f in self.inbox if f["t"] == "msg" and f["d"]["room"] == room}
        deadline = time.monotonic() + timeout
        while seq not in seen:
            frame = await self.receive(max(0.1, deadline - time.monotonic()))
            if frame["t"] == "msg" and frame["d"]["room"] == room:
                seen[frame["d"]["seq"]] = frame
            else:
                self.inbox.append(frame)
        return seen
