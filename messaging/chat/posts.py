"""`room.post` (protocol v1): a message stored under the room's next seq, exactly once.

Two forms: the portable `post_message` (ORM work in the pipeline's
transaction, with the command's record) and, on PostgreSQL, the batch
statement of `posts_and_records`, which stores every post of a batch and
their records in one round trip (messaging/chat/sql/posts_and_records.sql).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any, cast

import orjson
from django.db import connection
from django.utils import timezone

from ..conf import get_settings
from ..core.claims import Stored
from ..core.exceptions import Forbidden
from ..core.gateway import Gateway
from ..core.handlers import DECLINED, BatchEntries, CommandContext, Declined, command
from ..core.protocol import format_time, message_body, room_slug
from ..core.sql import statement
from ..events.outbox import EVENT_ID_SQL, emit, event_table, posted_event_id_sql, posted_events_sql
from ..files.models import Upload
from ..models import CommandRecord, Membership, Message, MessageState, Room
from ..signals import message_posted, send_on_commit
from .attachments import (
    attach,
    hold,
    kept,
    shown,
    statement_files,
    validate_attachments,
    with_files,
    with_or_without_files,
)
from .messages import display_name, msg_frame
from .models import Thread
from .nodes import node_of
from .policy import get_policy, overrides
from .rooms import joined_room_id
from .threads import count_reply, root_for_reply, thread_frame, validate_reply_to, with_or_without_threads


@dataclass(frozen=True)
class Post:
    room: str
    body: str
    # Upload ids (messaging/chat/attachments.py); with them the body may be empty.
    attachments: tuple[str, ...] = ()
    # The seq of the root it replies to (messaging/chat/threads.py).
    reply_to: int | None = None


def validate_post(d: dict[str, Any]) -> Post:
    files = validate_attachments(d)
    reply_to = validate_reply_to(d)
    body = d.get("body")
    if files and (body is None or (isinstance(body, str) and not body.strip())):
        return Post(room=room_slug(d), body="", attachments=files, reply_to=reply_to)
    body = message_body(d, get_settings().BODY_MAX_CHARS)
    return Post(room=room_slug(d), body=body, attachments=files, reply_to=reply_to)


def next_seq(room_id: int, changes: int = 1) -> tuple[int, int, int]:
    """Take the room's next seq, and `changes` revs and event positions (messaging/events/outbox.py):
    a reply takes two, its post's and its root's thread's. Returns the seq and the first rev and position.
    Holds the room's row lock until commit."""
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {Room._meta.db_table} SET last_seq = last_seq + 1, last_rev = last_rev + %s,"
            " last_event = last_event + %s WHERE id = %s RETURNING last_seq, last_rev - %s, last_event - %s",
            [changes, changes, room_id, changes - 1, changes - 1],
        )
        taken: tuple[int, int, int] = cursor.fetchone()
        return taken


def post_frame(
    ctx: CommandContext, post: Post, seq: int, at: str, rev: int, files: list[dict[str, Any]]
) -> dict[str, Any]:
    """A new post's `msg` frame, with its files and the root it replies to."""
    frame = msg_frame(post.room, seq, ctx.command_id, ctx.user, post.body, at, rev)
    with_files(frame["d"], files)
    if post.reply_to is not None:
        frame["d"]["reply_to"] = post.reply_to
    return frame


def posted(
    ctx: CommandContext,
    post: Post,
    seq: int,
    at: str,
    rev: int,
    files: list[dict[str, Any]],
    replies: int | None = None,
) -> dict[str, Any]:
    """A stored post's result (its ack's data), after queueing its `msg` frame (with its `files`) for the room,
    and a reply's `thread` frame (`replies`: its root's count with it), at its own rev, the next."""
    ctx.broadcast(post.room, post_frame(ctx, post, seq, at, rev, files))
    if post.reply_to is not None and replies is not None:
        ctx.broadcast(post.room, thread_frame(post.room, post.reply_to, replies, at, rev + 1))
    return post_result(post.room, seq, at)


def post_result(room: str, seq: int, at: str) -> dict[str, Any]:
    """A post's ack data, its keys in the order its record keeps them
    (`in_record_order`): each copy's ack is the original's."""
    return {"at": at, "seq": seq, "room": room}


@functools.cache
def with_tables(sql: str) -> str:
    """`sql` with the app's table names in place of {membership}, {room}, {message} and {record},
    and in place of {user_id} the column type of a user id.

    The user id's type is the host's (`AUTH_USER_MODEL`'s primary key:
    integer, bigint, uuid...): the posts come as JSON text and are cast to it,
    so that they compare with the membership's user column as they are.

    Once per statement and process: the batch statement is formatted for
    every batch otherwise, and neither changes while the process runs.
    """
    return sql.format(
        upload=Upload._meta.db_table,
        membership=Membership._meta.db_table,
        room=Room._meta.db_table,
        message=Message._meta.db_table,
        record=CommandRecord._meta.db_table,
        thread=Thread._meta.db_table,
        event=event_table(),
        user_id=Message._meta.get_field("sender").db_type(connection),
    )


# Every post of a batch in one statement: per post its record if it has one
# (`known`: a post applied before is answered by it and goes no further),
# else the membership check, per room the next seqs in batch order, then the
# messages and the records. In autocommit mode one statement is one
# transaction: one round trip where the portable path takes six per post
# (BEGIN, membership, seq, message, record, COMMIT), and a unique violation
# undoes all of it, like the portable path's rollback: a copy whose record
# another attempt committed after this statement's snapshot was taken, or
# two copies of one post in the statement, fail it on the record's unique
# constraint (then each post runs alone: messaging/core/apply.py). The
# rooms' row locks are taken by `locked`, a SELECT ... ORDER BY id FOR UPDATE
# of its own: PostgreSQL sorts first and then locks the rows one by one as
# they are pulled, so every batch locks its rooms in id order and two batches
# over the same rooms queue instead of deadlocking (a plain UPDATE ... FROM
# locks in whatever order its plan visits the rows). The UPDATE only touches
# rows `locked` has produced, so it never takes a lock out of that order.
# `stamp` is read once, after the last lock (its count(*) over `taken` waits
# for every update): later than any message committed before in these rooms,
# so sent_at never goes backwards against seq. The posts
# come as one JSON array of [room, user, id, body, fingerprint]: psycopg
# adapted five Python lists of 16 posts in 364 us, orjson this in 10 us.
# The statement also writes each post's event (messaging/events/outbox.py,
# at its `{events}`), so the outbox commits with the messages; the sender's
# name comes sixth, its home deployment seventh (null with federation off). The
# posts' files come apart, as `attachments` (messaging/chat/attachments.py):
# "[]" for a batch without any.
POSTS_AND_RECORDS = statement(__package__, "posts_and_records")

# The statement's `thread.changed` events (at `{thread_events}`; with the outbox on),
# each right after its reply's `message.posted` in the room's event order: the batch
# took as many positions as revs (`{thread_positions}`), and each event's position is
# as far after `events_before` as its rev is after `rev_before`.
THREAD_EVENTS = f""", thread_event AS (
    INSERT INTO {{event}} (event_id, type, room_id, room, position, data, created_at)
    SELECT {EVENT_ID_SQL}, 'thread.changed', x.room_id, i.room, t.events_before + (x.rev - t.rev_before),
           jsonb_build_object('room', i.room, 'seq', i.reply_to, 'replies', h.replies - x.later,
                              'last_reply_at', s.at_text, 'rev', x.rev,
                              'command_id', i.command_id, 'user', i.user_json),
           s.at
    FROM replied x JOIN item i USING (n) JOIN threaded h ON h.root_id = x.root_id
    JOIN taken t ON t.id = x.room_id, stamp s
    ORDER BY x.room_id, x.rev
)"""


def posts_statement(
    entries: list[tuple[CommandContext, Post, str]], attachments: str = "[]"
) -> tuple[str, dict[str, Any]]:
    """The batch statement of `entries` and its parameters."""
    items = [
        [
            post.room,
            ctx.user.pk,
            ctx.command_id,
            post.body,
            fingerprint,
            display_name(ctx.user),
            node_of(ctx.user),
            post.reply_to,
        ]
        for ctx, post, fingerprint in entries
    ]
    events = posted_events_sql()
    replies = any(post.reply_to is not None for _, post, _ in entries)
    sql = with_or_without_threads(POSTS_AND_RECORDS, replies)
    sql = (
        sql.replace("{events}", events)
        .replace("{event_id}", posted_event_id_sql())
        .replace("{thread_events}", THREAD_EVENTS if events else "")
        .replace("{thread_positions}", "l.replies" if events and replies else "0")
    )
    return with_tables(with_or_without_files(sql, attachments != "[]")), {
        "items": orjson.dumps(items).decode(),
        "attachments": attachments,
        "state": MessageState.SENT,
        "type": entries[0][0].type,
        "count": len(items),
    }


def posts_results(
    entries: list[tuple[CommandContext, Post, str]],
    rows: list[tuple[Any, ...]],
    files: list[list[dict[str, Any]]] | None = None,
) -> list[dict[str, Any] | Forbidden | Stored | Declined]:
    """Per entry, from the statement's rows: its ack data (`n`, seq, time as the protocol's text, rev),
    or its record (`Stored`: applied before, left alone), or `DECLINED` (its files: neither seq
    nor record), or for a non-member (no row) `Forbidden`."""
    found = {row[0]: row[1:] for row in rows}
    results: list[dict[str, Any] | Forbidden | Stored | Declined] = []
    for n, (ctx, post, _) in enumerate(entries, start=1):
        if n not in found:
            results.append(Forbidden("join the room first"))
            continue
        seq, at, rev, fingerprint, result, replies = found[n]
        if seq is None and result is None:
            results.append(DECLINED)
        elif seq is None:
            results.append(Stored(fingerprint, orjson.loads(result)))
        else:
            results.append(posted(ctx, post, seq, at, rev, files[n - 1] if files else [], replies))
    return results


async def posts_and_records(
    gateway: Gateway, batch: BatchEntries
) -> list[dict[str, Any] | Forbidden | Stored | Declined] | None:
    """`room.post`'s batch form on PostgreSQL: the posts and their `CommandRecord`s in one statement.

    A post whose record is there already is answered by it and changes
    nothing; posts by non-members are refused with `Forbidden`; the others
    are stored, but for a post with files the statement cannot hold, which
    it declines. So the statement may run before the claims come back
    (`early_batch`): what it applies, nothing else had.
    A host policy's own `can_post` is asked by the portable path only.
    """
    # `room.post`'s: validated `Post`s, exactly once, so each with its fingerprint.
    entries = cast(list[tuple[CommandContext, Post, str]], batch)
    if overrides("can_post"):
        return None
    if not any(post.attachments for _, post, _ in entries):
        results = posts_results(entries, await gateway.fetch(*posts_statement(entries)))
    else:
        files = await statement_files(gateway, [post.attachments for _, post, _ in entries])
        if files is None:
            return None
        results = posts_results(entries, await gateway.fetch(*posts_statement(entries, files[0])), files[1])
    if message_posted.has_listeners(Message):
        # The statement has committed (or commits with the caller's transaction, where
        # it runs in one): `message_posted` per post it stored, on a database thread.
        stored = [ctx for (ctx, _, _), result in zip(entries, results) if isinstance(result, dict)]
        if stored:
            await gateway.run(signal_posts, stored)
    return results


def signal_posts(stored: list[CommandContext]) -> None:
    """`message_posted` for each post the batch statement stored, from the `msg` frame `posted` queued
    (a reply's `thread` frame follows it)."""
    for ctx in stored:
        room, frame = next((room, frame) for room, frame in ctx.broadcasts if frame["t"] == "msg")
        d = frame["d"]
        send_on_commit(
            message_posted, Message, room=room, seq=d["seq"], user=ctx.user, command_id=ctx.command_id, message=d
        )


@command("room.post", validate=validate_post, batch={"postgresql": posts_and_records}, early_batch=True, lane="room")
def post_message(ctx: CommandContext, post: Post) -> dict[str, Any]:
    room_id = joined_room_id(ctx.user, post.room)
    if overrides("can_post") and not get_policy().can_post(ctx.user, Room.objects.get(pk=room_id)):
        raise Forbidden("you may not post in this room")
    uploads = hold(ctx, post.attachments)
    seq, rev, position = next_seq(room_id, 1 if post.reply_to is None else 2)
    # Under the room's row lock: a delete of the root that committed before is seen.
    root_id = None if post.reply_to is None else root_for_reply(room_id, post.reply_to)
    sent_at = timezone.now()
    at = format_time(sent_at)
    files = [kept(upload) for upload in uploads]
    frame = post_frame(ctx, post, seq, at, rev, shown(files))
    event_id = emit(ctx, "message.posted", post.room, frame["d"], at=(room_id, position))
    Message.objects.create(
        room_id=room_id,
        seq=seq,
        sender=ctx.user,
        client_msg_id=ctx.command_id,
        body=post.body,
        sent_at=sent_at,
        posted_rev=rev,
        rev=rev,
        posted_event_id=event_id,
        attachments=files or None,
        reply_to=post.reply_to,
    )
    attach(uploads, room_id, seq)
    ctx.broadcast(post.room, frame)
    if post.reply_to is not None and root_id is not None:
        count_reply(ctx, post.room, (room_id, position + 1), post.reply_to, root_id, sent_at, rev + 1)
    send_on_commit(
        message_posted, Message, room=post.room, seq=seq, user=ctx.user, command_id=ctx.command_id, message=frame["d"]
    )
    return post_result(post.room, seq, at)
