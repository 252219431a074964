"""Private rooms and their members: `room.create`, `room.invite` (PROTOCOL.md 1.1,
an invitation since 1.2: messaging/chat/invitations.py), and the extensions
`room.leave` and `room.remove` (docs/PROTOCOL.md).

Who may do each is the room policy's to say (messaging/chat/policy.py).
A member who leaves or is removed is told with a `room.left` frame on every
socket of theirs, on every process; each of those sockets stops hearing the
room when that frame reaches it (`left_room`), before the client reads it.
An invitee who declines, or whose invitation a moderator withdraws, gets the
same frame, so every page of theirs drops the invitation.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.contrib.auth import get_user_model
from django.db import IntegrityError, transaction
from django.db.models import Exists, OuterRef
from django.utils import timezone

from ..conf import get_settings
from ..core.exceptions import Forbidden, Invalid, RateLimited
from ..core.handlers import CommandContext, command
from ..core.protocol import room_slug
from ..models import Membership, ModerationAction, Room
from ..signals import member_joined, member_left, send_on_commit
from .invitations import check_reinvite, declined, invited_frame, is_invited, may_accept, withdrawn
from .invitations import invite as send_invitation
from .policy import get_policy
from .rooms import check_creation
from .users import local_target, person, required_user

# The span `INVITES_PER_HOUR` counts over: any hour.
INVITE_SPAN = timedelta(hours=1)
# What every socket's hook looks for before it reads a user's frame as JSON
# (orjson keeps the keys in the order written, `t` first).
LEFT_PREFIX = '{"t":"room.left","d":{"room":"'


def room_and_membership(user: Any, slug: str) -> tuple[Room | None, bool]:
    """The room `slug` (None if there is none) and whether `user` is a member, in one query."""
    room = (
        Room.objects.filter(slug=slug)
        .annotate(member=Exists(Membership.objects.filter(room=OuterRef("pk"), user=user)))
        .first()
    )
    return room, bool(room is not None and room.member)


def may_join(user: Any, slug: str) -> bool:
    """Whether `room.join` of `slug` by `user` passes the room's rule: a room that does not exist yet
    (the join creates it), one the policy lets the user join, or a private one they are invited to."""
    room, member = room_and_membership(user, slug)
    return room is None or get_policy().can_join(user, room, member=member) or (not member and may_accept(user, room))


def visible_room(user: Any, slug: str, *, moderating: bool = False, invitee: bool = False) -> tuple[Room, bool]:
    """The room `slug` and whether `user` is a member; `Forbidden` if it does not
    exist or is hidden from `user`, so a private room's existence is not told.
    A moderating command also finds a room its sender moderates (staff are
    not members of every private room); with `invitee`, a room the user is
    invited to (what `room.leave` declines)."""
    room, member = room_and_membership(user, slug)
    policy = get_policy()
    if room is None or not (
        policy.can_see(user, room, member=member)
        or moderating
        and policy.can_moderate(user, room)
        or invitee
        and not member
        and is_invited(user, room)
    ):
        raise Forbidden("no such room, or it is private")
    return room, member


def left_frame(room: str, user: Any, by: Any | None) -> dict[str, Any]:
    """`room.left` (an extension): `user` is no longer a member of `room`, or no
    longer invited to it; `by` the moderator who removed them (or withdrew the
    invitation), or None when they left (or declined)."""
    return {"t": "room.left", "d": {"room": room, "user": user.pk, "by": None if by is None else person(by)}}


def left_room(text: str) -> str | None:
    """The room a user's encoded frame says they left, or None for any other frame."""
    if not text.startswith(LEFT_PREFIX):
        return None
    end = text.find('"', len(LEFT_PREFIX))
    return text[len(LEFT_PREFIX) : end] if end > 0 else None


# room.create ----------------------------------------------------------------


@dataclass(frozen=True)
class Create:
    room: str
    private: bool


def validate_create(d: dict[str, Any]) -> Create:
    private = d.get("private", False)
    if not isinstance(private, bool):
        raise Invalid("private must be true or false")
    return Create(room=room_slug(d), private=private)


# The one answer to a slug that is taken, public, private or direct alike:
# it says no more than that a create of it cannot be, not whose or what it is.
TAKEN = "this slug is taken"


@command("room.create", validate=validate_create)
def create_room(ctx: CommandContext, create: Create) -> dict[str, Any]:
    """A new room owned by the sender, its first member. Exactly once: a retry gets the first ack."""
    if not get_policy().can_create(ctx.user, create.room, private=create.private):
        raise Forbidden("you may not create rooms")
    if Room.objects.filter(slug=create.room).exists():
        raise Invalid(TAKEN)
    check_creation(ctx.user, ctx.client_address)
    try:
        with transaction.atomic():
            room = Room.objects.create(
                slug=create.room,
                private=create.private,
                owner=ctx.user,
                created_by=ctx.user,
                created_from=ctx.client_address,
            )
    except IntegrityError:
        # Another user's create or join of the slug committed first.
        raise Invalid(TAKEN) from None
    Membership.objects.create(room=room, user=ctx.user, joined_seq=0)
    send_on_commit(member_joined, Membership, room=room.slug, user=ctx.user, by=None, command_id=ctx.command_id)
    return {"room": room.slug, "private": room.private}


# room.invite ----------------------------------------------------------------


@dataclass(frozen=True)
class RoomAndUser:
    """`room.invite`'s and `room.remove`'s data."""

    room: str
    user: Any


def validate_room_and_user(d: dict[str, Any]) -> RoomAndUser:
    return RoomAndUser(room=room_slug(d), user=required_user(d))


def check_invites(user: Any, per_hour: int) -> None:
    """Refuse with `RateLimited` once `user` sent `per_hour` invitations in the last
    hour; counted in the database under the user's row lock (as `check_rooms_created`)."""
    list(get_user_model().objects.select_for_update().filter(pk=user.pk).values_list("pk"))
    since = timezone.now() - INVITE_SPAN
    recent = ModerationAction.objects.filter(actor=user, kind=ModerationAction.Kind.INVITE, at__gt=since)
    if recent[:per_hour].count() >= per_hour:
        raise RateLimited(f"you invited {per_hour} users in the last hour", retry_after=60)


@command("room.invite", validate=validate_room_and_user, exactly_once=False)
def invite(ctx: CommandContext, invite: RoomAndUser) -> dict[str, Any]:
    """Ask a user to join (PROTOCOL.md 1.2): an invitation, not a membership; they
    hear `invited` on every socket. Asking a member or an invitee again
    changes nothing; one who declined or left is not asked again for
    `REINVITE_AFTER`. Nobody invites themselves: a moderator of a private
    room (staff) is not a member of it, and may not make itself one."""
    room, member = visible_room(ctx.user, invite.room, moderating=True)
    if not get_policy().can_invite(ctx.user, room, member=member):
        raise Forbidden("only the room's owner or a moderator invites")
    if invite.user == ctx.user.pk:
        raise Forbidden("you cannot invite yourself")
    target = local_target(invite.user)
    done = {"room": room.slug, "user": target.pk}
    if Membership.objects.filter(room=room, user=target).exists() or check_reinvite(room, target):
        return done
    per_hour = get_settings().INVITES_PER_HOUR
    if per_hour:
        check_invites(ctx.user, per_hour)
    if send_invitation(room, target, ctx.user):
        ModerationAction.objects.create(
            room=room, room_slug=room.slug, actor=ctx.user, kind=ModerationAction.Kind.INVITE, target=target
        )
        ctx.send_to_user(target.pk, invited_frame(room.slug, ctx.user))
    return done


# room.leave and room.remove -------------------------------------------------


@dataclass(frozen=True)
class Leave:
    room: str


def validate_leave(d: dict[str, Any]) -> Leave:
    return Leave(room=room_slug(d))


def end_membership(ctx: CommandContext, room: Room, user: Any, by: Any | None) -> None:
    """Delete `user`'s membership of `room` and tell every socket of theirs, which stop hearing the room."""
    deleted, _ = Membership.objects.filter(room=room, user=user).delete()
    if deleted:
        send_on_commit(member_left, Membership, room=room.slug, user=user, by=by, command_id=ctx.command_id)
    ctx.send_to_user(user.pk, left_frame(room.slug, user, by))


@command("room.leave", validate=validate_leave, exactly_once=False)
def leave(ctx: CommandContext, leave: Leave) -> dict[str, Any]:
    """The sender stops being a member, or declines its invitation (PROTOCOL.md 1.2);
    an owner who leaves gives up the room (staff moderate it then). Either
    is kept as a no (`declined`): the room does not ask them back at once."""
    room, member = visible_room(ctx.user, leave.room, invitee=True)
    if not member and not is_invited(ctx.user, room):
        raise Forbidden("you are not a member of this room")
    # The membership's row before the room's, the order a batch of receipts
    # locks them in (chat/sql/move_watermarks.sql): an owner's receipt and
    # leave at once must not each hold the row the other waits for.
    end_membership(ctx, room, ctx.user, None)
    declined(room, ctx.user)
    if room.owner_id == ctx.user.pk:
        Room.objects.filter(pk=room.pk).update(owner=None)
    return {"room": room.slug}


@command("room.remove", validate=validate_room_and_user, exactly_once=False)
def remove(ctx: CommandContext, remove: RoomAndUser) -> dict[str, Any]:
    """A moderator ends another member's membership, or withdraws an invitation, recorded for the admin's audit."""
    room, _ = visible_room(ctx.user, remove.room, moderating=True)
    if not get_policy().can_moderate(ctx.user, room):
        raise Forbidden("only the room's owner or a moderator removes members")
    if remove.user == ctx.user.pk:
        raise Invalid("use room.leave to leave a room")
    target = get_user_model().objects.filter(pk=remove.user).first()
    if target is not None and Membership.objects.filter(room=room, user=target).exists():
        if room.owner_id == target.pk:
            raise Forbidden("the room's owner cannot be removed")
        end_membership(ctx, room, target, ctx.user)
    elif target is not None and withdrawn(room, target):
        # An invitee: the invitation is taken back, and their pages drop it.
        ctx.send_to_user(target.pk, left_frame(room.slug, target, ctx.user))
    else:
        raise Invalid("no such member")
    ModerationAction.objects.create(
        room=room, room_slug=room.slug, actor=ctx.user, kind=ModerationAction.Kind.REMOVE, target=target
    )
    return {"room": room.slug, "user": target.pk}
