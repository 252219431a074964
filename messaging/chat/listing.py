"""`rooms.list` (PROTOCOL.md 1.1), for a sidebar: the user's rooms with `private`,
and `with` for a direct conversation.

Minimal until the lifecycle issue's `rooms.list` lands (issue 24 owns it):
that one replaces this module's command and keeps `private_and_with`, which
is this issue's part of it.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.db.models import Count, DateTimeField, F, IntegerField, OuterRef, Subquery
from django.db.models.functions import Coalesce

from ..conf import get_settings
from ..core.handlers import CommandContext, command
from ..models import Membership, Message
from .dms import partners


@dataclass(frozen=True)
class RoomsList:
    pass


def validate_rooms_list(d: dict) -> RoomsList:
    return RoomsList()


def private_and_with(user: Any, rooms: list[dict], ids: list[int], private: list[bool]) -> list[dict]:
    """`rooms.list` entries with `private`, and `with: {id, name}` for the direct
    rooms among them (`ids` their room ids, in the same order): one query."""
    others = partners(user, [room_id for room_id, is_private in zip(ids, private) if is_private])
    for entry, room_id, is_private in zip(rooms, ids, private):
        entry["private"] = is_private
        if room_id in others:
            entry["with"] = others[room_id]
    return rooms


def rooms_of(user: Any, limit: int) -> tuple[list[dict], bool]:
    """The user's rooms, the most recently active first (its newest message's
    time, else when the room was made), at most `limit`, and whether there are more."""
    unread = (Message.objects.filter(room_id=OuterRef("room_id"), seq__gt=OuterRef("read"))
              .exclude(sender_id=user.pk).order_by().values("room_id").annotate(n=Count("pk")).values("n"))
    newest = Message.objects.filter(room_id=OuterRef("room_id"), seq=OuterRef("room__last_seq")).values("sent_at")
    rows = list(
        Membership.objects.filter(user=user)
        .annotate(unread=Coalesce(Subquery(unread, output_field=IntegerField()), 0),
                  active=Coalesce(Subquery(newest, output_field=DateTimeField()), F("room__created_at")))
        .order_by("-active", "room_id")
        .values_list("room_id", "room__slug", "room__private", "room__last_seq", "read", "unread")[: limit + 1]
    )
    more = len(rows) > limit
    rows = rows[:limit]
    rooms = [{"room": slug, "last_seq": last_seq, "read": read, "unread": n} for _, slug, _, last_seq, read, n in rows]
    return private_and_with(user, rooms, [r[0] for r in rows], [r[2] for r in rows]), more


@command("rooms.list", validate=validate_rooms_list, exactly_once=False)
def list_rooms(ctx: CommandContext, _: RoomsList) -> dict:
    """At most `ROOMS_PER_SOCKET` rooms (as many as one socket may join), with `more`."""
    rooms, more = rooms_of(ctx.user, get_settings().ROOMS_PER_SOCKET or 500)
    return {"rooms": rooms, "more": more}
