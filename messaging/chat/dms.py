"""Direct conversations: `dm.open` (PROTOCOL.md 1.1; an invitation since 1.2).

A direct room is a private room of two users with a `DirectRoom` row naming
the pair in a fixed order. The pair's unique constraint is what makes every
`dm.open` of the two, from either side, concurrently, on any process, end
in the same room: a second insert would wait for the first to commit, fail,
and read the first's room. Openers queue on the two users' rows before that
(`direct_room`), so the second finds the first's room without trying. Its slug is random, so it says nothing of the two.

The opener becomes a member; the other user is invited, once: when the room
is made. A later `dm.open` of theirs (or their `room.join` of it) makes them
a member; one by the opener never asks them again, so a user who declined
or left is left alone (PROTOCOL.md 1.2).
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from typing import Any

from django.contrib.auth import get_user_model
from django.db import IntegrityError, transaction

from ..core.exceptions import Invalid
from ..core.handlers import CommandContext, command
from ..models import DirectRoom, Room
from .invitations import invite, invited_frame
from .rooms import add_member, check_creation
from .users import local_target, person, required_user


@dataclass(frozen=True)
class Open:
    user: Any


def validate_open(d: dict[str, Any]) -> Open:
    return Open(user=required_user(d))


def ordered(a: Any, b: Any) -> tuple[Any, Any]:
    """The pair in the order it is stored: by the id's text, which every key type has."""
    return (a, b) if str(a.pk) < str(b.pk) else (b, a)


def direct_room(user: Any, other: Any, client_address: str | None = None) -> tuple[Room, bool]:
    """The two users' direct room, and whether this call made it (by `user`, from `client_address`)."""
    low, high = ordered(user, other)
    found = DirectRoom.objects.filter(low=low, high=high).select_related("room").first()
    if found is not None:
        return found.room, False
    # Both users' rows, in one order for every caller: the pair's insert takes
    # a key-share lock on each, and the room count below locks the opener's,
    # so two openers from either side would otherwise deadlock. The second
    # waits here and then finds the first one's room. A no-key lock: an
    # open that found the room at once holds the room's row (`add_member`)
    # and inserts a membership, whose key-share lock on the user's row must
    # not wait for an opener here that waits for the room's row.
    list(
        get_user_model()
        .objects.select_for_update(no_key=True)
        .filter(pk__in=[low.pk, high.pk])
        .order_by("pk")
        .values_list("pk")
    )
    found = DirectRoom.objects.filter(low=low, high=high).select_related("room").first()
    if found is not None:
        return found.room, False
    check_creation(user, client_address)
    try:
        with transaction.atomic():
            room = Room.objects.create(
                slug=f"dm-{secrets.token_hex(12)}", private=True, created_by=user, created_from=client_address
            )
            DirectRoom.objects.create(room=room, low=low, high=high)
    except IntegrityError:
        # The other side's (or this user's other socket's) first open committed first.
        return DirectRoom.objects.select_related("room").get(low=low, high=high).room, False
    return room, True


@command("dm.open", validate=validate_open, exactly_once=False)
def open_direct(ctx: CommandContext, open: Open) -> dict[str, Any]:
    """The room of the sender and `user`. The sender is a member after it; the
    other user is invited when the room is made, and hears `invited`."""
    if open.user == ctx.user.pk:
        raise Invalid("a direct conversation needs another user")
    other = local_target(open.user)
    room, made = direct_room(ctx.user, other, ctx.client_address)
    add_member(room, ctx.user, ctx.command_id)
    if made and invite(room, other, ctx.user):
        ctx.send_to_user(other.pk, invited_frame(room.slug, ctx.user))
    return {"room": room.slug, "with": person(other)}


def partners(user: Any, room_ids: list[int]) -> dict[int, dict[str, Any]]:
    """Per direct room among `room_ids`, the other user as `{id, name}` (rooms.list's `with`)."""
    pairs = DirectRoom.objects.filter(room_id__in=room_ids).select_related("low", "high")
    return {pair.room_id: person(pair.high if pair.low_id == user.pk else pair.low) for pair in pairs}
