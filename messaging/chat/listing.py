"""`rooms.list` (PROTOCOL.md 1.1), for a sidebar: the user's rooms, the most
recently active first, with their unread counts (messaging/chat/unread.py's
rule), `private`, and `with` for a direct conversation; then the rooms the
user is invited to (1.2), with `invited: true` and nothing of what is in
them (messaging/chat/invitations.py `pending_of`).
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
from .invitations import pending_of


def private_and_with(
    user: Any, rooms: list[dict[str, Any]], ids: list[int], private: list[bool]
) -> list[dict[str, Any]]:
    """`rooms.list` entries with `private`, and `with: {id, name}` for the direct
    rooms among them (`ids` their room ids, in the same order): one query."""
    others = partners(user, [room_id for room_id, is_private in zip(ids, private) if is_private])
    for entry, room_id, is_private in zip(rooms, ids, private):
        entry["private"] = is_private
        if room_id in others:
            entry["with"] = others[room_id]
    return rooms


@dataclass(frozen=True)
class RoomsList:
    pass


def validate_rooms_list(d: dict[str, Any]) -> RoomsList:
    return RoomsList()


def rooms_of(user: Any, limit: int) -> tuple[list[dict[str, Any]], bool]:
    """The user's rooms, the most recently active first (its newest message's
    time, else when the room was made), at most `limit`, and whether there
    are more. Two queries (the second names the other of each direct room)."""
    unread = (
        Message.objects.filter(room_id=OuterRef("room_id"), seq__gt=OuterRef("read"), deleted_at__isnull=True)
        .exclude(sender_id=user.pk)
        .order_by()
        .values("room_id")
        .annotate(n=Count("pk"))
        .values("n")
    )
    newest = Message.objects.filter(room_id=OuterRef("room_id"), seq=OuterRef("room__last_seq")).values("sent_at")
    rows = (
        Membership.objects.filter(user=user)
        .annotate(
            unread=Coalesce(Subquery(unread, output_field=IntegerField()), 0),
            active=Coalesce(Subquery(newest, output_field=DateTimeField()), F("room__created_at")),
        )
        .order_by("-active", "room_id")
        .values_list("room_id", "room__slug", "room__private", "room__last_seq", "read", "unread")[: limit + 1]
    )
    more = len(rows) > limit
    page = list(rows[:limit])
    rooms = [{"room": slug, "last_seq": last_seq, "read": read, "unread": n} for _, slug, _, last_seq, read, n in page]
    return private_and_with(user, rooms, [r[0] for r in page], [r[2] for r in page]), more


def invitations_of(user: Any, limit: int) -> tuple[list[dict[str, Any]], bool]:
    """The user's pending invitations as `rooms.list` entries (`pending_of`), with
    `with` for a direct room: who asks to talk. Two queries."""
    entries, ids, more = pending_of(user, limit)
    return private_and_with(user, entries, ids, [entry["private"] for entry in entries]), more


@command("rooms.list", validate=validate_rooms_list, exactly_once=False)
def list_rooms(ctx: CommandContext, _: RoomsList) -> dict[str, Any]:
    conf = get_settings()
    rooms, more = rooms_of(ctx.user, conf.ROOMS_LIST_LIMIT)
    invited, more_invited = invitations_of(ctx.user, conf.INVITATIONS_LIST_LIMIT)
    return {"rooms": rooms + invited, "more": more or more_invited}
