"""`room.join` with `since_rev`: every change of a room after a rev, oldest first.

Each thing a change touched is sent once, in its current state, at the
place (`rev`) of one of its changes:

- a message posted after `since_rev`: its `msg` (a tombstone if deleted
  since, with its current body if edited), at its post's place, so new
  messages still come in seq order;
- a message posted before it: the `msg.edit` or `msg.delete` of its latest
  change, at that change's place;
- a root whose thread got a reply after `since_rev`: one `thread` frame, at
  its latest change's place (its own rev, the one after its reply's:
  messaging/chat/threads.py);
- an emoji whose count changed after it: one `reactions` frame, at its
  latest change's place (messaging/chat/emoji.py);
- what an app beside the chat changed (its `on_replay` hook,
  messaging/chat/hooks.py): a reaction count is one `reaction` frame, at
  its latest change's place.

PROTOCOL.md allows this ("the latest change of a message ... as long as the
client ends in the same state"). The replay covers the changes up to the
ack's `last_rev` (read before it: later ones arrive live, the socket
subscribed first), at most `REPLAY_LIMIT` frames and half of
`MAX_SEND_BUFFER` in bytes (so that a page of long messages fits what an
event stream holds before its first event, messaging/transport/events.py).
Its frames' revs are safe resume points: the replay is "cut" at `last_rev`, or, when the limit
cuts it short, at the place of the last frame sent (never between two
frames of one place); a frame carries the rev
of the state it shows where that is at most the cut, else its place. So the
highest rev a client got says where to resume: everything up to it is
reflected in what it holds, and whatever changed after it is sent again
from its latest change (a client ignores what it already shows by
`version`, or by the highest count).

Range scans, each bounded by the limit: messages by (room, posted_rev),
messages by (room, rev), and a hook's (the counts by (room, rev)).
"""

from __future__ import annotations

from typing import Any, cast

import orjson
from django.db.models import F

from ..models import Message, Room
from .deletes import delete_frame
from .edits import edit_frame
from .emoji import changed_tallies
from .hooks import replay_hooks
from .messages import stored_msg_frame
from .shown import with_reactions
from .threads import changed_threads

# A frame of a replay: its place (the rev of the change it is sent for), the rev of the state it shows, the frame.
Placed = tuple[int, int, dict[str, Any]]


def changes_since(
    room: Room, since_rev: int, viewer: Any, *, limit: int, max_bytes: int = 0
) -> tuple[list[dict[str, Any]], int]:
    """The frames that bring a client at `since_rev` to the room's state at
    `room.last_rev`, at most `limit` and `max_bytes` of JSON (0: any), and the rev they bring it to: the cut
    (see the module's docstring). A replay hook returns its entries in place
    order, at most the `limit` it is given."""
    upto = room.last_rev
    if since_rev >= upto:
        return [], upto
    messages = Message.objects.filter(room=room).select_related("sender", "thread")
    # Each source is read one row past the limit: one that has more left than
    # the limit is known only up to its `limit`-th place (its horizon), and
    # nothing of any source is sent past the nearest horizon.
    posts = messages.filter(posted_rev__gt=since_rev, posted_rev__lte=upto).order_by("posted_rev")[: limit + 1]
    # rev > posted_rev follows from the other bounds; said, so that the partial index serves it.
    changed = (
        messages.filter(posted_rev__lte=since_rev, rev__gt=since_rev, rev__lte=upto)
        .filter(rev__gt=F("posted_rev"))
        .order_by("rev")[: limit + 1]
    )
    posted = list(posts)
    frames = [stored_msg_frame(m, room.slug, viewer) for m in posted]
    with_reactions([frame["d"] for frame in frames], posted, viewer)
    # Per source, (place, rev of the state shown, frame), in place order.
    sources: list[list[Placed]] = [
        # Filtered on their revs: none is null.
        [(cast(int, m.posted_rev), cast(int, m.rev), frame) for m, frame in zip(posted, frames, strict=True)],
        [
            (
                cast(int, m.rev),
                cast(int, m.rev),
                delete_frame(room.slug, m) if m.deleted_at is not None else edit_frame(room.slug, m),
            )
            for m in changed
            if m.deleted_at is not None or m.edited_at is not None
        ],
        changed_threads(room, since_rev, upto, limit + 1),
        changed_tallies(room, since_rev, upto, limit + 1),
        *(changes(room, since_rev, upto, limit + 1) for changes in replay_hooks()),
    ]
    horizon = min([source[limit - 1][0] for source in sources if len(source) > limit], default=upto)
    placed: list[Placed] = sorted(
        (entry for source in sources for entry in source if entry[0] <= horizon), key=lambda e: e[0]
    )
    sent = within(placed, limit, max_bytes)
    cut = sent[-1][0] if len(placed) > len(sent) else horizon
    frames = []
    for place, shown, frame in sent:
        frame["d"]["rev"] = shown if shown <= cut else place
        frames.append(frame)
    return frames, cut


def within(placed: list[Placed], limit: int, max_bytes: int) -> list[Placed]:
    """The first of `placed` (in place order) that a replay sends: at most `limit` of them and
    `max_bytes` of JSON (0: any), never two frames of one place apart; the first place goes whole."""
    sent = placed[:limit]
    if max_bytes:
        size = 0
        for n, (_, _, frame) in enumerate(sent):
            # (Each frame's rev is set once the cut is known: its size here is within a few bytes.)
            size += len(orjson.dumps(frame))
            if size > max_bytes:
                sent = sent[:n]
                break
    if len(placed) > len(sent):
        # Those of the first place left out go, all of them.
        left_out = placed[len(sent)][0]
        sent = [entry for entry in sent if entry[0] < left_out] or [e for e in placed if e[0] == placed[0][0]]
    return sent
