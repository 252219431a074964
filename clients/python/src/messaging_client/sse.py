"""The client's connection over plain HTTP (`Client(transport="sse")`), for networks that refuse WebSockets.

What the socket would receive comes from `GET /api/stream?rooms=...`
(server-sent events, PROTOCOL.md 1.2) and each frame the client sends goes
to `POST /api/commands`, whose answer is its ack. `EventSocket` looks to the
client like its WebSocket (`send`, iteration over text frames, `close`,
`transport.abort()`, `protocol.close_rcvd`), so the outbox, the ids and the
rooms work as they do over a socket.

A stream serves a fixed list of rooms: a join of another opens a stream of
them all, which replaces the old one once its `ready` event came; joins are
acked from that event. A join of a room the stream already serves is acked
with what its `ready` said. After a reconnect the new stream resumes from
the last event's cursor (`Last-Event-ID`) if its rooms are the same.
An API token signs it in (a session cookie would need Django's CSRF token).
"""

from __future__ import annotations

import asyncio
import json
import ssl
from typing import Any
from urllib.parse import quote, urlsplit

from .http import ahttp_command

CLOSE_UNAUTHENTICATED = 4401


class _Close:
    def __init__(self, code: int) -> None:
        self.code = code


class _Protocol:
    close_rcvd: _Close | None = None


class EventSocket:
    """One connection of the client over the event stream and `POST /api/commands`."""

    def __init__(self, base: str, *, token: str | None, origin: str | None, resume: dict[str, Any]) -> None:
        self.base, self.token, self.origin = base.rstrip("/"), token, origin
        # The last cursor and the rooms it is of, kept by the client across connections.
        self.resume = resume
        self.incoming: asyncio.Queue[str | None] = asyncio.Queue()
        self.rooms: list[str] = []
        self.ready: dict[str, dict[str, Any]] = {}
        self.waiting: dict[str, list[str]] = {}
        self.current: asyncio.Task[None] | None = None
        self.opening: asyncio.Task[None] | None = None
        self.posts: set[asyncio.Task[None]] = set()
        self.protocol = _Protocol()
        self.transport = self
        self.ended = False

    # What the client reads of a WebSocket.

    async def send(self, text: str) -> None:
        frame = json.loads(text)
        data = frame.get("d") or {}
        if frame.get("t") == "room.join" and isinstance(data.get("room"), str):
            room = data["room"]
            if room in self.ready and self.opening is None:
                self.put({"t": "ack", "id": frame["id"], "ok": True, "d": self.ready[room]})
                return
            self.waiting.setdefault(room, []).append(frame["id"])
            if room not in self.rooms:
                self.rooms.append(room)
                self.open()
            return
        task = asyncio.create_task(self.post(frame))
        self.posts.add(task)
        task.add_done_callback(self.posts.discard)

    def __aiter__(self) -> EventSocket:
        return self

    async def __anext__(self) -> str:
        text = await self.incoming.get()
        if text is None:
            raise StopAsyncIteration
        return text

    async def close(self) -> None:
        self.end(None)

    def abort(self) -> None:
        self.end(None)

    # The rest.

    def put(self, frame: dict[str, Any]) -> None:
        self.incoming.put_nowait(json.dumps(frame))

    def end(self, code: int | None) -> None:
        if self.ended:
            return
        self.ended = True
        if code is not None:
            self.protocol.close_rcvd = _Close(code)
        for task in (self.current, self.opening, *self.posts):
            if task is not None and task is not asyncio.current_task():
                task.cancel()
        self.incoming.put_nowait(None)

    async def post(self, frame: dict[str, Any]) -> None:
        try:
            status, body = await ahttp_command(
                self.base, frame["t"], frame["d"], id=frame["id"], token=self.token, retries=0
            )
        except (OSError, TimeoutError):
            status, body = 0, {}
        if status == 401:
            self.end(CLOSE_UNAUTHENTICATED)
        elif body.get("t") == "ack":
            self.put(body)
        else:
            retry = status == 0 or status == 429 or status >= 500
            error = {"code": "unavailable" if retry else "bad_frame", "message": f"HTTP {status}", "retry": retry}
            self.put({"t": "ack", "id": frame["id"], "ok": False, "error": error})

    def open(self) -> None:
        """A stream of `rooms`, which replaces the current one once it is ready."""
        if self.opening is not None:
            self.opening.cancel()
        self.opening = asyncio.create_task(self.stream(list(self.rooms)))

    async def stream(self, rooms: list[str]) -> None:
        try:
            await self.read_stream(rooms)
        except (OSError, asyncio.IncompleteReadError, ValueError):
            pass
        if asyncio.current_task() in (self.current, self.opening):
            self.end(None)

    async def read_stream(self, rooms: list[str]) -> None:
        parts = urlsplit(self.base)
        secure = parts.scheme == "https"
        reader, writer = await asyncio.open_connection(
            parts.hostname, parts.port or (443 if secure else 80), ssl=ssl.create_default_context() if secure else None
        )
        try:
            lines = [f"GET /api/stream?rooms={quote(','.join(rooms), safe=',')} HTTP/1.1", f"Host: {parts.netloc}"]
            if self.token:
                lines.append(f"Authorization: Bearer {self.token}")
            if self.origin:
                lines.append(f"Origin: {self.origin}")
            if self.resume.get("rooms") == rooms and self.resume.get("cursor"):
                lines.append(f"Last-Event-ID: {self.resume['cursor']}")
            writer.write(("\r\n".join(lines) + "\r\n\r\n").encode())
            head = (await reader.readuntil(b"\r\n\r\n")).decode("latin1").split("\r\n")
            status = int(head[0].split()[1])
            if status == 401:
                self.end(CLOSE_UNAUTHENTICATED)
                return
            if status != 200:
                return
            chunked = any(h.lower().replace(" ", "") == "transfer-encoding:chunked" for h in head)
            pending = b""
            while True:
                if chunked:
                    size = int((await reader.readuntil(b"\r\n")).strip().split(b";")[0], 16)
                    data = (await reader.readexactly(size + 2))[:-2]
                else:
                    data = await reader.read(65536)
                if not data:
                    return
                pending += data
                while b"\n\n" in pending:
                    block, pending = pending.split(b"\n\n", 1)
                    self.event(rooms, block.decode())
        finally:
            writer.close()

    def event(self, rooms: list[str], block: str) -> None:
        fields: dict[str, str] = {}
        for line in block.split("\n"):
            if line and not line.startswith(":"):
                name, _, value = line.partition(":")
                fields[name] = value.removeprefix(" ")
        if "event" not in fields:
            return
        task = asyncio.current_task()
        if fields["event"] == "ready":
            if task is self.opening:
                if self.current is not None:
                    self.current.cancel()
                self.current, self.opening = task, None
            for d in json.loads(fields.get("data", "{}")).get("rooms", []):
                self.ready[d["room"]] = d
                for id in self.waiting.pop(d["room"], []):
                    self.put({"t": "ack", "id": id, "ok": True, "d": d})
        elif task is self.current:
            self.incoming.put_nowait(fields.get("data", "null"))
        if "id" in fields and task is self.current:
            self.resume.update(rooms=rooms, cursor=fields["id"])
