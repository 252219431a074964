"""One periodic check of the credentials of every socket on an event loop.

A socket signed in by a credential (a session, an API token) must be closed
soon after that credential ends: a logout, a revocation, an expiry, its user
made inactive. Asking for each socket, or each session, on a timer of its own
costs every idle socket a task and a database read per interval: 2,000 idle
sockets of 2,000 users cost a server process half a core and PostgreSQL
4,000 queries every 5 s (docs/PERFORMANCE.md, "Credential checks of idle
sockets"). Here a loop has one task, and every interval it asks about all of
its sockets' credentials at once, each credential once however many sockets
share it, and closes the sockets of those that ended.

This module knows nothing of Django or Channels: it is given the question
(`check`: the credentials that ended, of those given; an error is no
answer) and, per socket, how to close it. Its set of sockets is the sockets
open on the loop, each added at its connect and removed at its disconnect
(or when it is closed here), so it is bounded by them; the task ends when the
set is empty and starts again with the next socket.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Awaitable, Callable, Collection, Hashable
from typing import Any, Generic, TypeVar

log = logging.getLogger(__name__)

C = TypeVar("C", bound=Hashable)

Check = Callable[[set[C]], Awaitable[Collection[C]]]
Close = Callable[[], Awaitable[Any]]


class CredentialWatch(Generic[C]):
    """The sockets of one event loop by credential, checked together every `interval` seconds.

    A credential that ends is noticed within `interval` plus one check: a
    round starts at most `interval` after the one before it (between 0.75
    and 1 of it, at random, so that processes started together drift apart,
    and the first one at a random point of the first interval). A check that
    fails (a storage outage) closes nothing: the same credentials are asked
    about again next round.
    """

    def __init__(self, check: Check[C], interval: float) -> None:
        if interval <= 0:
            raise ValueError("interval must be positive")
        self.check = check
        self.interval = interval
        self.sockets: dict[Hashable, tuple[C, Close]] = {}
        # How many of the sockets each credential signed in, kept as they come
        # and go: a round copies the keys in C, not a step per socket in Python.
        self.credentials: dict[C, int] = {}
        self.task: asyncio.Task[Any] | None = None

    def __len__(self) -> int:
        return len(self.sockets)

    def add(self, socket: Hashable, credential: C, close: Close) -> None:
        """Watch `socket`, signed in by `credential`; `close()` closes it once the credential ends."""
        self.forget(socket)
        self.sockets[socket] = (credential, close)
        self.credentials[credential] = self.credentials.get(credential, 0) + 1
        if self.task is None or self.task.done():
            self.task = asyncio.get_running_loop().create_task(self.run())

    def discard(self, socket: Hashable) -> None:
        """Stop watching `socket` (gone, or never added)."""
        self.forget(socket)

    def forget(self, socket: Hashable) -> bool:
        """Take `socket` out, if it is watched (whether it was)."""
        watched = self.sockets.pop(socket, None)
        if watched is None:
            return False
        credential = watched[0]
        left = self.credentials[credential] - 1
        if left:
            self.credentials[credential] = left
        else:
            del self.credentials[credential]
        return True

    def stop(self) -> None:
        """End the task (the loop is closing); the sockets are left as they are."""
        if self.task is not None:
            self.task.cancel()

    async def run(self) -> None:
        loop = asyncio.get_running_loop()
        await asyncio.sleep(random.uniform(0, self.interval))
        while self.sockets:
            started = loop.time()
            await self.check_once()
            await asyncio.sleep(max(0.0, self.interval * random.uniform(0.75, 1.0) - (loop.time() - started)))

    async def check_once(self) -> None:
        """Ask about every watched credential once; close the sockets of those that ended."""
        watched = set(self.credentials)
        if not watched:
            return
        try:
            ended = await self.check(watched)
        except Exception:
            # A storage outage is not a logout: keep the sockets, ask again next round.
            log.warning(
                "checking the credentials of %d sockets failed; they stay open", len(self.sockets), exc_info=True
            )
            return
        if not ended:
            return
        ended = set(ended)
        for socket, (credential, close) in list(self.sockets.items()):
            if credential not in ended or not self.forget(socket):
                continue
            try:
                await close()
            except Exception:
                # A socket whose client is already gone (uvicorn raises then)
                # must not keep the other sockets of an ended credential open.
                log.warning("closing a socket whose credential ended failed", exc_info=True)
