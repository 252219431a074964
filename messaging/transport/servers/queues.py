"""A connection's queues, kept small while they are empty, as they are for most of its life.

`ApplicationQueue`: a connection's events on their way to its application, in three slots.

Daphne and uvicorn each give a connection an `asyncio.Queue` for what the
server puts (`websocket.connect`, each frame received, the disconnect) and
the application takes as its ASGI `receive`. An `asyncio.Queue` carries
three deques and an `Event` with a fourth, each a block of 64 slots from its
first day: 3.7 kB while empty, for the connection's life. This queue keeps
the first item, a deque for the items behind it made only while more than
one waits, and its getters, a list made only while one waits.
daphne_queues.py gives it to daphne's connections, uvicorn.py to uvicorn's.

It does what those servers and an ASGI application ask of their queue
(`put_nowait`, `get`, `get_nowait`, `empty`, `qsize`), in the order put, with
as many getters as the application makes, and a cancelled `get` loses
nothing. Like theirs it is unbounded: what bounds a socket's frames is the
session's inbox behind it (`INBOX_LIMIT`). It has no `task_done`, `join` or
`maxsize`: no server or ASGI `receive` uses them.

`SendQueue`: autobahn's queue of chopped and synchronous writes, which
daphne never asks for, as a deque made only while something waits in it
(servers/daphne_idle.py's `release_handshake` puts it in place).

`Flag`: an `asyncio.Event` (`set`, `clear`, `is_set`, `wait`) whose
waiters are a list made only while one waits; an `Event` keeps a deque of
64 slots (0.6 kB) from its first day. Uvicorn gives each connection one,
`writable`, which only a send past the transport's pushback waits on
(servers/uvicorn.py puts a `Flag` in its place).
"""

from __future__ import annotations

import asyncio
from collections import deque
from typing import Any

EMPTY: Any = object()


class ApplicationQueue:
    """One connection's events on their way to its application (its ASGI `receive`), in three slots."""

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

    def empty(self) -> bool:
        return self._first is EMPTY

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


class SendQueue:
    """Autobahn's `send_queue` (its chopped and synchronous writes, which daphne never asks for), as a deque made only
    while something waits: an empty deque is 0.76 kB, and every connection kept one for its life."""

    __slots__ = ("waiting",)

    def __init__(self) -> None:
        self.waiting: deque[Any] | None = None

    def __len__(self) -> int:
        waiting = self.waiting
        return 0 if waiting is None else len(waiting)

    def append(self, item: Any) -> None:
        if self.waiting is None:
            self.waiting = deque()
        self.waiting.append(item)

    def popleft(self) -> Any:
        if self.waiting is None:
            raise IndexError("pop from an empty send queue")
        item = self.waiting.popleft()
        if not self.waiting:
            self.waiting = None
        return item


class Flag:
    """`asyncio.Event`'s `set`, `clear`, `is_set` and `wait`, with a list of waiters made only while one waits."""

    __slots__ = ("_value", "_waiters")

    def __init__(self, value: bool = False) -> None:
        self._value = value
        self._waiters: list[asyncio.Future[bool]] | None = None

    def is_set(self) -> bool:
        return self._value

    def set(self) -> None:
        """Set the flag and wake every waiter, as `Event.set` does."""
        if self._value:
            return
        self._value = True
        waiters, self._waiters = self._waiters, None
        for waiter in waiters or ():
            if not waiter.done():
                waiter.set_result(True)

    def clear(self) -> None:
        self._value = False

    async def wait(self) -> bool:
        if self._value:
            return True
        waiter = asyncio.get_running_loop().create_future()
        if self._waiters is None:
            self._waiters = [waiter]
        else:
            self._waiters.append(waiter)
        try:
            await waiter
            return True
        finally:
            waiters = self._waiters
            if waiters is not None and waiter in waiters:
                waiters.remove(waiter)
                if not waiters:
                    self._waiters = None
