"""Room membership as command handlers need it, built-in or a host project's own."""
from __future__ import annotations

from typing import Any

from .exceptions import Forbidden
from .models import Membership


def joined_room_id(user: Any, room: str) -> int:
    """The id of `room` if `user` has joined it; else `Forbidden`, which refuses the command."""
    room_id = Membership.objects.filter(room__slug=room, user=user).values_list("room_id", flat=True).first()
    if room_id is None:
        raise Forbidden("join the room first")
    return room_id
