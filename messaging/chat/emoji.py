"""Emoji reactions (PROTOCOL.md 1.2): `reaction.set`, one count per user, emoji and message.

`reaction.set` (`room`, `seq`, `emoji`, `on`) is exactly once: a copy gets
the original ack, `{room, seq, emoji, on, count}`, `count` the number of
users with that emoji on that message right after this command. It puts the
user's emoji on (`on: true`) or takes it off (`on: false`); either way a
command that changes nothing (already on, already off) is ok, takes no rev
and sends no frame. A change takes the room's next rev and sends the room
`{"t": "reactions", "d": {room, seq, emoji, count, rev}}`, with its
`reaction.changed` event (docs/EVENTS.md).

An emoji is 1-16 characters with no whitespace or control character (one
emoji may be several code points: a skin tone, a flag, a family joined by
zero-width joiners). A message carries at most `REACTION_EMOJI_MAX`
distinct emoji: a new one past it is `invalid`; users still add themselves
to those it has.

A deleted message takes no reactions (`invalid`), and its delete removes
those it had (messaging/chat/deletes.py): its tombstone shows none.

Locks, in order: the room's row (taken first, before anything is read, so
two users' first reactions with one emoji queue there and count right),
then the reaction rows. A delete takes the room's before the rows it
removes too.

The 1.1 extension `reaction.add` ("+1", `messaging.contrib.reactions`) is
left as it is, a counter of its own beside these: a host that installs it
keeps its counts and frames (`reaction`); its "+1" is not one of these emoji.
"""

from __future__ import annotations

import unicodedata
from dataclasses import dataclass
from typing import Any

from django.db.models import F

from ..conf import get_settings
from ..core.exceptions import Invalid
from ..core.handlers import CommandContext, command
from ..core.protocol import room_slug
from ..events.outbox import emit
from ..models import Message, Room
from .edits import live_message_id, message_seq
from .models import Reaction, ReactionTally
from .revs import next_rev
from .rooms import joined_room_id

EMOJI_CHARS = 16
# Control characters, and the separators that are whitespace.
REFUSED_CATEGORIES = frozenset({"Cc", "Zs", "Zl", "Zp", "Cs"})


@dataclass(frozen=True)
class SetReaction:
    room: str
    seq: int
    emoji: str
    on: bool


def valid_emoji(value: Any) -> str:
    if not isinstance(value, str) or not 1 <= len(value) <= EMOJI_CHARS:
        raise Invalid(f"emoji must be a string of 1-{EMOJI_CHARS} characters")
    for char in value:
        if char.isspace() or unicodedata.category(char) in REFUSED_CATEGORIES:
            raise Invalid("emoji may hold no whitespace or control character")
    return value


def validate_set(d: dict[str, Any]) -> SetReaction:
    on = d.get("on")
    if not isinstance(on, bool):
        raise Invalid("on must be true or false")
    return SetReaction(room=room_slug(d), seq=message_seq(d), emoji=valid_emoji(d.get("emoji")), on=on)


def reactions_frame(room: str, seq: int, emoji: str, count: int, rev: int | None) -> dict[str, Any]:
    return {"t": "reactions", "d": {"room": room, "seq": seq, "emoji": emoji, "count": count, "rev": rev}}


def count_of(message_id: int, emoji: str) -> int:
    found = ReactionTally.objects.filter(message_id=message_id, emoji=emoji).values_list("count", flat=True).first()
    return found or 0


@command("reaction.set", validate=validate_set)
def set_reaction(ctx: CommandContext, reaction: SetReaction) -> dict[str, Any]:
    room_id = joined_room_id(ctx.user, reaction.room)
    Room.objects.select_for_update().filter(pk=room_id).values_list("pk", flat=True).get()
    message_id = live_message_id(room_id, reaction.room, reaction.seq)
    ack = {"room": reaction.room, "seq": reaction.seq, "emoji": reaction.emoji, "on": reaction.on}
    mine = Reaction.objects.filter(message_id=message_id, user=ctx.user, emoji=reaction.emoji)
    if mine.exists() == reaction.on:
        return {**ack, "count": count_of(message_id, reaction.emoji)}
    tallies = ReactionTally.objects.filter(message_id=message_id)
    if reaction.on and not tallies.filter(emoji=reaction.emoji, count__gt=0).exists():
        most = get_settings().REACTION_EMOJI_MAX
        if tallies.filter(count__gt=0).count() >= most:
            raise Invalid(f"message {reaction.seq} has {most} different emoji already, the most it may")
    rev, position = next_rev(room_id)
    if reaction.on:
        Reaction.objects.create(message_id=message_id, user=ctx.user, emoji=reaction.emoji)
        changed = tallies.filter(emoji=reaction.emoji).update(count=F("count") + 1, rev=rev)
        if not changed:
            ReactionTally.objects.create(message_id=message_id, emoji=reaction.emoji, count=1, room_id=room_id, rev=rev)
    else:
        mine.delete()
        tallies.filter(emoji=reaction.emoji).update(count=F("count") - 1, rev=rev)
    count = count_of(message_id, reaction.emoji)
    frame = reactions_frame(reaction.room, reaction.seq, reaction.emoji, count, rev)
    emit(ctx, "reaction.changed", reaction.room, frame["d"], at=(room_id, position))
    ctx.broadcast(reaction.room, frame)
    return {**ack, "count": count}


def changed_tallies(room: Room, since_rev: int, upto: int, limit: int) -> list[tuple[int, int, dict[str, Any]]]:
    """A `since_rev` replay's emoji counts (messaging/chat/replay.py): each one changed in
    (since_rev, upto], one `reactions` frame at its latest change's place (a count of 0 too)."""
    found = (
        ReactionTally.objects.filter(room=room, rev__gt=since_rev, rev__lte=upto)
        .order_by("rev")
        .values_list("message__seq", "emoji", "count", "rev")[:limit]
    )
    return [
        (rev or 0, rev or 0, reactions_frame(room.slug, seq, emoji, count, rev)) for seq, emoji, count, rev in found
    ]


def forget_reactions(message: Message) -> None:
    """A delete's end of the message's reactions (in its transaction, after the room's row lock)."""
    Reaction.objects.filter(message=message).delete()
    ReactionTally.objects.filter(message=message).delete()
