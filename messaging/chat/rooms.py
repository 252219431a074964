"""Rooms as command handlers need them, built-in or a host project's own: who may act in one, and who may create one."""
from __future__ import annotations

import math
from datetime import timedelta
from typing import Any

from django.contrib.auth import get_user_model
from django.utils import timezone

from ..core.exceptions import Forbidden, RateLimited
from ..models import Membership, Room
from .invitations import answered

# The span `ROOMS_CREATED_PER_HOUR` counts over: any hour, not a clock hour.
CREATION_SPAN = timedelta(hours=1)


def joined_room_id(user: Any, room: str) -> int:
    """The id of `room` if `user` has joined it; else `Forbidden`, which refuses the command."""
    room_id = Membership.objects.filter(room__slug=room, user=user).values_list("room_id", flat=True).first()
    if room_id is None:
        raise Forbidden("join the room first")
    return room_id


def joined_room(user: Any, slug: str) -> Room:
    """`joined_room_id`'s room itself, for a command that needs more of it than its id (who owns it). One query."""
    membership = Membership.objects.filter(room__slug=slug, user=user).select_related("room").first()
    if membership is None:
        raise Forbidden("join the room first")
    return membership.room


def add_member(room: Room, user: Any) -> tuple[Room, bool]:
    """Make `user` a member of `room`, which answers any invitation of theirs to
    it: the room as read under its row lock, and whether they were not one yet.

    `joined_seq` decides which messages the new member must receive before
    they count as delivered. Under the room's row lock, which posts take for
    their seq, it is exact: every seq up to it is committed, and every later
    post commits after this membership, so no receipt can move a message on
    without counting the newcomer.
    """
    locked = Room.objects.select_for_update().get(pk=room.pk)
    _, created = Membership.objects.get_or_create(room=locked, user=user, defaults={"joined_seq": locked.last_seq})
    if created:
        answered(locked, user)
    return locked, created


def room_to_join(user: Any, slug: str, per_hour: int) -> Room:
    """The room `slug`, created by `user` if there is none yet, in the caller's transaction.

    Creating it counts towards the rooms `user` may create in any hour
    (`per_hour`, 0: no limit); past it `RateLimited`, and nothing is created.
    Rooms that exist are joined whatever the count.
    """
    room = Room.objects.filter(slug=slug).first()
    if room is not None:
        return room
    if per_hour:
        check_rooms_created(user, per_hour)
    # A slug another user creates meanwhile is theirs: this join finds it.
    room, _ = Room.objects.get_or_create(slug=slug, defaults={"created_by": user})
    return room


def check_rooms_created(user: Any, per_hour: int) -> None:
    """Refuse with `RateLimited` if `user` created `per_hour` rooms in the last hour.

    Counted in the database, where the rooms are: exact across processes and
    Redis outages, and only rooms that exist count (a join that loses the
    race for a slug created nothing). The user's row is locked until the
    caller's transaction ends, so one user's joins of new rooms, on any
    process, count one after another and cannot all see the last free one.
    """
    list(get_user_model().objects.select_for_update().filter(pk=user.pk).values_list("pk"))
    now = timezone.now()
    newest = list(
        Room.objects.filter(created_by=user, created_at__gt=now - CREATION_SPAN)
        .order_by("-created_at").values_list("created_at", flat=True)[:per_hour]
    )
    if len(newest) >= per_hour:
        # A room may be created again once the `per_hour`-th newest is an hour old.
        wait = (newest[-1] + CREATION_SPAN - now).total_seconds()
        retry_after = max(0.001, math.ceil(wait * 1000) / 1000)
        raise RateLimited(f"you created {per_hour} rooms in the last hour", retry_after=retry_after)
