"""Who may edit and who may delete a message: the room policy decides
(`ROOM_POLICY`, messaging/chat/policy.py: `can_edit`, `can_delete`).

PROTOCOL.md 1.1: only the sender edits a message; the sender and the room's
moderators (its owner, staff users) delete it. Membership is checked before
these, by the command.
"""

from __future__ import annotations

from typing import Any

from ..models import Message, Room
from .policy import get_policy


def may_edit(user: Any, message: Message, room: Room) -> bool:
    return get_policy().can_edit(user, room, message)


def may_delete(user: Any, message: Message, room: Room) -> bool:
    return get_policy().can_delete(user, room, message)
