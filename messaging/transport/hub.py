"""The hub of one process: its sockets per room and per user, and their live frames delivered in-process.

The fan-out without Redis (the embedded demo), and the base of the Redis
hub (messaging/transport/redis_hub.py), which publishes what this one would
deliver and delivers what its subscription hears. How the two fit and what
each guarantees: messaging/transport/fanout.py.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol

from ..ops import metrics
from .memberships import MembershipWatch

if TYPE_CHECKING:
    from ..conf import MessagingSettings

log = logging.getLogger("messaging.transport.fanout")

# Frames queued for publishing past which the oldest are dropped: a Redis that
# cannot keep up must not grow the process without bound. Rooms' frames and
# users' frames have a queue each.
PUBLISH_BACKLOG = 10_000
# Most publishes sent in one pipelined round trip, of each queue.
PUBLISH_BATCH = 500


def user_key(user_id: Any) -> str:
    """A user as the hub knows it: the id's text, the same for an id from the
    ORM, from SQL or from a channel name (integers and UUIDs alike)."""
    return str(user_id)


class Member(Protocol):
    """A socket as the hub sees it."""

    async def live(self, room: str, seq: int | None, text: str) -> None:
        """Send one live frame of `room`; `seq` is the message's, None for other frames."""

    async def personal(self, room: str | None, text: str) -> None:
        """Send one frame addressed to this socket's user: if `room` is given,
        only while this socket is joined to it."""


class Hub:
    """The sockets of this process per room; delivers to them in-process.

    The base class is the whole fan-out without Redis. `RedisHub` publishes
    instead of delivering, and delivers what its subscription hears.
    """

    @classmethod
    def from_settings(cls, conf: MessagingSettings) -> Hub:
        """The hub the settings describe (`HUB` names the class: messaging/backends.py)."""
        return cls(membership_interval=conf.MEMBERSHIP_CHECK_INTERVAL)

    def __init__(self, *, membership_interval: float = 0.0) -> None:
        self.members: dict[str, set[Member]] = {}
        # Per user (`user_key`), this process's sockets of that user: a tuple,
        # as most users have one socket and a set of one is 216 bytes.
        self.users: dict[str, tuple[Member, ...]] = {}
        self.outbox: deque[tuple[str, int | None, str]] = deque()
        # Frames for one user: (user key, room or None, text).
        self.user_outbox: deque[tuple[str, str | None, str]] = deque()
        self.pump: asyncio.Task[Any] | None = None
        # The private rooms its sockets joined, checked against the database.
        self.memberships = MembershipWatch(membership_interval)
        # `release_soon`'s tasks, held until done.
        self.releasing: set[asyncio.Task[Any]] = set()

    async def join(self, room: str, member: Member) -> None:
        """From return on, `member` gets every frame published to `room`."""
        self.members.setdefault(room, set()).add(member)

    async def leave(self, room: str, member: Member) -> None:
        self.forget(room, member)

    def forget(self, room: str, member: Member) -> None:
        """From now on, no frame of `room` reaches `member` (before any await of `leave`)."""
        self.memberships.unwatch(room, member)  # type: ignore[arg-type]
        members = self.members.get(room)
        if members is not None:
            members.discard(member)
            if not members:
                del self.members[room]

    async def release(self, room: str) -> None:
        """Let go of what the hub holds for `room` if no socket here wants it any more (`RedisHub`: its channel)."""

    def release_soon(self, room: str) -> None:
        """`release`, in a task of its own."""
        task = asyncio.get_running_loop().create_task(self.release(room))
        self.releasing.add(task)
        task.add_done_callback(self.releasing.discard)

    def watch(self, room: str, member: Member) -> None:
        """`member` joined `room`, a private room: its membership is checked from now on."""
        self.memberships.watch(room, member)  # type: ignore[arg-type]

    async def attach(self, user_id: Any, member: Member) -> None:
        """From return on, `member` gets every frame published to the user `user_id`."""
        key = user_key(user_id)
        sockets = self.users.get(key, ())
        if member not in sockets:
            self.users[key] = (*sockets, member)

    async def detach(self, user_id: Any, member: Member) -> None:
        key = user_key(user_id)
        sockets = self.users.get(key)
        if sockets is not None:
            left = tuple(socket for socket in sockets if socket is not member)
            if left:
                self.users[key] = left
            else:
                del self.users[key]

    def publish(self, room: str, seq: int | None, text: str) -> None:
        """Queue one frame for everyone in `room`, and return at once.

        Frames leave in the order they were queued. A socket's own command is
        acked before its broadcast is queued; nothing here waits for a peer.
        """
        queue(self.outbox, (room, seq, text))
        self.start_pump()

    def publish_to_user(self, user_id: Any, room: str | None, text: str) -> None:
        """Queue one frame for the sockets of the user `user_id` (those joined
        to `room`, if given) in every process, and return at once."""
        queue(self.user_outbox, (user_key(user_id), room, text))
        self.start_pump()

    async def aclose(self) -> None:
        """Stop sending (the loop's runtime closes): what is still queued is dropped."""
        pump, self.pump = self.pump, None
        if pump is not None and not pump.done():
            pump.cancel()
            await asyncio.gather(pump, return_exceptions=True)
        await self.memberships.aclose()

    def start_pump(self) -> None:
        if self.pump is None or self.pump.done():
            self.pump = asyncio.create_task(self.send_queued())

    async def send_queued(self) -> None:
        while self.outbox or self.user_outbox:
            await self.send(take(self.outbox), take(self.user_outbox))

    async def send(
        self, batch: list[tuple[str, int | None, str]], to_users: Sequence[tuple[str, str | None, str]] = ()
    ) -> bool:
        """Deliver (`RedisHub`: publish) one batch; whether it went."""
        for room, seq, text in batch:
            await self.deliver(room, seq, text)
        for key, only_in, text in to_users:
            await self.deliver_to_user(key, only_in, text)
        metrics.FANOUT_FRAMES.labels("published").inc(len(batch) + len(to_users))
        return True

    async def deliver_to_user(self, key: str, room: str | None, text: str) -> None:
        for member in self.users.get(key, ()):  # a tuple, replaced (not changed) as sockets come and go
            try:
                await member.personal(room, text)
            except Exception:
                # One broken socket must not keep the frame from the user's others.
                log.warning("a frame for user %s not delivered", key, exc_info=True)

    async def deliver(self, room: str, seq: int | None, text: str) -> None:
        for member in list(self.members.get(room, ())):
            try:
                await member.live(room, seq, text)
            except Exception:
                # One broken socket must not keep the frame from the others.
                log.warning("live frame for room %s not delivered", room, exc_info=True)


def queue(outbox: deque[Any], item: tuple[Any, ...]) -> None:
    """Append to a bounded outbox, dropping (and counting) the oldest when it is full."""
    if len(outbox) >= PUBLISH_BACKLOG:
        outbox.popleft()
        metrics.FANOUT_FRAMES.labels("dropped").inc()
    outbox.append(item)


def take(outbox: deque[Any]) -> list[Any]:
    """The oldest `PUBLISH_BATCH` items of an outbox, taken out of it."""
    return [outbox.popleft() for _ in range(min(len(outbox), PUBLISH_BATCH))]
