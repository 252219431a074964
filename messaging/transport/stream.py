"""`GET /api/stream`: a session's frames as server-sent events (PROTOCOL.md 1.2, "Server-sent events").

For networks that refuse WebSocket upgrades. A stream is a second adapter of
the session (messaging/transport/session.py), beside `ChatConsumer`: the
same `Session` joins the rooms as `room.join` joins them, and its frames go to
an `EventBuffer` (messaging/transport/events.py) over the response's bounded
buffer (messaging/transport/servers/streams.py) instead of a socket's.
Commands go to `POST /api/commands`.

A raw ASGI app, not a Django view: it must reach the server's connection to
bound what waits for a client that does not read (under daphne an HTTP
`send` never waits), and it lives as long as the stream, as a socket's
consumer does. `StreamRoute` serves it at `STREAM_PATH` in front of the
HTTP app (project/asgi.py).

Before the stream starts, and changing nothing: the method (405), the rooms
(400: 1 to `ROOMS_PER_SOCKET` slugs, no repeats), the client address's
handshake rate (429, `CONNECT_RATE`), the origin (403: an `Origin` header
must pass the WebSocket's rule, messaging/transport/origins.py; without one,
a browser's `Sec-Fetch-Site` must be `same-origin` or `none`), the sign-in
(401: the session cookie or `Authorization: Bearer`, as for sockets) and each
room's rule (403: a private room the user is not a member of or invited to).
"""

from __future__ import annotations

import asyncio
import logging
import secrets
from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import parse_qs

import orjson

from ..chat.private import may_join
from ..conf import get_settings
from ..core.protocol import ROOM_SLUG, encode
from ..core.runtime import runtime
from .addresses import client_of_scope
from .events import EventBuffer, read_cursor
from .fanout import get_hub
from .gate import SocketGate
from .handshakes import handshake_over_limit
from .servers.streams import stream_buffer
from .session import Session
from .signins import credential_of, credential_watch

log = logging.getLogger(__name__)

Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]

STREAM_PATH = "/api/stream"
HEADERS = [
    (b"content-type", b"text/event-stream"),
    (b"cache-control", b"no-cache"),
    (b"x-accel-buffering", b"no"),
]
SAME_SITE = (None, "same-origin", "none")


class Refused(Exception):
    """A request answered with an error before its stream starts."""

    def __init__(self, status: int, code: str, message: str, *headers: tuple[bytes, bytes]) -> None:
        super().__init__(message)
        self.status, self.code, self.message, self.headers = status, code, message, headers


async def refuse(send: Send, refusal: Refused) -> None:
    body = encode({"t": "error", "error": {"code": refusal.code, "message": refusal.message}}).encode()
    headers = [(b"content-type", b"application/json"), (b"cache-control", b"no-cache"), *refusal.headers]
    await send({"type": "http.response.start", "status": refusal.status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


class StreamPort:
    """The port (messaging/transport/ports.py) of one stream: its events' buffer, and the end of its response."""

    def __init__(self, send: Send) -> None:
        self.send = send
        self.buffer: EventBuffer
        self.started = False
        self.finished = False
        self.code: int | None = None
        self.done = asyncio.Event()

    async def end(self, code: int | None, reason: str | None = None) -> None:
        if self.finished:
            return
        self.finished, self.code = True, code
        if self.started:
            try:
                await self.send({"type": "http.response.body", "body": b"", "more_body": False})
            except OSError:
                pass
        self.done.set()


def headers_of(scope: dict[str, Any]) -> dict[bytes, str]:
    headers: dict[bytes, str] = {}
    for name, value in scope.get("headers", ()):
        headers.setdefault(name, value.decode("latin1"))
    return headers


def rooms_of(query: dict[str, list[str]]) -> list[str]:
    """The request's rooms; `Refused` (400) unless 1 to `ROOMS_PER_SOCKET` distinct slugs."""
    given = query.get("rooms", [])
    limit = get_settings().ROOMS_PER_SOCKET
    rooms = given[0].split(",") if len(given) == 1 else []
    if not rooms or limit and len(rooms) > limit:
        raise Refused(400, "invalid", f"rooms: 1 to {limit or 'any number of'} room slugs, separated by commas")
    if len(set(rooms)) != len(rooms) or not all(ROOM_SLUG.fullmatch(room) for room in rooms):
        raise Refused(400, "invalid", "rooms: distinct room slugs ([a-z0-9][a-z0-9-]{0,63}), separated by commas")
    return rooms


class EventStream:
    """The ASGI app of `GET /api/stream`."""

    def __init__(self) -> None:
        # The sockets' gate: its origin rule, its throttle and its sign-in.
        self.gate = SocketGate(None)

    async def __call__(self, scope: dict[str, Any], receive: Receive, send: Send) -> None:
        try:
            given, rooms = await self.admit(scope)
        except Refused as refusal:
            await refuse(send, refusal)
            return
        await self.serve(given, rooms, receive, send)

    async def admit(self, scope: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
        """The signed-in scope and the rooms of a stream that may start; `Refused` otherwise, nothing changed."""
        if scope.get("method") != "GET":
            raise Refused(405, "method_not_allowed", "GET the stream", (b"allow", b"GET"))
        rooms = rooms_of(parse_qs(scope.get("query_string", b"").decode("latin1")))
        if await handshake_over_limit(scope):
            raise Refused(429, "rate_limited", "too many connections from this address", (b"retry-after", b"60"))
        headers = headers_of(scope)
        if b"origin" in headers and not self.gate.origins.allows(scope):
            raise Refused(403, "forbidden", "this origin may not open the stream")
        if b"origin" not in headers and headers.get(b"sec-fetch-site") not in SAME_SITE:
            raise Refused(403, "forbidden", "a cross-site request without Origin may not open the stream")
        given = await self.gate.signed_in(dict(scope))
        user = given["user"]
        if user is None or not user.is_authenticated:
            raise Refused(
                401,
                "unauthenticated",
                "no valid credentials: a session cookie or Authorization: Bearer <token>",
                (b"www-authenticate", b'Bearer realm="messaging"'),
            )
        gateway = runtime().gateway
        for room in rooms:
            if not await gateway.run(may_join, user, room):
                raise Refused(403, "forbidden", f"{room}: this room is private: join it by invitation")
        return given, rooms

    async def serve(self, given: dict[str, Any], rooms: list[str], receive: Receive, send: Send) -> None:
        conf = get_settings()
        headers = headers_of(given)
        query = parse_qs(given.get("query_string", b"").decode("latin1"))
        cursor = headers.get(b"last-event-id") or (query.get("last_event_id") or [None])[0]
        since = read_cursor(rooms, cursor)
        user = given["user"]
        port = StreamPort(send)
        session: Session | None = None

        def overflowed(frames: int, waited: int) -> None:
            if session is not None:
                session.overflowed(frames, waited)

        inner = stream_buffer(send, conf.MAX_SEND_BUFFER, overflowed, adapters=conf.SERVER_ADAPTERS)
        port.buffer = buffer = EventBuffer(inner, rooms, since)
        watch = credential_watch()
        session = Session(
            port,
            user,
            get_hub(),
            client_address=client_of_scope(given),
            credential=credential_of(given, user) if watch is not None else None,
            watch=watch,
        )
        tasks: list[asyncio.Task[None]] = []
        try:
            await session.start()
            acks = await self.join_all(session, port, rooms, since)
            if isinstance(acks, Refused):
                if not port.finished:
                    port.finished = True
                    await refuse(send, acks)
                return
            await send({"type": "http.response.start", "status": 200, "headers": HEADERS})
            port.started = True
            buffer.ready(orjson.dumps({"rooms": acks}).decode())
            tasks += [
                asyncio.ensure_future(self.ping(buffer, conf.STREAM_PING_INTERVAL)),
                asyncio.ensure_future(self.catch_up(session, port)),
            ]
            await until_first(disconnected(receive), port.done.wait())
        finally:
            for task in tasks:
                task.cancel()
            await session.end()

    async def join_all(
        self, session: Session, port: StreamPort, rooms: list[str], since: list[int] | None
    ) -> list[Any] | Refused:
        """Join `rooms` in turn as `room.join` does; the acks' `d`, or why the stream does not start."""
        acks: list[Any] = []
        for n, room in enumerate(rooms):
            d: dict[str, Any] = {"room": room} if since is None else {"room": room, "since_rev": since[n]}
            ack = await self.join(session, port, d)
            if isinstance(ack, Refused):
                return ack
            acks.append(ack)
        return acks

    async def catch_up(self, session: Session, port: StreamPort) -> None:
        """After `ready`: join again each room whose backlog did not fit before it, and each room
        behind, from where its cursor is, until every one is at its `last_rev`.

        Each join's backlog goes as fast as the client reads (the session waits
        for the buffer between its frames). A join refused now (the user left a
        private room) ends the stream; its client's next request is refused."""
        buffer = port.buffer
        while not port.finished and (n := buffer.lagging()) is not None:
            room = buffer.rooms[n]
            d: dict[str, Any] = {"room": room}
            if buffer.resumed or n in buffer.behind:
                d["since_rev"] = buffer.revs[n]
            if isinstance(await self.join(session, port, d), Refused):
                await port.end(None)

    async def join(self, session: Session, port: StreamPort, d: dict[str, Any]) -> Any:
        """One `room.join` with `d`, answered and its backlog put: the ack's `d`, or `Refused`."""
        buffer, room = port.buffer, d["room"]
        while True:
            if port.finished:
                return Refused(503, "unavailable", "the stream ended before it started")
            id = "stream-" + secrets.token_hex(8)
            buffer.expected = {id: room}
            await session.receive(encode({"id": id, "t": "room.join", "d": d}))
            await until_first(session.idle(), port.done.wait())
            buffer.expected = {}
            ack = buffer.acks.pop(id, None)
            if ack is None:
                return Refused(503, "unavailable", "the stream ended before it started")
            if ack.get("ok"):
                buffer.joined(room)
                return ack["d"]
            error = ack.get("error") or {}
            if error.get("code") == "rate_limited":
                await asyncio.sleep(float(error.get("retry_after") or 1))
                continue
            status = {"forbidden": 403, "invalid": 400, "rate_limited": 429}.get(str(error.get("code")), 503)
            return Refused(status, str(error.get("code")), f"{room}: {error.get('message')}")

    async def ping(self, buffer: EventBuffer, interval: float) -> None:
        while True:
            await asyncio.sleep(interval)
            buffer.ping()


async def disconnected(receive: Receive) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass


async def until_first(*waits: Awaitable[Any]) -> None:
    tasks = [asyncio.ensure_future(wait) for wait in waits]
    try:
        await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in tasks:
            task.cancel()


class StreamRoute:
    """`inner` (the HTTP app), with `GET /api/stream` (at `path`) served by an `EventStream`."""

    def __init__(self, inner: Any, path: str = STREAM_PATH) -> None:
        self.inner = inner
        self.path = path
        self.stream: EventStream | None = None

    async def __call__(self, scope: dict[str, Any], receive: Receive, send: Send) -> Any:
        if scope["type"] == "http" and scope.get("path") == self.path:
            if self.stream is None:
                self.stream = EventStream()
            return await self.stream(scope, receive, send)
        return await self.inner(scope, receive, send)
