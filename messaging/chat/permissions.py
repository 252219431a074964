"""Who may edit and who may delete a message: one function each, so a room
policy can take them over in one place.

PROTOCOL.md 1.1: only the sender edits a message; the sender, the room's
owner and staff users (moderators) delete it. A room created by `room.join`
has no owner, so only staff moderate it. Membership is checked before
these, by the command.
"""
from __future__ import annotations

from typing import Any

from ..models import Message, Room


def room_owner_id(room: Room) -> Any:
    """The room's owner's id, or None: rooms made by `room.join` have none
    (`created_by` counts creations, it does not make an owner)."""
    return getattr(room, "owner_id", None)


def may_edit(user: Any, message: Message, room: Room) -> bool:
    return message.sender_id == user.pk


def may_delete(user: Any, message: Message, room: Room) -> bool:
    if message.sender_id == user.pk or user.is_staff:
        return True
    owner = room_owner_id(room)
    return owner is not None and owner == user.pk
