"""Invitations are requests (PROTOCOL.md 1.2): `room.invite` and `dm.open` ask a
user to join a room; the user accepts with `room.join` and declines with
`room.leave`.

An invitation is an `Invitation` row, never a `Membership`: until they accept,
the invitee is nobody in the room (no member list, message, frame, presence,
watermark or mention reaches them or tells of them), because everything
that makes a user somebody in a room reads memberships. What the rows say:

- pending (`declined_at` None): the user may `room.join` the room, private
  or not, and `rooms.list` lists it to them with `invited: true`;
- declined (`declined_at` set): the user declined it, or left the room as a
  member. `room.invite` does not ask them again for `REINVITE_AFTER`
  (consent first: a no is not answered with the same question at once),
  and `dm.open` never does (messaging/chat/dms.py invites only when it makes
  the room);
- no row: never invited, or accepted (a membership answers it), or withdrawn.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any, cast

from django.db import IntegrityError, transaction
from django.db.models import Exists, OuterRef, Q
from django.utils import timezone

from ..conf import get_settings
from ..core.exceptions import Forbidden
from ..models import DirectRoom, Invitation, Membership, Room
from .users import person


def invited_frame(room: str, by: Any) -> dict[str, Any]:
    return {"t": "invited", "d": {"room": room, "by": person(by)}}


def is_invited(user: Any, room: Room) -> bool:
    """Whether `user` has a pending invitation to `room`."""
    return Invitation.objects.filter(room=room, user=user, declined_at__isnull=True).exists()


def may_accept(user: Any, room: Room) -> bool:
    """Whether `room.join` lets `user` into `room` whatever its privacy: a pending
    invitation, or one of a direct room's two users (their own way back in
    after they declined or left it)."""
    return is_invited(user, room) or DirectRoom.objects.filter(Q(low=user) | Q(high=user), room=room).exists()


def answered(room: Room, user: Any) -> None:
    """`user` is a member of `room` now: any invitation to it is answered (in the membership's transaction)."""
    Invitation.objects.filter(room=room, user=user).delete()


def declined(room: Room, user: Any) -> None:
    """`user` declined an invitation to `room`, or left it: kept, so they are not asked again at once."""
    Invitation.objects.update_or_create(room=room, user=user, defaults={"declined_at": timezone.now()})


def withdrawn(room: Room, user: Any) -> bool:
    """A moderator takes back `user`'s pending invitation to `room`; whether there was one."""
    deleted, _ = Invitation.objects.filter(room=room, user=user, declined_at__isnull=True).delete()
    return bool(deleted)


def check_reinvite(room: Room, user: Any) -> bool:
    """Whether `user` is invited to `room` already (nothing to send); `Forbidden`
    if they declined it or left it less than `REINVITE_AFTER` ago."""
    invitation = Invitation.objects.filter(room=room, user=user).first()
    if invitation is None:
        return False
    if invitation.pending:
        return True
    wait = timedelta(seconds=get_settings().REINVITE_AFTER)
    # Not pending: declined, at a time.
    if cast(datetime, invitation.declined_at) + wait > timezone.now():
        raise Forbidden(
            "this user declined an invitation to this room, or left it, lately: they are not asked again so soon"
        )
    return False


def invite(room: Room, user: Any, by: Any) -> bool:
    """A pending invitation of `user` to `room` from `by` (a new one, or a declined
    one asked again); whether it is new, so an `invited` frame is due. Two
    inviters at once make one: the row's unique constraint decides."""
    try:
        with transaction.atomic():
            Invitation.objects.create(room=room, user=user, invited_by=by)
        return True
    except IntegrityError:
        pass
    renewed = Invitation.objects.filter(room=room, user=user, declined_at__isnull=False).update(
        declined_at=None, created_at=timezone.now(), invited_by=by
    )
    return bool(renewed)


def pending_of(user: Any, limit: int) -> tuple[list[dict[str, Any]], list[int], bool]:
    """`rooms.list`'s entries of the user's pending invitations, the newest first,
    at most `limit`, their rooms' ids, and whether there are more. They tell the room's slug,
    whether it is private and who asked (`by`, null once that account is
    gone), nothing of what is in it: no seq, no unread count, no members.
    An invitation whose user is a member already (a join that crossed it)
    is not listed."""
    rows = list(
        Invitation.objects.filter(user=user, declined_at__isnull=True)
        .exclude(Exists(Membership.objects.filter(room_id=OuterRef("room_id"), user_id=OuterRef("user_id"))))
        .select_related("room", "invited_by")
        .order_by("-created_at", "-pk")[: limit + 1]
    )
    entries = [
        {
            "room": i.room.slug,
            "private": i.room.private,
            "invited": True,
            "by": None if i.invited_by is None else person(i.invited_by),
        }
        for i in rows[:limit]
    ]
    return entries, [i.room_id for i in rows[:limit]], len(rows) > limit
