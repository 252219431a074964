"""The private rooms a process's sockets hear, checked against the database.

A membership ends in the database (`room.leave`, `room.remove`: messaging/chat/private.py;
or an admin's delete), and the member's sockets stop hearing the room when
their `room.left` frame reaches them: a frame for the user, over Redis
Pub/Sub like every live frame, at most once (messaging/transport/fanout.py).
A frame lost on its way (the publish failed, or a process's subscription was
down meanwhile), or never sent (an admin's delete), would leave a removed
member's sockets hearing a private room until they reconnect.

`MembershipWatch` is the backstop: per process, the sockets joined to each
private room, by the join that let them in. It reads their memberships again
from the database, in a few queries of at most `CHECK_BATCH` pairs each:

- as the process's Pub/Sub subscription connects again after a failure,
  before it hands on any frame it hears from then on: whatever was lost
  while it was away, a membership that ended before then is found;
- every `MEMBERSHIP_CHECK_INTERVAL` seconds, for one whose `room.left` was
  never heard although the subscription stayed up (a publish that failed on
  another process, an admin's delete).

A socket whose user is no longer a member hears no more of the room from
that moment (it leaves the hub's room at once), and gets `room.left` with
`by: null`, as the lost frame would have told it. Public rooms are not
watched: anyone may join them again, and hear them.
"""

from __future__ import annotations

import asyncio
import contextvars
import itertools
import logging
from typing import Any, Protocol

from ..chat.private import left_frame
from ..chat.rooms import memberships_among
from ..core.protocol import encode
from ..core.runtime import runtime

log = logging.getLogger(__name__)

# The most (room, user) pairs one query checks.
CHECK_BATCH = 1000


class Watched(Protocol):
    """A socket as the watch sees it."""

    user: Any

    async def membership_ended(self, room: str, text: str) -> None:
        """Its user is no longer a member of `room`: hear no more of it, and send `text` (`room.left`)."""


class MembershipWatch:
    def __init__(self, interval: float) -> None:
        self.interval = interval
        # Per private room, its sockets here, each with the number of the join that let it in.
        self.rooms: dict[str, dict[Watched, int]] = {}
        self.joins = itertools.count(1)
        self.task: asyncio.Task[Any] | None = None
        self.checking: asyncio.Lock | None = None

    def watch(self, room: str, socket: Watched) -> None:
        """`socket` joined the private room `room`: its user was a member when the join ran."""
        self.rooms.setdefault(room, {})[socket] = next(self.joins)
        if self.interval > 0 and (self.task is None or self.task.done()):
            # Not in the context of the join that started it (its log scope).
            self.task = asyncio.get_running_loop().create_task(self.every_interval(), context=contextvars.Context())

    def unwatch(self, room: str, socket: Watched) -> None:
        sockets = self.rooms.get(room)
        if sockets is not None:
            sockets.pop(socket, None)
            if not sockets:
                del self.rooms[room]

    def pairs(self) -> int:
        return sum(len(sockets) for sockets in self.rooms.values())

    async def every_interval(self) -> None:
        while self.rooms:
            await asyncio.sleep(self.interval)
            try:
                await self.check()
            except Exception:
                log.exception("checking the memberships of private rooms failed")

    async def check(self) -> int:
        """Read the watched memberships again; tell each socket whose user's has ended. How many were told."""
        if self.checking is None:
            self.checking = asyncio.Lock()
        # One check at a time: a reconnect's waits for a periodic one that is running.
        async with self.checking:
            told = 0
            for batch in self.batches():
                told += await self.check_batch(batch)
            return told

    def batches(self) -> list[list[tuple[str, Watched, int]]]:
        """What is watched now, in batches of at most `CHECK_BATCH` pairs (a room's sockets may span two)."""
        pairs = [(room, socket, join) for room, sockets in self.rooms.items() for socket, join in sockets.items()]
        return [pairs[i : i + CHECK_BATCH] for i in range(0, len(pairs), CHECK_BATCH)]

    async def check_batch(self, batch: list[tuple[str, Watched, int]]) -> int:
        rooms = sorted({room for room, _, _ in batch})
        users = list({str(socket.user.pk): socket.user.pk for _, socket, _ in batch}.values())
        try:
            members = await runtime().gateway.run(memberships_among, rooms, users)
        except Exception:
            # A database outage is not a removal: keep the sockets, ask again later.
            log.warning("checking %d memberships of private rooms failed", len(batch), exc_info=True)
            return 0
        told = 0
        for room, socket, join in batch:
            if (room, str(socket.user.pk)) in members:
                continue
            # Only the join that was checked: the socket may have left and joined again meanwhile.
            if self.rooms.get(room, {}).get(socket) != join:
                continue
            self.unwatch(room, socket)
            log.info("user %s is no longer a member of room %s: its socket is told", socket.user.pk, room)
            try:
                await socket.membership_ended(room, encode(left_frame(room, socket.user, None)))
                told += 1
            except Exception:
                log.warning("telling a socket of user %s it left room %s failed", socket.user.pk, room, exc_info=True)
        return told

    async def aclose(self) -> None:
        task, self.task = self.task, None
        if task is not None and not task.done():
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
