"""Rooms as command handlers need them, built-in or a host project's own: who may act in one, and who may create one
(`ROOMS_CREATED_PER_HOUR` per user, `ROOMS_CREATED_PER_ADDRESS_PER_HOUR` per client address)."""

from __future__ import annotations

import math
from datetime import timedelta
from typing import Any

from django.contrib.auth import get_user_model
from django.db import connection
from django.db.models import QuerySet
from django.utils import timezone

from ..conf import get_settings
from ..core.exceptions import Forbidden, RateLimited
from ..models import Membership, Room
from ..signals import member_joined, send_on_commit
from .invitations import answered

# The span `ROOMS_CREATED_PER_HOUR` counts over: any hour, not a clock hour.
CREATION_SPAN = timedelta(hours=1)
# The first key of PostgreSQL's two-key advisory lock on a client address's
# room creations ("addr"), so it cannot collide with another app's locks.
ADDRESS_LOCK = 0x61646472


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


def add_member(room: Room, user: Any, command_id: str) -> tuple[Room, bool]:
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
        send_on_commit(member_joined, Membership, room=locked.slug, user=user, by=None, command_id=command_id)
    return locked, created


def room_to_join(user: Any, slug: str, client_address: str | None = None) -> Room:
    """The room `slug`, created by `user` if there is none yet, in the caller's transaction.

    Creating it counts towards the rooms `user`, and `client_address`, may
    create in any hour (`check_creation`); past either limit `RateLimited`,
    and nothing is created. Rooms that exist are joined whatever the counts.
    """
    room = Room.objects.filter(slug=slug).first()
    if room is not None:
        return room
    check_creation(user, client_address)
    # A slug another user creates meanwhile is theirs: this join finds it.
    room, _ = Room.objects.get_or_create(slug=slug, defaults={"created_by": user, "created_from": client_address})
    return room


def check_creation(user: Any, client_address: str | None) -> None:
    """Refuse with `RateLimited` a room about to be made by `user` from
    `client_address` (None: server code, not counted by address) past
    `ROOMS_CREATED_PER_HOUR` or `ROOMS_CREATED_PER_ADDRESS_PER_HOUR`. The
    caller then creates the room with `created_by` and `created_from` in
    the same transaction, which holds the locks these checks take."""
    conf = get_settings()
    if conf.ROOMS_CREATED_PER_HOUR:
        check_rooms_created(user, conf.ROOMS_CREATED_PER_HOUR)
    if client_address is not None and conf.ROOMS_CREATED_PER_ADDRESS_PER_HOUR:
        check_rooms_created_from(client_address, conf.ROOMS_CREATED_PER_ADDRESS_PER_HOUR)


def check_rooms_created(user: Any, per_hour: int) -> None:
    """Refuse with `RateLimited` if `user` created `per_hour` rooms in the last hour.

    Counted in the database, where the rooms are: exact across processes and
    Redis outages, and only rooms that exist count (a join that loses the
    race for a slug created nothing). The user's row is locked until the
    caller's transaction ends, so one user's joins of new rooms, on any
    process, count one after another and cannot all see the last free one.
    """
    list(get_user_model().objects.select_for_update().filter(pk=user.pk).values_list("pk"))
    refuse_past(Room.objects.filter(created_by=user), per_hour, f"you created {per_hour} rooms in the last hour")


def check_rooms_created_from(client_address: str, per_hour: int) -> None:
    """Refuse with `RateLimited` if `per_hour` rooms were created from `client_address` in the last hour.

    What one user's limit cannot see: guests are free to make, and each new
    one could create its own rooms. Counted in the database as the user's
    are, by every user together; an advisory lock on the address (on
    PostgreSQL; SQLite runs one writer at a time anyway) makes one
    address's creations, on any process, count one after another until the
    caller's transaction ends. Taken after the users' row locks, never
    before one, so it closes no cycle with them.
    """
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_xact_lock(%s, hashtext(%s))", [ADDRESS_LOCK, client_address])
    refuse_past(
        Room.objects.filter(created_from=client_address),
        per_hour,
        f"{per_hour} rooms were created from your address in the last hour",
    )


def refuse_past(created: QuerySet[Room], per_hour: int, message: str) -> None:
    """`RateLimited` if `created` holds `per_hour` rooms made within the last hour,
    with `retry_after` when the `per_hour`-th newest of them turns an hour old."""
    now = timezone.now()
    newest = list(
        created.filter(created_at__gt=now - CREATION_SPAN)
        .order_by("-created_at")
        .values_list("created_at", flat=True)[:per_hour]
    )
    if len(newest) >= per_hour:
        wait = (newest[-1] + CREATION_SPAN - now).total_seconds()
        retry_after = max(0.001, math.ceil(wait * 1000) / 1000)
        raise RateLimited(message, retry_after=retry_after)


def memberships_among(rooms: list[str], users: list[Any]) -> set[tuple[str, str]]:
    """Which of `users` are members of which of `rooms`: (slug, the user id's text) pairs, in one query.

    For the transport's recheck of what its sockets hear (messaging/transport/memberships.py).
    """
    found = Membership.objects.filter(room__slug__in=rooms, user_id__in=users).values_list("room__slug", "user_id")
    return {(slug, str(user)) for slug, user in found}
