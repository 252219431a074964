"""Writing events: one call from inside the effect's transaction.

Every effect's event goes through `emit` (or, for a statement that writes the
effect itself, the SQL of `POSTED_EVENTS`), so the event commits or rolls back
with the effect, never one without the other. The event's place in its room
is the room's event counter, `Room.last_event`, bumped under the room's row
lock. A change that takes a `rev` (a post, edit, delete or reaction) takes
its position in the same UPDATE (`messaging/chat/revs.py`) and passes it as
`at`; a receipt, which takes no rev, bumps the counter here, after the
messages it moved: the room's row is its last lock.

The event's `data` is the `d` of the frame that told the change to the room,
plus `command_id` and `user` of the command that caused it
(docs/EVENTS.md has every type).
"""

from __future__ import annotations

from typing import Any
from uuid import UUID

import orjson
from django.db import connection
from django.utils import timezone

from ..conf import get_settings
from ..ids import uuid7
from .models import Event


def room_table() -> str:
    from ..models import Room

    return Room._meta.db_table


def take_positions(room: str, count: int) -> tuple[int, int]:
    """The room's id and the first of `count` new event positions; holds the room's row lock until commit."""
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {room_table()} SET last_event = last_event + %s WHERE slug = %s RETURNING id, last_event",
            [count, room],
        )
        room_id, last = cursor.fetchone()
    return room_id, last - count + 1


def emit(ctx: Any, type: str, room: str, data: dict[str, Any], *, at: tuple[int, int] | None = None) -> UUID | None:
    """Write the event of an effect on `room`, in the caller's transaction; its `event_id`
    (None with the outbox off), which a change of a message keeps to find it again.

    `ctx` is the command's context (its `command_id` and `user` go into the
    data); `data` is the `d` of the frame that tells the change. `at` is
    `(room id, position)` for an effect that took its position already, with
    its own update of the room's row (a post, with its seq).
    """
    ids = emit_many(ctx, type, room, [data], at=at)
    return ids[0] if ids else None


def emit_many(
    ctx: Any, type: str, room: str, datas: list[dict[str, Any]], *, at: tuple[int, int] | None = None
) -> list[UUID]:
    """`emit` for several changes of one effect (a receipt moving many messages), in order; their ids."""
    if not datas or not get_settings().EVENTS_OUTBOX:
        return []
    room_id, first = at or take_positions(room, len(datas))
    now = timezone.now()
    cause = {"command_id": ctx.command_id, "user": ctx.user.pk}
    events = [
        # Through orjson, as frames are: a UUID user id becomes its text, as on the wire.
        Event(
            event_id=uuid7(),
            type=type,
            room_id=room_id,
            room=room,
            position=first + n,
            data=orjson.loads(orjson.dumps({**data, **cause})),
            created_at=now,
        )
        for n, data in enumerate(datas)
    ]
    Event.objects.bulk_create(events)
    return [event.event_id for event in events]


# `messaging.ids.uuid7` in SQL, for PostgreSQL before 18 (which has `uuidv7()`):
# a random UUID whose first 6 bytes become the Unix time in milliseconds
# (`int8send`'s last 6 bytes) and whose version 4 becomes 7 (bits 52 and 53,
# counted from the low bit of each byte, set on 0100). Time-ordered, so the
# events' unique index takes inserts at its end (messaging/ids.py).
EVENT_ID_SQL = (
    "encode(set_bit(set_bit(overlay(uuid_send(gen_random_uuid()) placing"
    " substring(int8send((extract(epoch FROM clock_timestamp()) * 1000)::bigint) FROM 3) FROM 1 FOR 6),"
    " 52, 1), 53, 1), 'hex')::uuid"
)


# The `room.post` statement's part (messaging/chat/sql/posts_and_records.sql, at `{events}`): per stored post its
# `message.posted` event, the `msg` frame's `d` plus the command's id and user.
# The sender's `node` is there with federation on (messaging/chat/nodes.py).
# Its id is minted with the post's seq (at `{event_id}`), so the message keeps
# it too (`posted_event_id`). Its position follows the room's event counter as
# its rev follows last_rev: both were bumped by the same count in the same
# UPDATE (a reply's root's `thread.changed` takes the position after its post's,
# as its rev is the next). Rows go in in seq order.
# A post's files are in its data as its frame shows them (at `{files_shown}`,
# messaging/chat/attachments.py).
POSTED_EVENTS = """, event AS (
    INSERT INTO {event} (event_id, type, room_id, room, position, data, created_at)
    SELECT p.event_id, 'message.posted', p.room_id, i.room, t.events_before + (p.rev - t.rev_before),
           jsonb_build_object('room', i.room, 'seq', p.seq, 'id', i.command_id,
                              'sender', jsonb_build_object('id', i.user_json, 'name', i.name)
                                        || CASE WHEN i.node IS NULL THEN jsonb_build_object()
                                           ELSE jsonb_build_object('node', i.node) END,
                              'body', i.body, 'at', s.at_text, 'version', 1, 'rev', p.rev,
                              'command_id', i.command_id, 'user', i.user_json){files_shown}
           || CASE WHEN i.reply_to IS NULL THEN jsonb_build_object()
              ELSE jsonb_build_object('reply_to', i.reply_to) END,
           s.at
    FROM post p JOIN item i USING (n) JOIN taken t ON t.id = p.room_id, stamp s
    ORDER BY p.room_id, p.seq
)"""


def posted_events_sql() -> str:
    """`POSTED_EVENTS`, or nothing with the outbox off."""
    return POSTED_EVENTS if get_settings().EVENTS_OUTBOX else ""


def posted_event_id_sql() -> str:
    """What mints a post's event id in the posts' statement: `EVENT_ID_SQL`, or null with the outbox off."""
    return EVENT_ID_SQL if get_settings().EVENTS_OUTBOX else "NULL::uuid"


def event_table() -> str:
    return Event._meta.db_table
