"""The "+1" reaction: a custom command type built on the public extension API.

`reaction.add` adds one to a message's counter. Unlike a receipt, applying it
twice counts twice, so it is registered with the default `exactly_once=True`:
the claim, the durable record committed with the increment, and the replayed
ack are the same machinery that keeps `room.post` single. A host project's own
types are written the same way (docs/INTEGRATION.md).

Frames (an extension of protocol v1, docs/PROTOCOL.md):

- command `{"t": "reaction.add", "d": {"room": slug, "seq": n}}`, ack `d`:
  `{"room", "seq", "count"}`, the count right after this reaction was applied;
- broadcast `{"t": "reaction", "d": {"room", "seq", "count"}}` to the room;
- after a `room.join` backlog, one `reaction` frame per backlog message that
  has reactions; with `reactions_from` in the join, first one per message
  from that seq up to the backlog that has reactions (the newest
  `REPLAY_LIMIT`), so a client that was away learns the counts of the
  messages it already shows.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

from django.db import connection

from .chat.edits import message_seq
from .chat.revs import next_rev
from .chat.rooms import joined_room_id
from .core.exceptions import Invalid
from .core.handlers import CommandContext, command
from .core.protocol import room_slug
from .models import Message, ReactionCount, Room


@dataclass(frozen=True)
class Reaction:
    room: str
    seq: int


def validate_reaction(d: dict) -> Reaction:
    return Reaction(room=room_slug(d), seq=message_seq(d))


def reaction_frame(room: str, seq: int, count: int, rev: int | None = None) -> dict:
    return {"t": "reaction", "d": {"room": room, "seq": seq, "count": count, "rev": rev}}


def increment(message_id: int, room_id: int, rev: int) -> int:
    """Add one to the message's count in one statement, creating the row on first use,
    and mark it with the room's `rev` of this change.

    An upsert, so two first reactions racing cannot both insert; the row lock
    it takes is held until commit, so concurrent reactions queue on it.
    """
    table = ReactionCount._meta.db_table
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {table} (message_id, count, room_id, rev) VALUES (%s, 1, %s, %s) "
            f"ON CONFLICT (message_id) DO UPDATE SET count = {table}.count + 1, room_id = EXCLUDED.room_id,"
            f" rev = EXCLUDED.rev RETURNING count",
            [message_id, room_id, rev],
        )
        return cursor.fetchone()[0]


@command("reaction.add", validate=validate_reaction)
def add_reaction(ctx: CommandContext, reaction: Reaction) -> dict:
    room_id = joined_room_id(ctx.user, reaction.room)
    found = Message.objects.filter(room_id=room_id, seq=reaction.seq).values_list("id", "deleted_at").first()
    if found is None:
        raise Invalid(f"no message {reaction.seq} in room {reaction.room}")
    message_id, deleted_at = found
    if deleted_at is not None:
        raise Invalid(f"message {reaction.seq} is deleted")
    # The room's row lock (the rev) before the count's, as posts and edits take it.
    rev = next_rev(room_id)
    count = increment(message_id, room_id, rev)
    ctx.broadcast(reaction.room, reaction_frame(reaction.room, reaction.seq, count, rev))
    return {"room": reaction.room, "seq": reaction.seq, "count": count}


def range_reactions(room: Room, first: int, last: int, *, limit: int) -> list[dict]:
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


def backlog_reactions(room: str, messages: Iterable[Message]) -> list[dict]:
    """`reaction` frames for the messages of a backlog that have any, in seq order."""
    counts = ReactionCount.objects.filter(message__in=[m.pk for m in messages], count__gt=0)
    rows = counts.order_by("message__seq").values_list("message__seq", "count", "rev")
    return [reaction_frame(room, seq, count, rev) for seq, count, rev in rows]
