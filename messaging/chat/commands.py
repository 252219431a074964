"""The built-in command types: room.join and receipt of protocol v1, room.members
of 1.1 (room.post is messaging/chat/posts.py)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any, cast

from django.db.models import QuerySet

from ..conf import get_settings
from ..core.exceptions import CommandError, Forbidden, Invalid
from ..core.gateway import Gateway
from ..core.handlers import BatchEntries, CommandContext, command
from ..core.protocol import format_time, optional_seq, room_slug
from ..models import Membership, Message, Room
from .hooks import join_hooks
from .invitations import may_accept
from .messages import display_name, stored_msg_frame
from .nodes import node_of
from .policy import get_policy
from .receipts import Asked, Move, move_watermarks_by_function, move_watermarks_portably
from .replay import changes_since
from .rooms import add_member, joined_room_id, room_to_join
from .shown import with_reactions
from .sizes import join_ack_that_fits, members_page_that_fits
from .unread import unread_in
from .users import optional_user_id

# Members, as the join ack and room.members list them ------------------------

# The most entries of one `room.members` page (PROTOCOL.md 1.1 fixes it).
MEMBERS_PAGE = 100


def members_in_order(room_id: int) -> QuerySet[Membership]:
    """A room's members in `room.members`' order: by user id, which `after` names,
    so a page follows from the previous one's last entry through the
    membership's unique index, even if that member has left since."""
    return Membership.objects.filter(room_id=room_id).select_related("user").order_by("user_id")


def member_entry(membership: Membership) -> dict[str, Any]:
    # `joined_seq` (an extension) lets a client tell a message's recipients,
    # and so show the states the server records.
    entry = {
        "user": membership.user_id,
        "name": display_name(membership.user),
        "delivered": membership.delivered,
        "read": membership.read,
        "joined_seq": membership.joined_seq,
    }
    node = node_of(membership.user)
    if node is not None:
        entry["node"] = node
    return entry


def members_on_join(room: Room, user: Any) -> tuple[list[dict[str, Any]], int]:
    """The join ack's `members` and `members_total`.

    `members` is the first page of `room.members`' order, `MEMBERS_ON_JOIN`
    long, with the joining user's own entry on it: where it would not be, it
    takes the place of the page's last (it comes after all of them in that
    order). A client resumes its receipts from its own watermarks. Two
    queries at most, each bounded, and the count only when the page is full.
    """
    limit = get_settings().MEMBERS_ON_JOIN
    page = list(members_in_order(room.pk)[:limit])
    if len(page) < limit:
        return [member_entry(m) for m in page], len(page)
    if not any(m.user_id == user.pk for m in page):
        page[-1] = members_in_order(room.pk).get(user_id=user.pk)
    return [member_entry(m) for m in page], Membership.objects.filter(room=room).count()


# room.join ------------------------------------------------------------------


@dataclass(frozen=True)
class Join:
    room: str
    since: int | None
    # PROTOCOL 1.1: every change after this rev instead of the messages after `since`.
    since_rev: int | None = None
    # Per join hook (messaging/chat/hooks.py), in order, what it made of `d`.
    options: tuple[Any, ...] = ()


def validate_join(d: dict[str, Any]) -> Join:
    join = Join(room=room_slug(d), since=optional_seq(d, "since"), since_rev=optional_seq(d, "since_rev"))
    if join.since is not None and join.since_rev is not None:
        raise Invalid("give since or since_rev, not both")
    return replace(join, options=tuple(hook.validate(d) for hook in join_hooks()))


@command(
    "room.join",
    validate=validate_join,
    exactly_once=False,
    subscribes_to=lambda join: join.room,
    member_list=True,
)
def join_room(ctx: CommandContext, join: Join) -> dict[str, Any]:
    room = room_to_join(ctx.user, join.room, ctx.client_address)
    read = Membership.objects.filter(room=room, user=ctx.user).values_list("read", flat=True).first()
    member = read is not None
    # An invitee accepts by joining (PROTOCOL.md 1.2), a private room too.
    if not (get_policy().can_join(ctx.user, room, member=member) or not member and may_accept(ctx.user, room)):
        raise Forbidden("this room is private: join it by invitation")
    if not member:
        room, _ = add_member(room, ctx.user, ctx.command_id)
        read = 0
    members, members_total = members_on_join(room, ctx.user)
    conf = get_settings()
    # `room` was read before the backlog: every change after its last_rev
    # is in the backlog or arrives live (the socket subscribed first).
    # `private` and `owner` (extensions): a client shows a private room's owner its invite control.
    ack = {
        "room": room.slug,
        "last_seq": room.last_seq,
        "last_rev": room.last_rev,
        "members": members,
        "members_total": members_total,
        "private": room.private,
        "owner": room.owner_id,
        **unread_in(room.pk, ctx.user, cast(int, read)),  # a member's, or 0 for the newcomer
    }
    if join.since_rev is not None:
        frames, ack["rev_upto"] = changes_since(
            room, join.since_rev, ctx.user, limit=conf.REPLAY_LIMIT, max_bytes=conf.MAX_SEND_BUFFER // 2
        )
        ctx.replies.extend(frames)
        # No backlog: a hook sends what it has for the messages the client holds.
        return replayed(ack, ctx, join_hook_replies(ctx, room, join, []))
    messages = Message.objects.filter(room=room).select_related("sender", "thread")
    if join.since is None:
        backlog = list(messages.order_by("-seq")[: conf.RECENT_ON_JOIN])[::-1]
    else:
        backlog = list(messages.filter(seq__gt=join.since).order_by("seq")[: conf.REPLAY_LIMIT])
    frames = [stored_msg_frame(message, room.slug, ctx.user) for message in backlog]
    with_reactions([frame["d"] for frame in frames], backlog, ctx.user)
    ctx.replies.extend(frames)
    if join.since is None:
        # The newest messages and their counts, each in its current state.
        ack["rev_upto"] = room.last_rev
    return replayed(ack, ctx, join_hook_replies(ctx, room, join, backlog))


def join_hook_replies(ctx: CommandContext, room: Room, join: Join, backlog: list[Message]) -> list[dict[str, Any]]:
    """What the join hooks (messaging/chat/hooks.py) send after the backlog."""
    replies: list[dict[str, Any]] = []
    for hook, options in zip(join_hooks(), join.options):
        replies.extend(hook.replies(ctx, room, options, backlog))
    return replies


def replayed(ack: dict[str, Any], ctx: CommandContext, more: list[dict[str, Any]]) -> dict[str, Any]:
    """The join ack with `replayed` (an extension): how many of the room's frames follow it
    as this join's backlog, before any live frame, so a client knows when it is at
    `rev_upto`; and with the members that fit in its frame (messaging/chat/sizes.py)."""
    ctx.replies.extend(more)
    ack["replayed"] = len(ctx.replies)
    return join_ack_that_fits(ack, ctx.command_id, ctx.user.pk)


# room.members ---------------------------------------------------------------


@dataclass(frozen=True)
class MembersPage:
    room: str
    # The user id of the previous page's last entry; None for the first page.
    after: Any


def validate_members(d: dict[str, Any]) -> MembersPage:
    return MembersPage(room=room_slug(d), after=optional_user_id(d, "after"))


@command("room.members", validate=validate_members, exactly_once=False, member_list=True)
def list_members(ctx: CommandContext, page: MembersPage) -> dict[str, Any]:
    """One page of a room's members, in a stable order (`members_in_order`); members only."""
    members = members_in_order(joined_room_id(ctx.user, page.room))
    if page.after is not None:
        members = members.filter(user_id__gt=page.after)
    found = list(members[: MEMBERS_PAGE + 1])
    return members_page_that_fits(
        ctx.command_id, page.room, [member_entry(m) for m in found[:MEMBERS_PAGE]], len(found) > MEMBERS_PAGE
    )


# receipt --------------------------------------------------------------------


@dataclass(frozen=True)
class Receipt:
    room: str
    delivered: int | None
    read: int | None


def validate_receipt(d: dict[str, Any]) -> Receipt:
    receipt = Receipt(room=room_slug(d), delivered=optional_seq(d, "delivered"), read=optional_seq(d, "read"))
    if receipt.delivered is None and receipt.read is None:
        raise Invalid("give delivered and/or read")
    return receipt


def receipt_moved(ctx: CommandContext, receipt: Receipt, move: Move) -> dict[str, Any]:
    """The receipt's ack data, after queueing the frames that tell its move.

    A move is broadcast to the room as `status` while the room has at most
    `MEMBERS_ON_JOIN` members: in a bigger one every receipt would be a frame
    to every socket, N² frames when N members read. Each message it moved
    on is told to its sender alone, as `state`, in every room.
    """
    marks = move.watermarks
    if move.moved and move.members <= get_settings().MEMBERS_ON_JOIN:
        status = {"room": receipt.room, "user": ctx.user.pk, "delivered": marks.delivered, "read": marks.read}
        ctx.broadcast(receipt.room, {"t": "status", "d": status})
    if move.messages:
        at = format_time(cast(datetime, move.at))  # a move that moved messages has its time
        for message in move.messages:
            state = {"room": receipt.room, "seq": message.seq, "state": message.state.value, "at": at}
            ctx.send_to_user(message.sender, {"t": "state", "d": state}, room=receipt.room)
    return {"room": receipt.room, "delivered": marks.delivered, "read": marks.read}


async def receipts_on_postgresql(gateway: Gateway, batch: BatchEntries) -> list[dict[str, Any] | CommandError]:
    """`receipt`'s batch form on PostgreSQL: the receipts that arrived together,
    from any senders, in one call of the database's function (migration 0016),
    one transaction; each gets its own answer, a refusal its own alone."""
    # `receipt`'s: validated `Receipt`s, not exactly-once (no fingerprint).
    entries = cast(list[tuple[CommandContext, Receipt, None]], batch)
    asked = [
        Asked(ctx.user, receipt.room, receipt.delivered, receipt.read, ctx.command_id) for ctx, receipt, _ in entries
    ]
    moves = await move_watermarks_by_function(gateway, asked)
    return [
        move if isinstance(move, CommandError) else receipt_moved(ctx, receipt, move)
        for (ctx, receipt, _), move in zip(entries, moves, strict=True)
    ]


@command(
    "receipt",
    validate=validate_receipt,
    exactly_once=False,
    batch={"postgresql": receipts_on_postgresql},
    gathered=True,
)
def receipt(ctx: CommandContext, receipt: Receipt) -> dict[str, Any]:
    move = move_watermarks_portably(ctx.user, receipt.room, receipt.delivered, receipt.read, ctx.command_id)
    return receipt_moved(ctx, receipt, move)
