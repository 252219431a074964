"""The client's socket: connect with backoff, rejoin, send what is due, read.

`Connection` is the half of `messaging_client.Client` that owns the socket's
life (one socket at a time, reconnecting to the next server after a failure);
`client.py` is the other half: the API, and what each frame that arrives
means. It runs on the client's state (its servers, outbox, requests and
rooms) and hands every frame it reads to `Client._handle`.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections import Counter
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, cast

from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed, InvalidHandshake, InvalidStatus

from .auth import handshake_headers
from .outbox import backoff_delay
from .sse import EventSocket

if TYPE_CHECKING:
    from .client import _Request
    from .outbox import Outbox
    from .rooms import RoomView

log = logging.getLogger("messaging_client.client")
CLOSE_UNAUTHENTICATED = 4401
# What a socket with no room to rejoin asks before it counts as ready: any
# answer (an ack, even `unknown_type` from a server without it) means the
# server kept the socket, so its session or token signs someone in.
SIGNED_IN_PROBE = "rooms.list"


class Unauthorized(Exception):
    """The server closed the socket with 4401: this session or token signs nobody in."""


class connect_refusing_redirects(connect):
    """websockets' `connect`, which follows a redirect (with the handshake's cookie and token when it
    stays on the same origin), made to fail on one instead: a handshake answered with a 3xx is a
    failed handshake, `InvalidStatus`, like a 403 (PROTOCOL 1.2, "Outbound requests")."""

    def process_redirect(self, exc: Exception) -> Exception | str:
        return exc


class Connection:
    """The socket loop of a `Client` (a base class of it, not used alone)."""

    # The client's state this half runs on, set by `Client.__init__` (and `start`: `_wake`).
    urls: list[str]
    session: str | None
    token: str | None
    origin: str | None
    ack_timeout: float
    backoff_base: float
    backoff_cap: float
    open_timeout: float
    rand: Callable[[], float]
    outbox: Outbox
    rooms: dict[str, RoomView]
    state: str
    stats: Counter[str]
    _waiters: dict[str, asyncio.Future[Any]]
    _requests: dict[str, _Request]
    _ws: Any
    transport: str
    _resume: dict[str, Any]
    _ready: bool
    _server: int
    _wake: asyncio.Event | None
    _closing: bool
    _failure: BaseException | None

    if TYPE_CHECKING:
        # `Client`'s, which this half calls.
        def _start_join(self, view: RoomView) -> tuple[str, asyncio.Future[Any]]: ...

        def _ask(
            self, t: str, d: dict[str, Any], on_ack: Callable[[dict[str, Any]], None] | None = None
        ) -> tuple[str, asyncio.Future[Any]]: ...

        async def _handle(self, frame: dict[str, Any]) -> None: ...

    def _url(self) -> tuple[str, str]:
        base = self.urls[self._server % len(self.urls)].rstrip("/")
        return base, base.replace("http", "ws", 1) + "/ws/"

    async def _run(self) -> None:
        failures = 0
        while not self._closing:
            base, url = self._url()
            self.state = "connecting"
            try:
                ws: Any
                if self.transport == "sse":
                    ws = EventSocket(base, token=self.token, origin=self.origin, resume=self._resume)
                else:
                    ws = await connect_refusing_redirects(
                        url,
                        additional_headers=handshake_headers(
                            base, session=self.session, token=self.token, origin=self.origin
                        ),
                        open_timeout=self.open_timeout,
                        max_size=None,
                        compression=None,
                        ping_interval=20,
                    )
            except (TimeoutError, OSError, InvalidHandshake) as exc:
                self.stats["handshake_failures"] += 1
                if isinstance(exc, InvalidStatus):
                    self.stats[f"handshake_status:{exc.response.status_code}"] += 1
                log.debug("connecting to %s failed: %s", url, exc)
                self._server += 1  # that one failed: the next one
                await asyncio.sleep(
                    backoff_delay(failures, base=self.backoff_base, cap=self.backoff_cap, rand=self.rand)
                )
                failures += 1
                continue
            self._ws, failures = ws, 0
            self.stats["connects"] += 1
            self.state = "open"
            code = await self._serve(ws)
            self._ws, self._ready = None, False
            self.outbox.disconnected()
            for request in self._requests.values():
                request.sent = False
            self.stats[f"close:{code}"] += 1
            if code == CLOSE_UNAUTHENTICATED:
                self.state = "closed"
                self._failure = Unauthorized("the server closed the socket with 4401: sign in again")
                for future in [*self._waiters.values(), *(r.future for r in self._requests.values())]:
                    if not future.done():
                        future.set_exception(self._failure)
                return
            self._server = int(self.rand() * len(self.urls))
            await asyncio.sleep(backoff_delay(0, base=self.backoff_base, cap=self.backoff_cap, rand=self.rand))

    async def _serve(self, ws: Any) -> int | None:
        """Run one socket: rejoin, then send what is due while reading; its close code when it ends."""
        reader = asyncio.create_task(self._read(ws))
        sender = asyncio.create_task(self._send_due(ws))
        try:
            await asyncio.wait([reader, sender], return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in (reader, sender):
                task.cancel()
            await asyncio.gather(reader, sender, return_exceptions=True)
            ws.transport.abort()
        for task in (reader, sender):
            if (
                not task.cancelled()
                and isinstance(task.exception(), Exception)
                and not isinstance(task.exception(), ConnectionClosed)
            ):
                log.warning("client socket task failed", exc_info=task.exception())
        received = ws.protocol.close_rcvd
        return received.code if received is not None else None

    async def _send_due(self, ws: Any) -> None:
        # Rejoin first, every room from where it stopped, then let the outbox go:
        # a post needs the membership its join makes. A join that takes longer
        # than the ack timeout holds nothing up.
        joins = [self._start_join(view)[1] for view in self.rooms.values()]
        if not joins:
            # With no room to rejoin, nothing tells a socket the server signs
            # nobody in (accepted, then closed with 4401 at once) from one it
            # took: the answer to a command does, whatever it says.
            probe = self._ask(SIGNED_IN_PROBE, {})[1]
            # Its refusal (a server without it) is an answer too, read here.
            probe.add_done_callback(lambda answer: answer.cancelled() or answer.exception())
            joins = [probe]
        for frame in self._frames_due(joins_only=True):
            await ws.send(frame)
        if joins:
            await asyncio.wait([asyncio.shield(j) for j in joins], timeout=self.ack_timeout)
        self._ready = True
        # Set by `start`, before this task runs.
        wake = cast(asyncio.Event, self._wake)
        while True:
            for frame in self._frames_due():
                await ws.send(frame)
            wakeup = self._next_wakeup()
            wake.clear()
            timeout = None if wakeup is None else max(0.0, wakeup - time.monotonic())
            try:
                await asyncio.wait_for(wake.wait(), timeout)
            except TimeoutError:
                pass

    def _frames_due(self, *, joins_only: bool = False) -> list[str]:
        now = time.monotonic()
        frames = []
        for request in self._requests.values():
            if joins_only and request.frame["t"] not in ("room.join", SIGNED_IN_PROBE):
                continue
            overdue = request.sent and now - request.due > self.ack_timeout
            if (not request.sent and now >= request.due) or overdue:
                request.sent, request.due = True, now
                request.attempts += 1
                frames.append(json.dumps(request.frame))
        if self._ready and not joins_only:
            for entry in self.outbox.due():
                self.outbox.sent(entry)
                if entry.attempts > 1:
                    self.stats["resends"] += 1
                frames.append(json.dumps(entry.frame()))
        return frames

    def _next_wakeup(self) -> float | None:
        times = [r.due + (self.ack_timeout if r.sent else 0.0) for r in self._requests.values()]
        wakeup = self.outbox.next_wakeup()
        if wakeup is not None:
            times.append(wakeup)
        return min(times, default=None)

    async def _read(self, ws: Any) -> None:
        async for text in ws:
            try:
                frame = json.loads(text)
            except ValueError:
                continue
            if isinstance(frame, dict):
                await self._handle(frame)
