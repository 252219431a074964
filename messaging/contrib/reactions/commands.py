"""The "+1" reaction: a custom command type built on the public extension API.

`reaction.add` adds one to a message's counter. Unlike a receipt, applying it
twice counts twice, so it is registered with the default `exactly_once=True`:
the claim, the durable record committed with the increment, and the replayed
ack are the same machinery that keeps `room.post` single. A host project's own
types are written the same way (docs/INTEGRATION.md), and so are the counts
a join sends: through the chat's public join hook (messaging/chat/hooks.py).

Frames (an extension of protocol v1, docs/PROTOCOL.md):

- command `{"t": "reaction.add", "d": {"room": slug, "seq": n}}`, ack `d`:
  `{"room", "seq", "count"}`, the count right after this reaction was applied;
- broadcast `{"t": "reaction", "d": {"room", "seq", "count", "rev"}}` to the
  room, `rev` the room's rev of this change (PROTOCOL 1.1), taken before the
  count's upsert in the same transaction; a reaction to a deleted message is
  `invalid`;
- after a `room.join` backlog, one `reaction` frame per backlog message that
  has reactions; with `reactions_from` in the join, first one per message
  from that seq up to the backlog that has reactions (the newest
  `REPLAY_LIMIT`), so a client that was away learns the counts of the
  messages it already shows;
- in a `room.join` with `since_rev`, one `reaction` frame per count changed
  after it (`on_replay`), and after a `room.history` page, the page's counts
  (`on_page`).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, cast

from django.db import connection

from ...chat.edits import MessageRef, live_message_id, validate_message_ref
from ...chat.hooks import on_join, on_page, on_replay
from ...chat.revs import next_rev
from ...chat.rooms import joined_room_id
from ...conf import get_settings
from ...core.handlers import CommandContext, command
from ...core.protocol import optional_seq
from ...core.sql import statement
from ...events.outbox import emit
from ...federation.applying import Frames, on_replicated
from ...models import Message, Room
from .models import ReactionCount


def reaction_frame(room: str, seq: int, count: int, rev: int | None = None) -> dict[str, Any]:
    return {"t": "reaction", "d": {"room": room, "seq": seq, "count": count, "rev": rev}}


# PostgreSQL's and SQLite's upsert alike.
INCREMENT = statement(__package__, "increment")


def increment(message_id: int, room_id: int, rev: int) -> int:
    """Add one to the message's count in one statement, creating the row on first use,
    and mark it with the room's `rev` of this change.

    An upsert, so two first reactions racing cannot both insert; the row lock
    it takes is held until commit, so concurrent reactions queue on it.
    """
    with connection.cursor() as cursor:
        cursor.execute(INCREMENT.format(table=ReactionCount._meta.db_table), [message_id, room_id, rev])
        count: int = cursor.fetchone()[0]
        return count


@command("reaction.add", validate=validate_message_ref)
def add_reaction(ctx: CommandContext, reaction: MessageRef) -> dict[str, Any]:
    room_id = joined_room_id(ctx.user, reaction.room)
    message_id = live_message_id(room_id, reaction.room, reaction.seq)
    # The room's row lock (the rev) before the count's, as posts and edits take it.
    rev, position = next_rev(room_id)
    count = increment(message_id, room_id, rev)
    frame = reaction_frame(reaction.room, reaction.seq, count, rev)
    emit(ctx, "reaction.changed", reaction.room, frame["d"], at=(room_id, position))
    ctx.broadcast(reaction.room, frame)
    return {"room": reaction.room, "seq": reaction.seq, "count": count}


def range_reactions(room: Room, first: int, last: int, *, limit: int) -> list[dict[str, Any]]:
    """`reaction` frames for the room's messages with seq in [first, last] that
    have any: the newest `limit` of them, in seq order."""
    if last < first:
        return []
    counts = (
        ReactionCount.objects.filter(message__room=room, message__seq__gte=first, message__seq__lte=last, count__gt=0)
        .order_by("-message__seq")
        .values_list("message__seq", "count", "rev")[:limit]
    )
    return [reaction_frame(room.slug, seq, count, rev) for seq, count, rev in reversed(list(counts))]


def backlog_reactions(room: str, messages: Iterable[Message]) -> list[dict[str, Any]]:
    """`reaction` frames for the messages of a backlog that have any, in seq order."""
    counts = ReactionCount.objects.filter(message__in=[m.pk for m in messages], count__gt=0)
    rows = counts.order_by("message__seq").values_list("message__seq", "count", "rev")
    return [reaction_frame(room, seq, count, rev) for seq, count, rev in rows]


def reactions_from(d: dict[str, Any]) -> int | None:
    """An extension of `room.join`: the lowest seq the client shows, whose counts it wants again."""
    return optional_seq(d, "reactions_from")


def join_replies(ctx: CommandContext, room: Room, since: int | None, backlog: list[Message]) -> list[dict[str, Any]]:
    """The `reaction` frames of a join, after its backlog, in seq order."""
    replies: list[dict[str, Any]] = []
    if since is not None:
        # The messages the client has, below the backlog: their counts may
        # have moved while it was away. Sent before the backlog's, so all the
        # `reaction` frames come in seq order.
        below = backlog[0].seq - 1 if backlog else room.last_seq
        replies.extend(range_reactions(room, since, below, limit=get_settings().REPLAY_LIMIT))
    replies.extend(backlog_reactions(room.slug, backlog))
    return replies


on_join("reactions", join_replies, validate=reactions_from)


def changed_counts(room: Room, since_rev: int, upto: int, limit: int) -> list[tuple[int, int, dict[str, Any]]]:
    """A `since_rev` replay's counts (messaging/chat/replay.py): each count
    changed in (since_rev, upto], one `reaction` frame at its latest change."""
    counts = (
        ReactionCount.objects.filter(room=room, rev__gt=since_rev, rev__lte=upto)
        .order_by("rev")
        .values_list("message__seq", "count", "rev")[:limit]
    )
    # Filtered on their revs: none is null.
    return [(cast(int, rev), cast(int, rev), reaction_frame(room.slug, seq, count, rev)) for seq, count, rev in counts]


on_replay("reactions", changed_counts)
on_page("reactions", backlog_reactions)


def replicated(room: Room, d: dict[str, Any], frames: Frames) -> None:
    """A count of a room of another deployment, as its home sends it (messaging/federation):
    kept with its rev where it is newer than the replica's, and told to the room."""
    if "emoji" in d:
        return  # an emoji's count (`reaction.set`, messaging/chat/emoji.py): the replica applies those itself
    # Another deployment's JSON: checked below.
    seq: Any = d.get("seq")
    count, rev = d.get("count"), d.get("rev")
    message_id = Message.objects.filter(room=room, seq=seq).values_list("pk", flat=True).first()
    if message_id is None or not isinstance(count, int) or not isinstance(rev, int):
        return
    kept, created = ReactionCount.objects.select_for_update().get_or_create(
        message_id=message_id, defaults={"count": count, "room": room, "rev": rev}
    )
    if not created:
        if kept.rev is not None and kept.rev >= rev:
            return
        kept.count, kept.room, kept.rev = count, room, rev
        kept.save(update_fields=["count", "room", "rev"])
    frames.room(room.slug, reaction_frame(room.slug, seq, count, rev))


on_replicated("reaction.changed", replicated, frame="reaction")
