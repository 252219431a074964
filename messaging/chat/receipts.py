"""Receipt watermarks and message states.

Each member has two cumulative watermarks per room, `delivered` and `read`.
They only move forward (`new = max(old, given)`), and `read` implies
`delivered`. A message is `delivered` (`read`) once every recipient's
watermark reached its seq, where the recipients are the room's members other
than the sender who had joined before it was posted. States never move back.

A move is applied in one transaction: the membership row, a `WatermarkMove`
(when it happened, for the per-recipient view) and the message states, with
one set-based UPDATE per state over the seq range that moved. Whether a
message has reached a state is read from the room's two lowest *effective*
watermarks, greatest(watermark, joined_seq), by an index (migration 0016):
the cost of a move does not grow with the room. On PostgreSQL the receipts
that arrive together, from any senders, are one call of the function
`messaging_move_watermarks_v4` (migrations 0016 and 0029: a
`member.watermarks` event too in a room shared with another deployment),
one transaction (`move_watermarks_by_function`,
`receipt`'s batch form there, a `gathered` type: messaging/core/pipeline.py);
elsewhere the ORM's statements of `move_watermarks_portably`, the type's
`apply`, make the same move with the same test.

A move also says what it did, for the frames that tell it (`commands.py`):
the messages it moved, each with its sender and new state (the newest
`STATES_PER_RECEIPT` per state), and how many members the room has, counted
up to one past `MEMBERS_ON_JOIN`.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from types import SimpleNamespace
from typing import Any

from django.db import connection
from django.db.models import Case, DateTimeField, F, OuterRef, Q, QuerySet, Subquery, Value, When
from django.db.models.functions import Coalesce, Greatest
from django.utils import timezone

from ..conf import get_settings
from ..core.exceptions import CommandError, Forbidden, Invalid
from ..core.gateway import Gateway
from ..core.protocol import format_time
from ..core.sql import statement
from ..events.outbox import emit_many
from ..models import Membership, Message, MessageState, PeerRoom, Room, WatermarkMove

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


@dataclass(frozen=True)
class Asked:
    """One receipt as its sender gave it: whose, which room, the watermarks, its command id."""

    user: Any
    room: str
    delivered: int | None
    read: int | None
    command_id: str = ""


# Several receipts' moves as one call (migration 0016), through the gateway.
MOVE_CALL = statement(__package__, "move_watermarks")


def move_parameters(asked: list[Asked]) -> dict[str, Any]:
    conf = get_settings()
    return {
        "rooms": [a.room for a in asked],
        "users": [a.user.pk for a in asked],
        "delivered": [a.delivered for a in asked],
        "read": [a.read for a in asked],
        "command_ids": [a.command_id for a in asked],
        "members_upto": conf.MEMBERS_ON_JOIN,
        "states_limit": conf.STATES_PER_RECEIPT,
        "events": conf.EVENTS_OUTBOX,
    }


async def move_watermarks_by_function(gateway: Gateway, asked: list[Asked]) -> list[Move | CommandError]:
    """Move each receipt's watermarks forward, all in one call of the
    database's function (PostgreSQL), one transaction, through the gateway.

    Per receipt, in the given order, its `Move`, or the `Forbidden` (a
    non-member) or `Invalid` (a seq beyond the room's last one) refusing it;
    a refused receipt changes nothing, and nothing of the others.
    """
    return called_moves(await gateway.fetch(MOVE_CALL, move_parameters(asked)), asked)


def called_moves(rows: list[tuple[Any, ...]], asked: list[Asked]) -> list[Move | CommandError]:
    """Per receipt of `asked`, the `Move` of the function's row for it (rows come room by room), or its refusal."""
    by_receipt = {row[0]: row[1:] for row in rows}
    moves: list[Move | CommandError] = []
    for i, receipt in enumerate(asked, start=1):
        try:
            moves.append(called_move(by_receipt[i], receipt.delivered, receipt.read))
        except CommandError as exc:
            moves.append(exc)
    return moves


def called_move(row: tuple[Any, ...], delivered: int | None, read: int | None) -> Move:
    """The `Move` of one receipt's row, or raises its refusal (nothing changed then)."""
    (
        last_seq,
        old_delivered,
        old_read,
        new_delivered,
        new_read,
        members,
        at,
        delivered_seqs,
        delivered_senders,
        read_seqs,
        read_senders,
    ) = row
    if last_seq is None:
        raise Forbidden("join the room first")
    if new_delivered is None:
        beyond_last_seq(last_seq, delivered, read)
    new = Watermarks(new_delivered, new_read)
    if new == Watermarks(old_delivered, old_read):
        return Move(new, moved=False)
    messages = [
        MovedMessage(seq, sender, state)
        for state, seqs, senders in (
            (MessageState.DELIVERED, delivered_seqs, delivered_senders),
            (MessageState.READ, read_seqs, read_senders),
        )
        for seq, sender in zip(seqs or (), senders or (), strict=True)
    ]
    return Move(new, moved=True, members=members, at=at, messages=tuple(messages))


def beyond_last_seq(last_seq: int, delivered: int | None, read: int | None) -> None:
    """Raise `Invalid` for the first of `delivered`, `read` beyond the room's last seq."""
    for name, value in (("delivered", delivered), ("read", read)):
        if value is not None and value > last_seq:
            raise Invalid(f"{name} {value} is beyond the room's last seq {last_seq}")


def move_watermarks_portably(
    user: Any, room_slug: str, delivered: int | None, read: int | None, command_id: str = ""
) -> Move:
    """`move_watermarks` in the ORM's statements, for any database: at most
    eleven round trips (the ORM has no UPDATE ... RETURNING, so each state's
    moved messages are read back, and the members counted)."""
    room = lock_room_states(room_slug)
    if room is None:
        raise Forbidden("join the room first")
    membership = Membership.objects.select_for_update().filter(room_id=room[0], user=user).first()
    if membership is None:
        raise Forbidden("join the room first")
    beyond_last_seq(room[1], delivered, read)

    old = Watermarks(membership.delivered, membership.read)
    new = old.forward(delivered, read)
    if new == old:
        return Move(old, moved=False)

    now = timezone.now()
    Membership.objects.filter(pk=membership.pk).update(delivered=new.delivered, read=new.read)
    WatermarkMove.objects.create(membership=membership, delivered=new.delivered, read=new.read, at=now)
    # This member is a recipient only of messages after it joined: nothing at
    # or below `joined_seq` can change state because of its receipts.
    floor = membership.joined_seq
    messages: list[MovedMessage] = []
    events: list[tuple[int, MessageState]] = []
    if new.delivered > old.delivered:
        messages += advance_states(
            membership, max(old.delivered, floor), new.delivered, MessageState.DELIVERED, now, events
        )
    if new.read > old.read:
        messages += advance_states(membership, max(old.read, floor), new.read, MessageState.READ, now, events)
    conf = get_settings()
    members = Membership.objects.filter(room_id=membership.room_id)[: conf.MEMBERS_ON_JOIN + 1].count()
    # Last, as the room's row is an effect's last lock (messaging/events/outbox.py).
    at = format_time(now)
    cause = SimpleNamespace(command_id=command_id, user=user)
    emit_many(
        cause,
        "message.state",
        room_slug,
        [{"room": room_slug, "seq": seq, "state": state.value, "at": at} for seq, state in events],
    )
    # With federation off (no `NODE`) no room is shared, and the question costs nothing.
    if conf.NODE and PeerRoom.objects.filter(room_id=membership.room_id).exists():
        # A room shared with another deployment: the move is a change its replicas hear of (as migration 0029's).
        moved = {"room": room_slug, "user": user.pk, "delivered": new.delivered, "read": new.read, "members": members}
        emit_many(cause, "member.watermarks", room_slug, [moved])
    return Move(new, moved=True, members=members, at=now, messages=tuple(messages))


def lock_room_states(room_slug: str) -> tuple[int, int] | None:
    """Serialize state changes of one room until commit; the room's id and
    last seq (None: no such room).

    Two recipients' receipts for the same message, committed concurrently,
    would each see the other's watermark as it was before and neither would
    move the message. Holding this lock, each UPDATE of `advance_states`
    (a fresh snapshot under READ COMMITTED, Django's default) sees every
    watermark committed before it. An advisory lock rather than the room row:
    posts take that row for their seq, and receipts need not wait for them.
    Taken before the member's row, as the function takes them (migration
    0016), so that receipts of one room cannot deadlock.
    """
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute(
                f"SELECT id, last_seq, pg_advisory_xact_lock(%s, mod(id, 2147483648)::integer) "
                f"FROM {connection.ops.quote_name(Room._meta.db_table)} WHERE slug = %s",
                [RECEIPTS_LOCK, room_slug],
            )
            row = cursor.fetchone()
        return None if row is None else (row[0], row[1])
    # SQLite runs one writer at a time already; elsewhere, the row lock.
    return Room.objects.select_for_update().filter(slug=room_slug).values_list("pk", "last_seq").first()


def recipients(room_id: Any, seq: Any, sender_id: Any) -> QuerySet[Membership]:
    """The memberships that are recipients of a message (values or `OuterRef`s)."""
    return Membership.objects.filter(room_id=room_id, joined_seq__lt=seq).exclude(user_id=sender_id)


def advance_states(
    mover: Membership, after: int, upto: int, state: MessageState, now: datetime, events: list[tuple[int, MessageState]]
) -> list[MovedMessage]:
    """Move messages with seq in (after, upto] to `state` where every recipient
    reached it; returns the newest `STATES_PER_RECEIPT` of them, in seq order,
    and adds every one's `(seq, state)` to `events`, for its `message.state` event.

    `mover` (whose watermark just reached `upto`, and who joined at or
    before `after`) is a recipient of every message of the range but its
    own. The test is migration 0016's, in one UPDATE whose subqueries are
    uncorrelated and read one or two index rows each: no other member's
    effective watermark, greatest(watermark, joined_seq), is behind the
    message, and one of the mover's own messages has another member who
    joined before it.
    """
    if upto <= after:
        return []
    watermark = "delivered" if state == MessageState.DELIVERED else "read"
    room_id = mover.room_id
    by_effective = (
        Membership.objects.filter(room_id=room_id)
        .annotate(effective=Greatest(watermark, "joined_seq"))
        .order_by("effective")
    )
    lowest = Subquery(by_effective.values("effective")[:1])
    # The lowest among the members other than the one holding the lowest (on a tie, the same).
    second = Subquery(by_effective.values("effective")[1:2])
    lowest_member = Subquery(by_effective.values("user_id")[:1])
    no_other_behind = Q(seq__lte=Case(When(sender_id=lowest_member, then=second), default=lowest))
    first_other = Subquery(
        Membership.objects.filter(room_id=room_id)
        .exclude(user_id=mover.user_id)
        .order_by("joined_seq")
        .values("joined_seq")[:1]
    )
    has_recipient = ~Q(sender_id=mover.user_id) | Q(seq__gt=first_other)
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
    if not in_range.filter(state__in=earlier).filter(no_other_behind & has_recipient).update(**changes):
        return []
    # What this UPDATE moved, read back by its mark: the state with this
    # move's time. No other move of the room has that time (on a clock that
    # does not step back): moves of a room are serialized (`lock_room_states`)
    # and each takes its time once it holds the lock. A message this same
    # move takes on to read is read back here, before the read UPDATE runs.
    moved = in_range.filter(state=state, **{f"{watermark}_at": now}).order_by("-seq")
    limit = get_settings().STATES_PER_RECEIPT
    if get_settings().EVENTS_OUTBOX:
        # Every one of them has its event: read back in full, in the same one query.
        everything = list(moved.values_list("seq", "sender_id"))
        events.extend((seq, state) for seq, _ in reversed(everything))
        newest = everything[:limit]
    else:
        newest = list(moved.values_list("seq", "sender_id")[:limit])
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
