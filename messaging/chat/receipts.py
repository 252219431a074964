"""Receipt watermarks and message states.

Each member has two cumulative watermarks per room, `delivered` and `read`.
They only move forward (`new = max(old, given)`), and `read` implies
`delivered`. A message is `delivered` (`read`) once every recipient's
watermark reached its seq, where the recipients are the room's members other
than the sender who had joined before it was posted. States never move back.

A move is applied in one transaction: the membership row, a `WatermarkMove`
(when it happened, for the per-recipient view) and the message states, with
one set-based UPDATE per state over the seq range that moved. On PostgreSQL
that transaction is one call of the function `messaging_move_watermarks_v2`
(migration 0008): one round trip through the gateway
(`move_watermarks_by_function`, `receipt`'s batch form there); elsewhere the
ORM's statements of `move_watermarks_portably`, the type's `apply`.

A move also says what it did, for the frames that tell it (`commands.py`):
the messages it moved, each with its sender and new state (the newest
`STATES_PER_RECEIPT` per state), and how many members the room has, counted
up to one past `MEMBERS_ON_JOIN`.
"""
from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db import connection
from django.db.models import Case, DateTimeField, Exists, F, OuterRef, Q, QuerySet, Subquery, Value, When
from django.db.models.functions import Coalesce
from django.utils import timezone

from ..conf import get_settings
from ..core.exceptions import Forbidden, Invalid
from ..core.gateway import Gateway
from ..core.sql import statement
from ..models import Membership, Message, MessageState, Room, WatermarkMove

# The first key of PostgreSQL's two-key advisory locks taken here ("rcpt"),
# so they cannot collide with another app's one-key locks on room ids.
RECEIPTS_LOCK = 0x72637074


@dataclass(frozen=True)
class Watermarks:
    delivered: int
    read: int

    def forward(self, delivered: int | None, read: int | None) -> Watermarks:
        """The watermarks after a receipt: never lower, and `read` implies `delivered`."""
        new_read = max(self.read, read or 0)
        return Watermarks(delivered=max(self.delivered, delivered or 0, new_read), read=new_read)


@dataclass(frozen=True)
class MovedMessage:
    """A message a move took to a new state."""

    seq: int
    sender: Any  # the sender's user id
    state: MessageState


@dataclass(frozen=True)
class Move:
    watermarks: Watermarks
    moved: bool
    # The room's members, counted up to one past `MEMBERS_ON_JOIN`; 0 if nothing moved.
    members: int = 0
    # When the move was made: the time of every state it reached.
    at: datetime | None = None
    # Per state in seq order, the newest `STATES_PER_RECEIPT` messages it moved
    # there; a message that went from sent to delivered and on to read in this
    # move is in both.
    messages: tuple[MovedMessage, ...] = ()


# The move as one call (migration 0008), through the gateway.
MOVE_CALL = statement(__package__, "move_watermarks")


def move_parameters(user: Any, room_slug: str, delivered: int | None, read: int | None) -> dict[str, Any]:
    conf = get_settings()
    return {"room": room_slug, "user": user.pk, "delivered": delivered, "read": read,
            "members_upto": conf.MEMBERS_ON_JOIN, "states_limit": conf.STATES_PER_RECEIPT}


async def move_watermarks_by_function(gateway: Gateway, user: Any, room_slug: str, delivered: int | None,
                                     read: int | None) -> Move:
    """Move `user`'s watermarks in a room forward, in one call of the database's
    function (PostgreSQL), its own transaction, through the gateway.

    Raises `Forbidden` for a non-member and `Invalid` for a seq beyond the
    room's last one; either way nothing changes.
    """
    rows = await gateway.fetch(MOVE_CALL, move_parameters(user, room_slug, delivered, read))
    return called_move(rows, delivered, read)


def called_move(rows: list[tuple], delivered: int | None, read: int | None) -> Move:
    """The `Move` of the function's rows, or its refusal (nothing changed then)."""
    if not rows:
        raise Forbidden("join the room first")
    [(last_seq, old_delivered, old_read, new_delivered, new_read, members, at,
      delivered_seqs, delivered_senders, read_seqs, read_senders)] = rows
    if new_delivered is None:
        beyond_last_seq(last_seq, delivered, read)
    new = Watermarks(new_delivered, new_read)
    if new == Watermarks(old_delivered, old_read):
        return Move(new, moved=False)
    messages = [
        MovedMessage(seq, sender, state)
        for state, seqs, senders in ((MessageState.DELIVERED, delivered_seqs, delivered_senders),
                                     (MessageState.READ, read_seqs, read_senders))
        for seq, sender in zip(seqs or (), senders or (), strict=True)
    ]
    return Move(new, moved=True, members=members, at=at, messages=tuple(messages))


def beyond_last_seq(last_seq: int, delivered: int | None, read: int | None) -> None:
    """Raise `Invalid` for the first of `delivered`, `read` beyond the room's last seq."""
    for name, value in (("delivered", delivered), ("read", read)):
        if value is not None and value > last_seq:
            raise Invalid(f"{name} {value} is beyond the room's last seq {last_seq}")


def move_watermarks_portably(user: Any, room_slug: str, delivered: int | None, read: int | None) -> Move:
    """`move_watermarks` in the ORM's statements, for any database: at most
    eleven round trips (the ORM has no UPDATE ... RETURNING, so each state's
    moved messages are read back, and the members counted)."""
    membership = (
        Membership.objects.select_for_update(of=("self",))
        .select_related("room")
        .filter(room__slug=room_slug, user=user)
        .first()
    )
    if membership is None:
        raise Forbidden("join the room first")
    beyond_last_seq(membership.room.last_seq, delivered, read)

    old = Watermarks(membership.delivered, membership.read)
    new = old.forward(delivered, read)
    if new == old:
        return Move(old, moved=False)

    lock_room_states(membership.room_id)
    now = timezone.now()
    Membership.objects.filter(pk=membership.pk).update(delivered=new.delivered, read=new.read)
    WatermarkMove.objects.create(membership=membership, delivered=new.delivered, read=new.read, at=now)
    # This member is a recipient only of messages after it joined: nothing at
    # or below `joined_seq` can change state because of its receipts.
    floor = membership.joined_seq
    messages: list[MovedMessage] = []
    if new.delivered > old.delivered:
        messages += advance_states(membership.room_id, max(old.delivered, floor), new.delivered,
                                   MessageState.DELIVERED, now)
    if new.read > old.read:
        messages += advance_states(membership.room_id, max(old.read, floor), new.read, MessageState.READ, now)
    conf = get_settings()
    members = Membership.objects.filter(room_id=membership.room_id)[: conf.MEMBERS_ON_JOIN + 1].count()
    return Move(new, moved=True, members=members, at=now, messages=tuple(messages))


def lock_room_states(room_id: int) -> None:
    """Serialize state changes of one room until commit.

    Two recipients' receipts for the same message, committed concurrently,
    would each see the other's watermark as it was before and neither would
    move the message. Holding this lock, each UPDATE of `advance_states`
    (a fresh snapshot under READ COMMITTED, Django's default) sees every
    watermark committed before it. An advisory lock rather than the room row:
    posts take that row for their seq, and receipts need not wait for them.
    """
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_xact_lock(%s, %s)", [RECEIPTS_LOCK, room_id % 2**31])
    else:
        # SQLite runs one writer at a time already; elsewhere, the row lock.
        list(Room.objects.select_for_update().filter(pk=room_id).values_list("pk", flat=True))


def recipients(room_id: Any, seq: Any, sender_id: Any) -> QuerySet[Membership]:
    """The memberships that are recipients of a message (values or `OuterRef`s)."""
    return Membership.objects.filter(room_id=room_id, joined_seq__lt=seq).exclude(user_id=sender_id)


def advance_states(room_id: int, after: int, upto: int, state: MessageState, now: datetime) -> list[MovedMessage]:
    """Move messages with seq in (after, upto] to `state` where every recipient
    reached it; returns the newest `STATES_PER_RECEIPT` of them, in seq order."""
    if upto <= after:
        return []
    watermark = "delivered" if state == MessageState.DELIVERED else "read"
    of_message = recipients(room_id, OuterRef("seq"), OuterRef("sender_id"))
    behind = of_message.filter(**{f"{watermark}__lt": OuterRef("seq")})
    earlier = [MessageState.SENT] if state == MessageState.DELIVERED else [MessageState.SENT, MessageState.DELIVERED]
    changes: dict[str, Any] = {"state": state}
    if state == MessageState.DELIVERED:
        changes["delivered_at"] = now
    else:
        # Every reader has delivered too (read <= delivered), so a message
        # skipping straight to read was delivered no later than now.
        changes["read_at"] = now
        changes["delivered_at"] = Coalesce(F("delivered_at"), now)
    in_range = Message.objects.filter(room_id=room_id, seq__gt=after, seq__lte=upto)
    if not in_range.filter(state__in=earlier).filter(Q(Exists(of_message)) & ~Q(Exists(behind))).update(**changes):
        return []
    # What this UPDATE moved, read back by its mark: the state with this
    # move's time. No other move of the room has that time (on a clock that
    # does not step back): moves of a room are serialized (`lock_room_states`)
    # and each takes its time once it holds the lock. A message this same
    # move takes on to read is read back here, before the read UPDATE runs.
    moved = in_range.filter(state=state, **{f"{watermark}_at": now}).order_by("-seq")
    newest = moved.values_list("seq", "sender_id")[: get_settings().STATES_PER_RECEIPT]
    return [MovedMessage(seq, sender, state) for seq, sender in reversed(newest)]


def recipient_receipts(message: Message) -> list[Membership]:
    """The recipients of `message`, oldest member first, each annotated with
    `delivered_at` and `read_at`: when its watermark first reached the seq
    (None if it has not, if it did so before moves were recorded, or if the
    move that did was pruned).

    One query, however many recipients.
    """

    def first_reached(watermark: str) -> Case:
        moves = WatermarkMove.objects.filter(membership=OuterRef("pk"), **{f"{watermark}__gte": message.seq})
        # The first move left that reached the seq is the one that did only if
        # no pruned move had: otherwise it would date a later receipt.
        return Case(
            When(**{f"pruned_{watermark}__gte": message.seq}, then=Value(None)),
            default=Subquery(moves.order_by(watermark, "at").values("at")[:1]),
            output_field=DateTimeField(),
        )

    return list(
        recipients(message.room_id, message.seq, message.sender_id)
        .select_related("user")
        .annotate(delivered_at=first_reached("delivered"), read_at=first_reached("read"))
        .order_by("joined_seq", "pk")
    )
