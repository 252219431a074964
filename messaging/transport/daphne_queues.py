"""Daphne's queue of a connection's events for its application, kept in a few slots instead of four deques.

For each connection daphne makes an `asyncio.Queue` (`Server.create_application`):
what the protocol puts (`websocket.connect`, each frame received, the
disconnect) and the application takes as its ASGI `receive`. An
`asyncio.Queue` carries three deques (its items, its getters, its putters)
and an `Event` with a fourth, and CPython gives every deque a block of 64
slots from its first day: about 760 bytes each, 3.7 kB a socket with the
objects and their dicts, held for the socket's life although an idle
socket's queue is empty and its one getter waits (docs/PERFORMANCE.md,
"Idle sockets").

`ApplicationQueue` does what daphne and an ASGI application ask of that
queue (`put_nowait`, `get`, `get_nowait`, in the order put, with as many
getters as the application makes, and a cancelled `get` loses nothing), in
three slots: the first item, a deque for the items behind it made only
while more than one waits, and the getters, a list made only while one
waits. Like daphne's it is unbounded: what bounds a socket's frames is the
session's inbox behind it (`INBOX_LIMIT`). It has no
`task_done`/`join`/`maxsize`: neither daphne nor the ASGI `receive` uses them.

`queue_lightly()` makes daphne's `create_application` the same as daphne 4's
with this queue. It replaces only daphne's own method (a server that another
layer already wraps keeps its queue) and is applied by
`sweep_only_due_connections()` before that wraps it. Under another server,
or a daphne this was not checked on, it does nothing.
"""

from __future__ import annotations

import asyncio
import sys
from collections import deque
from functools import partial
from typing import Any

from .versions import checked_daphne

EMPTY: Any = object()


class ApplicationQueue:
    """One connection's events on their way to its application (daphne's input queue), in three slots."""

    __slots__ = ("_first", "_rest", "_getters")

    def __init__(self) -> None:
        self._first: Any = EMPTY
        self._rest: deque[Any] | None = None
        self._getters: list[asyncio.Future[None]] | None = None

    def put_nowait(self, item: Any) -> None:
        if self._first is EMPTY:
            self._first = item
        else:
            if self._rest is None:
                self._rest = deque()
            self._rest.append(item)
        self._wake_a_getter()

    def get_nowait(self) -> Any:
        item = self._first
        if item is EMPTY:
            raise asyncio.QueueEmpty
        rest = self._rest
        if rest:
            self._first = rest.popleft()
        else:
            self._first, self._rest = EMPTY, None
        return item

    async def get(self) -> Any:
        while self._first is EMPTY:
            getter = asyncio.get_running_loop().create_future()
            if self._getters is None:
                self._getters = [getter]
            else:
                self._getters.append(getter)
            try:
                await getter
            except BaseException:
                getter.cancel()
                self._forget(getter)
                # Woken, then cancelled before it could take the item: another getter takes it.
                if self._first is not EMPTY and not getter.cancelled():
                    self._wake_a_getter()
                raise
        return self.get_nowait()

    def qsize(self) -> int:
        if self._first is EMPTY:
            return 0
        return 1 + (len(self._rest) if self._rest else 0)

    def _wake_a_getter(self) -> None:
        getters = self._getters
        while getters:
            getter = getters.pop(0)
            if not getter.done():
                getter.set_result(None)
                break
        if not getters:
            self._getters = None

    def _forget(self, getter: asyncio.Future[None]) -> None:
        getters = self._getters
        if getters is not None and getter in getters:
            getters.remove(getter)
            if not getters:
                self._getters = None


def queue_lightly() -> None:
    """Make daphne's `create_application` give each connection an `ApplicationQueue`; once, under daphne 4 only."""
    server_module = sys.modules.get("daphne.server")
    if server_module is None or not checked_daphne():
        return
    Server = server_module.Server
    daphnes = Server.create_application
    if getattr(daphnes, "__module__", None) != "daphne.server":
        return  # already this module's, or another layer's around daphne's: left as it is

    def create_application(self: Any, protocol: Any, scope: dict[str, Any]) -> ApplicationQueue | None:
        # Daphne 4's, with the lighter queue.
        assert "application_instance" not in self.connections[protocol]
        queue = ApplicationQueue()
        scope.setdefault("asgi", {"version": "3.0"})
        application = self.application(scope=scope, receive=queue.get, send=partial(self.handle_reply, protocol))
        if protocol not in self.connections:
            return None
        self.connections[protocol]["application_instance"] = asyncio.ensure_future(
            application, loop=asyncio.get_event_loop()
        )
        return queue

    Server.create_application = create_application
