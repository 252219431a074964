"""Unread counts (PROTOCOL.md 1.1): the join ack's `unread` and `first_unread`
(and, in messaging/chat/listing.py, `rooms.list`'s).

A message is unread by a member when its seq is above the member's read
watermark, someone else sent it, and it is not deleted. Seqs are gapless and
the watermark is the server's own, so the count is exact: one index range
scan over the messages above the watermark (the (room, seq) unique index).
"""

from __future__ import annotations

from typing import Any

from django.db.models import Count, Min

from ..models import Message


def unread_messages(room_id: int, user: Any, read: int) -> Any:
    return Message.objects.filter(room_id=room_id, seq__gt=read, deleted_at__isnull=True).exclude(sender_id=user.pk)


def unread_in(room_id: int, user: Any, read: int) -> dict[str, Any]:
    """The join ack's `unread` and `first_unread` for a member whose read watermark is `read`."""
    found = unread_messages(room_id, user, read).aggregate(unread=Count("pk"), first_unread=Min("seq"))
    return {"unread": found["unread"], "first_unread": found["first_unread"]}
