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

from ...chat.hooks import on_join
from ...chat.rooms import joined_room_id
from ...conf import get_settings
from ...core.exceptions import Invalid
from ...core.handlers import CommandContext, command
from ...core.protocol import optional_seq, room_slug
from ...core.sql import statement
from ...events.outbox import emit
from ...models import Message, Room
from .models import ReactionCount


@dataclass(frozen=True)
class Reaction:
    room: str
    seq: int


def validate_reaction(d: dict) -> Reaction:
    seq = optional_seq(d, "seq")
    if seq is None or seq < 1:
        raise Invalid("seq must be an integer >= 1")
    return Reaction(room=room_slug(d), seq=seq)


def reaction_frame(room: str, seq: int, count: int) -> dict:
    return {"t": "reaction", "d": {"room": room, "seq": seq, "count": count}}


# PostgreSQL's and SQLite's upsert alike.
INCREMENT = statement(__package__, "increment")


def increment(message_id: int) -> int:
    """Add one to the message's count in one statement, creating the row on first use.

    An upsert, so two first reactions racing cannot both insert; the row lock
    it takes is held until commit, so concurrent reactions queue on it.
    """
    with connection.cursor() as cursor:
        cursor.execute(INCREMENT.format(table=ReactionCount._meta.db_table), [message_id])
        return cursor.fetchone()[0]


@command("reaction.add", validate=validate_reaction)
def add_reaction(ctx: CommandContext, reaction: Reaction) -> dict:
    room_id = joined_room_id(ctx.user, reaction.room)
    message_id = Message.objects.filter(room_id=room_id, seq=reaction.seq).values_list("id", flat=True).first()
    if message_id is None:
        raise Invalid(f"no message {reaction.seq} in room {reaction.room}")
    count = increment(message_id)
    frame = reaction_frame(reaction.room, reaction.seq, count)
    # After the count's row: the room's row, which the event takes, is an effect's last lock.
    emit(ctx, "reaction.changed", reaction.room, frame["d"])
    ctx.broadcast(reaction.room, frame)
    return {"room": reaction.room, "seq": reaction.seq, "count": count}


def range_reactions(room: Room, first: int, last: int, *, limit: int) -> list[dict]:
    """`reaction` frames for the room's messages with seq in [first, last] that
    have any: the newest `limit` of them, in seq order."""
    if last < first:
        return []
    counts = (
        ReactionCount.objects.filter(message__room=room, message__seq__gte=first, message__seq__lte=last, count__gt=0)
        .order_by("-message__seq")
        .values_list("message__seq", "count")[:limit]
    )
    return [reaction_frame(room.slug, seq, count) for seq, count in reversed(list(counts))]


def backlog_reactions(room: str, messages: Iterable[Message]) -> list[dict]:
    """`reaction` frames for the messages of a backlog that have any, in seq order."""
    counts = ReactionCount.objects.filter(message__in=[m.pk for m in messages], count__gt=0)
    return [reaction_frame(room, seq, count) for seq, count in counts.order_by("message__seq").values_list("message__seq", "count")]


def reactions_from(d: dict) -> int | None:
    """An extension of `room.join`: the lowest seq the client shows, whose counts it wants again."""
    return optional_seq(d, "reactions_from")


def join_replies(ctx: CommandContext, room: Room, since: int | None, backlog: list[Message]) -> list[dict]:
    """The `reaction` frames of a join, after its backlog, in seq order."""
    replies: list[dict] = []
    if since is not None:
        # The messages the client has, below the backlog: their counts may
        # have moved while it was away. Sent before the backlog's, so all the
        # `reaction` frames come in seq order.
        below = backlog[0].seq - 1 if backlog else room.last_seq
        replies.extend(range_reactions(room, since, below, limit=get_settings().REPLAY_LIMIT))
    replies.extend(backlog_reactions(room.slug, backlog))
    return replies


on_join("reactions", join_replies, validate=reactions_from)
