"""Receipt watermarks and message states.

Each member has two cumulative watermarks per room, `delivered` and `read`.
They only move forward (`new = max(old, given)`), and `read` implies
`delivered`. A message is `delivered` (`read`) once every recipient's
watermark reached its seq, where the recipients are the room's members other
than the sender who had joined before it was posted. States never move back.

States are advanced in the transaction that moves a watermark, with one
set-based UPDATE per state over the seq range that moved.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.db.models import Exists, F, OuterRef, Q
from django.db.models.functions import Coalesce
from django.utils import timezone

from .exceptions import Forbidden, Invalid
from .models import Membership, Message, MessageState


@dataclass(frozen=True)
class Watermarks:
    delivered: int
    read: int


def move_watermarks(user: Any, room_slug: str, delivered: int | None, read: int | None) -> tuple[int, Watermarks, bool]:
    """Move `user`'s watermarks in a room forward. Call inside a transaction.

    Returns the room's id, the watermarks after the update and whether they moved.
    """
    membership = (
        Membership.objects.select_for_update(of=("self",))
        .select_related("room")
        .filter(room__slug=room_slug, user=user)
        .first()
    )
    if membership is None:
        raise Forbidden("join the room first")
    last_seq = membership.room.last_seq
    for name, value in (("delivered", delivered), ("read", read)):
        if value is not None and value > last_seq:
            raise Invalid(f"{name} {value} is beyond the room's last seq {last_seq}")

    old = Watermarks(membership.delivered, membership.read)
    new_read = max(old.read, read or 0)
    new = Watermarks(delivered=max(old.delivered, delivered or 0, new_read), read=new_read)
    if new == old:
        return membership.room_id, old, False

    Membership.objects.filter(pk=membership.pk).update(delivered=new.delivered, read=new.read)
    now = timezone.now()
    if new.delivered > old.delivered:
        advance_states(membership.room_id, old.delivered, new.delivered, MessageState.DELIVERED, now)
    if new.read > old.read:
        advance_states(membership.room_id, old.read, new.read, MessageState.READ, now)
    return membership.room_id, new, True


def advance_states(room_id: int, after: int, upto: int, state: MessageState, now: Any) -> int:
    """Move messages with seq in (after, upto] to `state` where every recipient reached it."""
    watermark = "delivered" if state == MessageState.DELIVERED else "read"
    recipients = Membership.objects.filter(room_id=room_id, joined_seq__lt=OuterRef("seq")).exclude(
        user_id=OuterRef("sender_id")
    )
    behind = recipients.filter(**{f"{watermark}__lt": OuterRef("seq")})
    earlier = [MessageState.SENT] if state == MessageState.DELIVERED else [MessageState.SENT, MessageState.DELIVERED]
    changes: dict[str, Any] = {"state": state}
    if state == MessageState.DELIVERED:
        changes["delivered_at"] = now
    else:
        changes["read_at"] = now
        changes["delivered_at"] = Coalesce(F("delivered_at"), now)
    return (
        Message.objects.filter(room_id=room_id, seq__gt=after, seq__lte=upto, state__in=earlier)
        .filter(Q(Exists(recipients)) & ~Q(Exists(behind)))
        .update(**changes)
    )
