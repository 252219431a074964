"""`room.join` with `since_rev`: every change of a room after a rev, oldest first.

A message changed after `since_rev` is sent once, in its current state:

- posted after it: as its `msg` (a tombstone if deleted since, with its
  current body if edited), at the place of its post, so new messages still
  come in seq order;
- posted before it: as the `msg.edit` or `msg.delete` of its latest change,
  at that change's place.

A reaction count changed after it is sent as one `reaction` frame, at the
place of its latest change. PROTOCOL.md allows this ("the latest change of a
message ... as long as the client ends in the same state"). Each frame's
`rev` is its place (a `msg`'s is its post's), so the revs a client gets rise
one frame after another: when `REPLAY_LIMIT` cuts the replay short, a join
from the last rev it got sends the rest, and whatever was sent in a state
newer than its place is sent again from its latest change, which a client
ignores by `version` (or by the highest count).

Three range scans, each bounded by the limit: messages by
(room, posted_rev), messages by (room, rev), counts by (room, rev).
"""
from __future__ import annotations

from typing import Any

from ..models import Message, ReactionCount, Room
from .deletes import delete_frame
from .edits import edit_frame


def changes_since(room: Room, since_rev: int, viewer: Any, *, limit: int) -> list[dict]:
    """The frames that bring a client at `since_rev` to the room's current state, at most `limit`."""
    # Imported here: messaging.commands imports this module for room.join.
    from ..commands import stored_msg_frame
    from ..reactions import reaction_frame

    messages = Message.objects.filter(room=room).select_related("sender")
    placed: list[tuple[int, dict]] = []
    for message in messages.filter(posted_rev__gt=since_rev).order_by("posted_rev")[:limit]:
        frame = stored_msg_frame(message, room.slug, viewer)
        frame["d"]["rev"] = message.posted_rev
        placed.append((message.posted_rev, frame))
    older = messages.filter(posted_rev__lte=since_rev, rev__gt=since_rev).order_by("rev")[:limit]
    for message in older:
        if message.deleted_at is not None:
            placed.append((message.rev, delete_frame(room.slug, message)))
        elif message.edited_at is not None:
            placed.append((message.rev, edit_frame(room.slug, message)))
    counts = (ReactionCount.objects.filter(room=room, rev__gt=since_rev).order_by("rev")
              .values_list("message__seq", "count", "rev")[:limit])
    placed.extend((rev, reaction_frame(room.slug, seq, count, rev)) for seq, count, rev in counts)
    placed.sort(key=lambda entry: entry[0])
    return [frame for _, frame in placed[:limit]]
