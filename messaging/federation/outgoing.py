"""A peer's pending changes: read from the outbox after its cursor per room, written for the link.

The cursor of a peer in a shared room (`PeerRoom.position`) is an event
position of the room: events' positions are gapless per room and in commit
order (docs/EVENTS.md, "Order"), so everything after the cursor is what
the peer has not taken, and nothing committed later can land before it.
A room is pending while its event counter (`Room.last_event`) is past the
cursor. Rooms are served in turns (`after`: the last room of the previous
round), so a busy room does not keep the others waiting.

An event's data is the frame's `d` plus the command's `command_id` and
`user` (docs/EVENTS.md); on the link it is the frame's `d` alone, every user
written `{node, id, name}` (identities.py): a message's `sender`, and a
watermark move's `user`. Events of other types (a host's own) are not sent;
the cursor passes over them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import orjson

from ..core.gateway import Gateway
from ..events.models import Event
from ..models import Room
from .identities import wire_many
from .models import PeerRoom

# What a replica applies (applying.py).
PUSHED = frozenset(
    {
        "message.posted",
        "message.edited",
        "message.deleted",
        "reaction.changed",
        "thread.changed",
        "message.state",
        "member.watermarks",
    }
)
# Rooms looked at in one round.
ROOMS_PER_ROUND = 100

PENDING = """
SELECT c.room_id, r.slug, c.position, r.last_event, r.last_rev
FROM {peerroom} c JOIN {room} r ON r.id = c.room_id
WHERE c.peer = %(peer)s AND r.last_event > c.position
ORDER BY c.room_id <= %(after)s, c.room_id LIMIT %(rooms)s
"""
EVENTS = """
SELECT e.room_id, e.position, e.type, e.data::text, e.created_at
FROM unnest(%(rooms)s::bigint[], %(positions)s::bigint[]) AS c(room_id, position)
CROSS JOIN LATERAL (
    SELECT room_id, position, type, data, created_at FROM {event} e
    WHERE e.room_id = c.room_id AND e.position > c.position ORDER BY e.position LIMIT %(each)s
) e
ORDER BY e.room_id, e.position
"""
ADVANCE = """
UPDATE {peerroom} c SET position = greatest(c.position, a.position)
FROM unnest(%(rooms)s::bigint[], %(positions)s::bigint[]) AS a(room_id, position)
WHERE c.peer = %(peer)s AND c.room_id = a.room_id
RETURNING c.room_id
"""


def sql(text: str) -> str:
    return text.format(peerroom=PeerRoom._meta.db_table, room=Room._meta.db_table, event=Event._meta.db_table)


@dataclass
class RoomBatch:
    """One room's part of a push: its changes for the link, and how far they go."""

    room_id: int
    slug: str
    cursor: int
    last_event: int
    last_rev: int
    changes: list[dict[str, Any]] = field(default_factory=list)
    # The last position read (sent or passed over); None: none read.
    read_upto: int | None = None
    complete: bool = True

    def entry(self) -> dict[str, Any]:
        return {"room": self.slug, "last_rev": self.last_rev, "complete": self.complete, "changes": self.changes}

    def advanced_to(self, taken: Any) -> int | None:
        """The cursor once the peer answered `taken` (the last position it took, or None)."""
        if not self.changes:
            # Nothing to send: what was read was passed over, or the events are gone (pruned).
            return self.read_upto if self.read_upto is not None else self.last_event
        if not isinstance(taken, int):
            return None
        return self.read_upto if taken >= self.changes[-1]["position"] else taken


@dataclass
class Batch:
    rooms: list[RoomBatch]
    oldest: datetime | None = None

    @property
    def changes(self) -> int:
        return sum(len(r.changes) for r in self.rooms)

    def payload(self) -> dict[str, Any]:
        return {"rooms": [room.entry() for room in self.rooms]}


async def pending(gateway: Gateway, peer: str, own: str, after: int, most: int, budget: int) -> Batch:
    """The next push to `peer`: at most `most` changes and about `budget` bytes, from the pending rooms after `after`."""
    rows = await gateway.fetch(sql(PENDING), {"peer": peer, "after": after, "rooms": ROOMS_PER_ROUND})
    rooms = {row[0]: RoomBatch(*row) for row in rows}
    if not rooms:
        return Batch([])
    each = max(1, most // len(rooms))
    events = await gateway.fetch(
        sql(EVENTS),
        {"rooms": list(rooms), "positions": [r.cursor for r in rooms.values()], "each": each + 1},
    )
    read = [(room_id, position, type, orjson.loads(data), at) for room_id, position, type, data, at in events]
    users = await gateway.run(wire_many, _users(read), own)
    batch = Batch(list(rooms.values()))
    used = 0
    counts: dict[int, int] = {}
    for room_id, position, type, data, at in read:
        room = rooms[room_id]
        counts[room_id] = counts.get(room_id, 0) + 1
        if counts[room_id] > each or used > budget or batch.changes >= most:
            room.complete = False
            continue
        room.read_upto = position
        if type not in PUSHED:
            continue
        change = {"position": position, "type": type, "data": for_the_link(type, data, users)}
        used += len(orjson.dumps(change))
        room.changes.append(change)
        batch.oldest = at if batch.oldest is None or at < batch.oldest else batch.oldest
    return batch


def _users(read: list[tuple[Any, ...]]) -> set[Any]:
    ids: set[Any] = set()
    for _, _, type, data, _ in read:
        if type == "message.posted" and isinstance(data.get("sender"), dict):
            ids.add(data["sender"].get("id"))
        elif type == "member.watermarks":
            ids.add(data.get("user"))
    return ids


def for_the_link(type: str, data: dict[str, Any], users: dict[Any, dict[str, Any]]) -> dict[str, Any]:
    """An event's data as the link carries it: the frame's `d`, users by their home identity."""
    out = {key: value for key, value in data.items() if key not in ("command_id", "user")}
    if type == "message.posted" and isinstance(data.get("sender"), dict):
        out["sender"] = users.get(data["sender"].get("id"))
    elif type == "member.watermarks":
        out["user"] = users.get(data.get("user"))
    return out


async def advance(gateway: Gateway, peer: str, positions: dict[int, int]) -> None:
    """Move the peer's cursors forward (never back: two pushers at once cannot undo each other)."""
    if positions:
        await gateway.fetch(
            sql(ADVANCE), {"peer": peer, "rooms": list(positions), "positions": list(positions.values())}
        )
