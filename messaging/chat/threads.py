"""Threads (PROTOCOL.md 1.2): `room.post`'s `reply_to`, a root's count of replies, `room.thread`.

A reply names its root by seq: a message of the same room that is not
itself a reply and not deleted (`root_for_reply`; else `invalid`, and
nothing changes). Threads are one level deep.

A root's thread is a row of its own (`Thread`, messaging/chat/models.py),
made by its first reply: `replies` (every reply ever posted to it, deleted
ones too: a deleted reply stays in the thread as a tombstone, as it stays
in the room's history), `last_reply_at` and `rev`. Both forms of
`room.post` count a reply in the post's transaction, under the room's row
lock they hold for its seq, so counts never skip or repeat.

**The `thread` frame takes its own rev.** A reply is two changes: its
post takes the room's next rev, and the root's thread the one after, in
the same transaction (the room's `last_rev` goes up by two). The `thread`
frame carries the thread's rev, which the root's `Thread` keeps, and a
`since_rev` replay sends it at that place, after the reply's `msg`. So
every frame's rev is unique and revs stay gapless, and a replica applies
the thread change in the rev order, as any other (messaging/federation).

A deleted root keeps its thread: `room.thread` still pages its replies
(the root as a tombstone), its tombstone's frames still carry `replies`,
but it takes no new replies.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db.models import F

from ..core.exceptions import Invalid
from ..core.handlers import CommandContext, command
from ..core.protocol import format_time, optional_seq, room_slug
from ..events.outbox import emit
from ..models import Message, Room
from .edits import message_seq
from .messages import stored_msg_frame
from .models import Thread
from .rooms import joined_room
from .shown import with_reactions
from .sizes import thread_page_length

# PROTOCOL.md 1.2 fixes the page's bounds.
THREAD_DEFAULT = 50
THREAD_MAX = 100


def validate_reply_to(d: dict[str, Any]) -> int | None:
    """`room.post`'s `reply_to`: the seq of the root, or None."""
    value = d.get("reply_to")
    if value is None:
        return None
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise Invalid("reply_to must be the seq (an integer >= 1) of a message of the room")
    return value


def root_for_reply(room_id: int, seq: int) -> int:
    """The id of message `seq` of the room, if a reply may name it: else `Invalid`."""
    found = Message.objects.filter(room_id=room_id, seq=seq).values_list("id", "reply_to", "deleted_at").first()
    if found is None:
        raise Invalid(f"reply_to: no message {seq} in this room")
    root_id, reply_to, deleted_at = found
    if reply_to is not None:
        raise Invalid(f"reply_to: message {seq} is a reply itself; reply to its root, {reply_to}")
    if deleted_at is not None:
        raise Invalid(f"reply_to: message {seq} is deleted")
    return root_id


# The posts' statement's parts for replies (sql/posts_and_records.sql), as for
# files (messaging/chat/attachments.py): between `-- threads:begin` and
# `-- threads:end`, the lines that end in `-- threads`, and the final
# select's count and joins. A batch without replies gets the statement without them.
THREADS_BLOCK = re.compile(r"^-- threads:begin.*?^-- threads:end\n", re.S | re.M)
THREADS_LINE = re.compile(r"^.*-- threads\n", re.M)
THREADS_MARK = re.compile(r"^-- threads:(begin|end).*\n|  -- threads$", re.M)
THREAD_JOINS = " LEFT JOIN replied x USING (n) LEFT JOIN threaded h ON h.root_id = x.root_id"


@functools.cache
def with_or_without_threads(sql: str, threads: bool) -> str:
    """The posts' statement `sql` with its parts for replies, or without them (a batch without replies)."""
    if threads:
        sql = THREADS_MARK.sub("", sql)
        for mark, part in THREAD_PARTS.items():
            sql = sql.replace(mark, part)
        return sql
    plain = THREADS_LINE.sub("", THREADS_BLOCK.sub("", sql)).replace("{thread_replies}", "NULL::bigint")
    for mark in [*THREAD_PARTS, "{thread_events}"]:
        plain = plain.replace(mark, "")
    return plain


# The statement's parts for replies at their marks (a batch without replies has none of them):
# a reply takes two revs, its post's and its thread's, the next.
THREAD_PARTS = {
    "{thread_replies}": "h.replies - x.later",
    "{thread_joins}": THREAD_JOINS,
    "{thread_revs}": " + l.replies",
    "{thread_revs_back}": " - l.replies",
    "{thread_rev}": " + earlier",
}


def thread_frame(room: str, seq: int, replies: int, last_reply_at: str, rev: int | None) -> dict[str, Any]:
    return {
        "t": "thread",
        "d": {"room": room, "seq": seq, "replies": replies, "last_reply_at": last_reply_at, "rev": rev},
    }


def count_reply(
    ctx: CommandContext, room: str, place: tuple[int, int], root: int, root_id: int, at: datetime, rev: int
) -> None:
    """The portable form's count of a reply (its post holds the room's row lock and took the
    thread's `rev` and event position, the room's id and it in `place`), its `thread.changed`
    event and its `thread` frame, after the reply's `msg`."""
    room_id = place[0]
    updated = Thread.objects.filter(root_id=root_id).update(replies=F("replies") + 1, last_reply_at=at, rev=rev)
    if not updated:
        Thread.objects.create(root_id=root_id, room_id=room_id, replies=1, last_reply_at=at, rev=rev)
    replies = Thread.objects.filter(root_id=root_id).values_list("replies", flat=True).get()
    frame = thread_frame(room, root, replies, format_time(at), rev)
    emit(ctx, "thread.changed", room, frame["d"], at=place)
    ctx.broadcast(room, frame)


def changed_threads(room: Room, since_rev: int, upto: int, limit: int) -> list[tuple[int, int, dict[str, Any]]]:
    """A `since_rev` replay's threads (messaging/chat/replay.py): each one changed in
    (since_rev, upto], one `thread` frame at its latest reply's place."""
    found = (
        Thread.objects.filter(room=room, rev__gt=since_rev, rev__lte=upto)
        .order_by("rev")
        .values_list("root__seq", "replies", "last_reply_at", "rev")[:limit]
    )
    return [
        (rev or 0, rev or 0, thread_frame(room.slug, seq, replies, format_time(at), rev))
        for seq, replies, at, rev in found
    ]


# room.thread ----------------------------------------------------------------


@dataclass(frozen=True)
class ThreadPage:
    room: str
    seq: int
    after: int
    limit: int


def validate_thread(d: dict[str, Any]) -> ThreadPage:
    after = optional_seq(d, "after")
    limit = d.get("limit", THREAD_DEFAULT)
    if limit is None:
        limit = THREAD_DEFAULT
    if not isinstance(limit, int) or isinstance(limit, bool) or not 1 <= limit <= THREAD_MAX:
        raise Invalid(f"limit must be an integer from 1 to {THREAD_MAX}")
    return ThreadPage(room=room_slug(d), seq=message_seq(d), after=after or 0, limit=limit)


@command("room.thread", validate=validate_thread, exactly_once=False)
def room_thread(ctx: CommandContext, page: ThreadPage) -> dict[str, Any]:
    """The root and one page of its replies, oldest first, after `after`; members only.
    Three queries: the root, the replies (the index of `reply_to`), their reactions."""
    room = joined_room(ctx.user, page.room)
    root = Message.objects.filter(room=room, seq=page.seq).select_related("sender", "thread").first()
    if root is None:
        raise Invalid(f"no message {page.seq} in room {page.room}")
    if root.reply_to is not None:
        raise Invalid(f"message {page.seq} is a reply; its thread is {root.reply_to}'s")
    found = list(
        Message.objects.filter(room=room, reply_to=page.seq, seq__gt=page.after)
        .select_related("sender")
        .order_by("seq")[: page.limit + 1]
    )
    messages = [root, *found[: page.limit]]
    frames = [stored_msg_frame(m, room.slug, ctx.user)["d"] for m in messages]
    with_reactions(frames, messages, ctx.user)
    root_d, replies = frames[0], frames[1:]
    kept = thread_page_length(ctx.command_id, room.slug, root_d, replies)
    return {"room": room.slug, "root": root_d, "replies": replies[:kept], "more": len(found) > kept}
