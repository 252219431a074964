"""Unread counts (PROTOCOL.md 1.1): the join ack's `unread` and `first_unread`,
and `rooms.list` for a sidebar.

A message is unread by a member when its seq is above the member's read
watermark, someone else sent it, and it is not deleted. Seqs are gapless and
the watermark is the server's own, so the count is exact: one index range
scan over the messages above the watermark (the (room, seq) unique index).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.db.models import Count, DateTimeField, F, IntegerField, Min, OuterRef, Subquery
from django.db.models.functions import Coalesce

from ..conf import get_settings
from ..core.handlers import CommandContext, command
from ..models import Membership, Message


def unread_messages(room_id: int, user: Any, read: int) -> Any:
    return (Message.objects.filter(room_id=room_id, seq__gt=read, deleted_at__isnull=True)
            .exclude(sender_id=user.pk))


def unread_in(room_id: int, user: Any, read: int) -> dict:
    """The join ack's `unread` and `first_unread` for a member whose read watermark is `read`."""
    found = unread_messages(room_id, user, read).aggregate(unread=Count("pk"), first_unread=Min("seq"))
    return {"unread": found["unread"], "first_unread": found["first_unread"]}


@dataclass(frozen=True)
class RoomsList:
    pass


def validate_rooms_list(d: dict) -> RoomsList:
    return RoomsList()


def rooms_of(user: Any, limit: int) -> tuple[list[dict], bool]:
    """The user's rooms, the most recently active first (its newest message's
    time, else when the room was made), at most `limit`, and whether there
    are more. One query."""
    unread = (Message.objects.filter(room_id=OuterRef("room_id"), seq__gt=OuterRef("read"), deleted_at__isnull=True)
              .exclude(sender_id=user.pk).order_by().values("room_id").annotate(n=Count("pk")).values("n"))
    newest = Message.objects.filter(room_id=OuterRef("room_id"), seq=OuterRef("room__last_seq")).values("sent_at")
    rows = (
        Membership.objects.filter(user=user)
        .annotate(unread=Coalesce(Subquery(unread, output_field=IntegerField()), 0),
                  active=Coalesce(Subquery(newest, output_field=DateTimeField()), F("room__created_at")))
        .order_by("-active", "room_id")
        .values_list("room__slug", "room__last_seq", "read", "unread")[: limit + 1]
    )
    rooms = [{"room": slug, "private": False, "last_seq": last_seq, "read": read, "unread": n}
             for slug, last_seq, read, n in rows]
    return rooms[:limit], len(rooms) > limit


@command("rooms.list", validate=validate_rooms_list, exactly_once=False)
def list_rooms(ctx: CommandContext, _: RoomsList) -> dict:
    rooms, more = rooms_of(ctx.user, get_settings().ROOMS_LIST_LIMIT)
    return {"rooms": rooms, "more": more}
