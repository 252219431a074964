"""An asyncio client of the protocol: one reconnecting socket, an outbox, rooms resumed by seq.

What a program that talks to `messaging` (a bot, a script, another backend,
the project's own tests) needs so that pressing "send" once means one effect:

- every exactly-once command goes through the outbox (`messaging_client.outbox`):
  its id is minted once, it is stored before the first send, and it is resent
  with that id after every reconnect, ack timeout and `retry: true` refusal,
  until an `ok` ack or a final refusal settles it;
- the socket reconnects with full-jitter exponential backoff, to the next of
  the given servers when one fails;
- after each reconnect the rooms are joined again with `since`, before the
  outbox resends anything (a post needs its membership), and every message is
  taken once, in seq order (`messaging_client.rooms`);
- naturally idempotent commands (`room.join`, `receipt`, `room.history`, ...)
  are requests: sent on the open socket, sent again on the next if the ack
  did not come, never stored.

A close with 4401 (no signed-in user) stops the client: retrying cannot help.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import random
import time
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from typing import Any

from .connection import Connection
from .outbox import LANES, MemoryStore, Outbox, backoff_delay, final
from .rooms import RoomView

log = logging.getLogger(__name__)

# Commands whose effect is idempotent by nature: they are asked, never kept in the outbox.
REQUEST_TYPES = frozenset(
    {"room.join", "receipt", "room.history", "room.members", "rooms.list", "typing", "room.invite", "dm.open"}
)


class Refused(Exception):
    """The server refused the command for good (`ok: false`, `retry: false`)."""

    def __init__(self, error: dict[str, Any]) -> None:
        self.error = error
        self.code = error.get("code")
        super().__init__(f"{self.code}: {error.get('message', '')}")


class _Request:
    """A naturally idempotent command on its way, and who waits for its ack."""

    __slots__ = ("frame", "future", "on_ack", "sent", "due", "attempts")

    def __init__(
        self, frame: dict[str, Any], future: asyncio.Future[Any], on_ack: Callable[[dict[str, Any]], None] | None
    ) -> None:
        self.frame = frame
        self.future = future
        self.on_ack = on_ack
        self.sent = False
        self.due = 0.0
        self.attempts = 0


class Client(Connection):
    """One user's connection to one deployment of `messaging` (any of its `urls`)."""

    def __init__(
        self,
        urls: str | Sequence[str],
        *,
        session: str | None = None,
        token: str | None = None,
        store: MemoryStore | None = None,
        origin: str | None = None,
        ack_timeout: float = 5.0,
        backoff_base: float = 0.5,
        backoff_cap: float = 30.0,
        open_timeout: float = 10.0,
        keep: int = 1000,
        outbox_limit: int = 1000,
        on_event: Callable[[dict[str, Any]], Any] | None = None,
        rand: Callable[[], float] = random.random,
        lanes: Mapping[str, str] = LANES,
        transport: str = "ws",
    ) -> None:
        if transport not in ("ws", "sse"):
            raise ValueError('transport is "ws" (a WebSocket) or "sse" (the event stream and POST /api/commands)')
        if transport == "sse" and token is None:
            raise ValueError('transport="sse" signs in with an API token (token=...)')
        # "sse": what the socket would receive comes from GET /api/stream, commands go to POST /api/commands
        # (messaging_client.sse), for networks that refuse WebSockets.
        self.transport = transport
        self._resume: dict[str, Any] = {}
        self.urls = [urls] if isinstance(urls, str) else list(urls)
        if not self.urls:
            raise ValueError("give at least one server URL")
        self.session, self.token, self.origin = session, token, origin
        self.ack_timeout = ack_timeout
        self.backoff_base, self.backoff_cap = backoff_base, backoff_cap
        self.open_timeout = open_timeout
        self.keep = keep
        self.rand = rand
        self.on_event = on_event
        self.outbox = Outbox(
            store,
            limit=outbox_limit,
            ack_timeout=ack_timeout,
            backoff_base=backoff_base,
            backoff_cap=backoff_cap,
            rand=rand,
            lanes=lanes,
        )
        self.rooms: dict[str, RoomView] = {}
        self.state = "connecting"
        # What happened to the connection: connects, handshake failures, close codes; for tests and logs.
        self.stats: Counter[str] = Counter()
        self._waiters: dict[str, asyncio.Future[Any]] = {}
        self._requests: dict[str, _Request] = {}
        self._events: asyncio.Queue[dict[str, Any]] | None = None
        self._ws: Any = None
        self._ready = False
        self._server = 0
        self._wake: asyncio.Event | None = None
        self._opened: asyncio.Event | None = None
        self._task: asyncio.Task[None] | None = None
        self._closing = False
        self._failure: BaseException | None = None

    # -- lifecycle ---------------------------------------------------------------

    async def start(self, *, wait: bool = True, timeout: float = 30.0) -> Client:
        """Start connecting; with `wait`, return once the first socket is open and its rooms joined."""
        self._wake, self._opened = asyncio.Event(), asyncio.Event()
        self._task = asyncio.create_task(self._run(), name="messaging-client")
        if wait:
            await asyncio.wait_for(self._until_ready(), timeout)
        return self

    async def close(self) -> None:
        """Close the socket and stop; what the outbox holds stays in its store."""
        self._closing = True
        if self._ws is not None:
            await self._ws.close()
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        self.state = "closed"
        for future in [*self._waiters.values(), *(r.future for r in self._requests.values())]:
            if not future.done():
                future.cancel()

    async def __aenter__(self) -> Client:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def drop(self) -> None:
        """Lose the socket as a network would (no close handshake); the client reconnects."""
        if self._ws is not None:
            self._ws.transport.abort()

    async def settled(self, timeout: float | None = None) -> bool:
        """Wait (at most `timeout`) until the outbox is empty; whether it is."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while len(self.outbox) and (deadline is None or time.monotonic() < deadline):
            self._raise_failure()
            await asyncio.sleep(0.05)
        return not len(self.outbox)

    # -- commands ----------------------------------------------------------------

    async def submit(
        self, t: str, d: dict[str, Any], *, id: str | None = None, timeout: float | None = None
    ) -> dict[str, Any]:
        """An exactly-once command through the outbox; its `ok` ack (raises `Refused` for a final refusal).

        With a `timeout` the wait ends with `TimeoutError`, but the command
        stays in the outbox and is still sent until it is settled. A given `id`
        makes the action deterministic (a bot answering message 42 once,
        whatever restarts it goes through); without one, a new id is minted.
        """
        entry = self.outbox.add(t, d, id)
        future = self._waiters.get(entry.id)
        if future is None:
            future = self._waiters[entry.id] = asyncio.get_running_loop().create_future()
        self._kick()
        return await asyncio.wait_for(asyncio.shield(future), timeout)

    async def post(
        self, room: str, body: str, *, id: str | None = None, timeout: float | None = None
    ) -> dict[str, Any]:
        """`room.post`; the ack's `d` (`room`, `seq`, `at`)."""
        d: dict[str, Any] = (await self.submit("room.post", {"room": room, "body": body}, id=id, timeout=timeout))["d"]
        return d

    async def request(self, t: str, d: dict[str, Any], *, timeout: float | None = None) -> dict[str, Any]:
        """A naturally idempotent command; its `ok` ack (raises `Refused` for a final refusal)."""
        id, future = self._ask(t, d)
        return await self._answer(id, future, timeout)

    async def join(self, room: str, *, timeout: float | None = None) -> dict[str, Any]:
        """Join `room` (and again after every reconnect, from where the client stopped); the ack's `d`."""
        view = self.rooms.get(room)
        if view is None:
            view = self.rooms[room] = RoomView(room, keep=self.keep)
        id, future = self._start_join(view)
        d: dict[str, Any] = (await self._answer(id, future, timeout))["d"]
        return d

    async def receipt(self, room: str, *, delivered: int | None = None, read: int | None = None) -> dict[str, Any]:
        d: dict[str, Any] = {"room": room}
        if delivered is not None:
            d["delivered"] = delivered
        if read is not None:
            d["read"] = read
        acked: dict[str, Any] = (await self.request("receipt", d))["d"]
        return acked

    def messages(self, room: str) -> list[dict[str, Any]]:
        """The room's messages this client holds (the newest `keep`), in seq order."""
        view = self.rooms.get(room)
        return list(view.messages.values()) if view else []

    def events(self) -> AsyncIterator[dict[str, Any]]:
        """Every frame worth a program's attention, as it comes: each message once and in
        order (`msg`), changes (`msg.edit`, ...), acks of outbox commands, and the rest.

        Frames are kept for the stream from this call on; a reader that stops
        reading stops the client reading its socket too (bounded memory on
        both sides, the server closing a socket that stops reading).
        """
        if self._events is None:
            self._events = asyncio.Queue(maxsize=self.keep)
        return self._stream(self._events)

    @staticmethod
    async def _stream(queue: asyncio.Queue[dict[str, Any]]) -> AsyncIterator[dict[str, Any]]:
        while True:
            yield await queue.get()

    # -- the connection ----------------------------------------------------------

    async def _until_ready(self) -> None:
        while not self._ready:
            self._raise_failure()
            await asyncio.sleep(0.02)

    def _raise_failure(self) -> None:
        if self._failure is not None:
            raise self._failure

    def _kick(self) -> None:
        if self._wake is not None:
            self._wake.set()

    def _ask(
        self, t: str, d: dict[str, Any], on_ack: Callable[[dict[str, Any]], None] | None = None
    ) -> tuple[str, asyncio.Future[Any]]:
        id = uuid.uuid4().hex
        future = asyncio.get_running_loop().create_future()
        self._requests[id] = _Request({"id": id, "t": t, "d": d}, future, on_ack)
        self._kick()
        return id, future

    async def _answer(self, id: str, future: asyncio.Future[Any], timeout: float | None) -> dict[str, Any]:
        try:
            return await asyncio.wait_for(asyncio.shield(future), timeout)
        except (TimeoutError, asyncio.CancelledError):
            self._requests.pop(id, None)  # given up on: not sent again
            raise

    def _start_join(self, view: RoomView) -> tuple[str, asyncio.Future[Any]]:
        """The room's join in flight, or a new one from where the room's messages stop."""
        if view.joining:
            running = self._requests.get(view.joining)
            if running is not None:
                return view.joining, running.future

        def joined(ack: dict[str, Any]) -> None:
            view.joined(ack["d"])
            # The backlog follows the ack; if it stops short of `last_seq`
            # (more than the server replays), join again from where it stopped.
            asyncio.get_running_loop().call_later(1.0, self._catch_up, view)

        id, future = self._ask("room.join", view.join_data(), on_ack=joined)
        view.joining = id
        return id, future

    async def _handle(self, frame: dict[str, Any]) -> None:
        kind = frame.get("t")
        if kind == "ack":
            await self._acked(frame)
        elif kind == "msg":
            # The frame is the server's JSON: its room may be anything (then no view has it).
            data: Any = frame.get("d") or {}
            view = self.rooms.get(data.get("room"))
            if view is None:
                return
            for d in view.take(frame["d"]):
                await self._emit({"t": "msg", "d": d})
            if view.held:
                self._catch_up(view)
        elif kind in ("msg.edit", "msg.delete"):
            changed: Any = frame.get("d") or {}
            view = self.rooms.get(changed.get("room"))
            if view is not None and view.changed(frame["d"]) is not None:
                await self._emit(frame)
        else:
            await self._emit(frame)

    async def _acked(self, ack: dict[str, Any]) -> None:
        # The server's JSON: whatever it is, no request or outbox entry may have it.
        id: Any = ack.get("id")
        request = self._requests.get(id)
        if request is not None:
            if final(ack):
                del self._requests[id]
                if ack.get("ok") and request.on_ack is not None:
                    request.on_ack(ack)
                self._resolve(request.future, ack)
                for view in self.rooms.values():
                    if view.joining == id:
                        view.joining = None
            else:
                retry_after = (ack.get("error") or {}).get("retry_after") or 0.0
                pause = backoff_delay(
                    request.attempts - 1, base=self.backoff_base, cap=self.backoff_cap, rand=self.rand
                )
                request.sent, request.due = False, time.monotonic() + max(pause, retry_after)
            self._kick()
            return
        if id not in self.outbox:
            return
        if final(ack):
            self.outbox.settle(id)
            future = self._waiters.pop(id, None)
            if future is not None:
                self._resolve(future, ack)
            await self._emit(ack)
        else:
            self.outbox.retry_later(id, (ack.get("error") or {}).get("retry_after"))
            self.stats[f"retry:{(ack.get('error') or {}).get('code')}"] += 1
        self._kick()

    @staticmethod
    def _resolve(future: asyncio.Future[Any], ack: dict[str, Any]) -> None:
        if future.done():
            return
        if ack.get("ok"):
            future.set_result(ack)
        else:
            future.set_exception(Refused(ack.get("error") or {}))

    def _catch_up(self, view: RoomView) -> None:
        """A gap, or a replay cut short: join again from where the room's messages stop."""
        if view.behind() and view.joining is None and self._ws is not None and view.slug in self.rooms:
            _, future = self._start_join(view)
            future.add_done_callback(lambda f: f.cancelled() or f.exception())

    async def _emit(self, event: dict[str, Any]) -> None:
        if self.on_event is not None:
            result = self.on_event(event)
            if inspect.isawaitable(result):
                await result
        if self._events is not None:
            await self._events.put(event)
