"""A session's rooms: its subscriptions to the hub, and a room's live frames held back while the session joins it.

A join's ack and backlog go first; the room's frames published meanwhile are
held (`held`), then sent after them, without those the backlog already had
(`live_after`). `LiveRooms` is what the hub (messaging/transport/hub.py)
delivers a session's frames to.
"""

from __future__ import annotations

import logging
from typing import Any

from ..chat.private import left_room
from ..core.outcomes import Outcome
from ..core.protocol import encode
from .hub import Hub
from .outgoing import Sender
from .servers import payload_length

log = logging.getLogger("messaging.transport.consumers")


class LiveRooms:
    """The rooms of one session of `user`, whose frames go out through `sender`.

    `own_frames`: the prefixes of the frames not sent back to their own user
    (their `typing` and `presence`).
    """

    __slots__ = ("hub", "user", "sender", "own_frames", "rooms", "held", "held_bytes", "live_after", "attached")

    def __init__(self, hub: Hub, user: Any, sender: Sender, own_frames: tuple[str, ...]) -> None:
        self.hub = hub
        self.user = user
        self.sender = sender
        self.own_frames = own_frames
        self.rooms: set[str] = set()
        # Live frames of a room held back while the session joins it, their
        # bytes, and the room's seq up to which the join's backlog covers its messages.
        self.held: dict[str, list[tuple[int | None, str]]] = {}
        self.held_bytes = 0
        self.live_after: dict[str, int] = {}
        # Whether the hub delivers the user's own frames (`personal`) here.
        self.attached = False

    def publish(self, outcome: Outcome) -> None:
        for room, frame in outcome.broadcasts:
            self.broadcast(room, frame)
        for user_id, only_in, frame in outcome.to_users:
            self.hub.publish_to_user(user_id, only_in, encode(frame))

    async def attach(self) -> None:
        """Have the hub deliver the user's own frames here (`personal`).

        Best effort like a room's live frames: a failure (Redis away) is tried
        again at the session's next join, before that room's frames can come.
        """
        try:
            await self.hub.attach(self.user.pk, self)
        except Exception:
            log.exception("attaching a socket of user %s failed", self.user.pk)
            return
        self.attached = True

    async def detach(self) -> None:
        if self.attached:
            self.attached = False
            try:
                await self.hub.detach(self.user.pk, self)
            except Exception:
                log.exception("detaching the sockets of user %s failed", self.user.pk)

    async def subscribe(self, room: str) -> str | None:
        """Add this session to the room's live frames; returns the room if this call added it."""
        if not self.attached:
            await self.attach()
        if room in self.rooms:
            return None
        try:
            await self.hub.join(room, self)
        except Exception:
            # Live fan-out is best effort; the join itself (membership and
            # backlog) does not depend on it. A later join tries again.
            log.exception("subscribing to room %s failed", room)
            return None
        self.rooms.add(room)
        return room

    async def unsubscribe(self, room: str | None) -> None:
        if room is not None:
            self.rooms.discard(room)
            self.live_after.pop(room, None)
            try:
                await self.hub.leave(room, self)
            except Exception:
                log.exception("unsubscribing from room %s failed", room)

    def broadcast(self, room: str, frame: dict[str, Any]) -> None:
        """Queue a committed and acked effect's frame for everyone in the room.

        The session's next command does not wait for it; the hub publishes
        frames in the order they were queued (messaging/transport/fanout.py).
        """
        seq = frame["d"].get("seq") if frame.get("t") == "msg" else None
        self.hub.publish(room, seq, encode(frame))

    async def live(self, room: str, seq: int | None, text: str) -> None:
        """One live frame of a joined room, from the hub."""
        if seq is None and text.startswith(self.own_frames):
            return
        held = self.held.get(room)
        if held is not None:
            # A join of this room is running: its ack and backlog go first.
            # What is held waits for the client as much as what is queued.
            held.append((seq, text))
            self.held_bytes += payload_length(text)
            buffer = self.sender.buffer
            if self.held_bytes + buffer.waiting > buffer.limit and not buffer.overflowed:
                frames = sum(len(frames) for frames in self.held.values())
                self.held.clear()
                buffer.overflow(frames, self.held_bytes)
                self.held_bytes = 0
        elif seq is None or seq > self.live_after.get(room, 0):
            # A message at or below the join's last seq was in its backlog
            # (or beyond its replay limit, for the client to fetch by seq).
            await self.sender.send_text(text)

    async def membership_ended(self, room: str, text: str) -> None:
        """The hub's check found this session's user no longer a member of `room`, a
        `room.left` lost on its way (messaging/transport/memberships.py): as if it came."""
        if room in self.rooms:
            await self.personal(None, text)

    async def personal(self, room: str | None, text: str) -> None:
        """A frame for this session's user, from the hub; one for a room only
        while this session is joined to it, after a running join's backlog."""
        if room is None:
            left = left_room(text)
            if left is not None and left in self.rooms:
                # Removed or left: no more of the room's frames, from now on.
                self.rooms.discard(left)
                self.live_after.pop(left, None)
                self.hub.forget(left, self)
                # Not awaited: this runs in the hub's listener, which letting go
                # of the room's channel may stop.
                self.hub.release_soon(left)
            await self.sender.send_text(text)
        elif room in self.held or room in self.rooms:
            await self.live(room, None, text)

    async def release_held(self, room: str | None) -> None:
        """After a join's ack and backlog: send what the room published meanwhile."""
        held = self.held.pop(room, None) if room is not None else None
        if held:
            self.held_bytes -= sum(payload_length(text) for _, text in held)
        if held and room in self.rooms:
            for seq, text in held:
                await self.live(room, seq, text)
