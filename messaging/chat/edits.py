"""`message.edit` (PROTOCOL.md 1.1): the sender replaces a message's body,
exactly once, under the seven rules of `room.post`.

An edit is registered with the default `exactly_once=True`: the claim, the
durable record committed with the new body, and the replayed ack are the
machinery that keeps a post single (messaging/core/pipeline.py), through
the type's portable `apply` in one transaction (messaging/core/records.py). Its whole
effect is `edit_message`, one transaction: the message's row lock, the
room's next rev, the new body and version, the version's record.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, cast
from uuid import UUID

from django.utils import timezone

from ..conf import get_settings
from ..core.exceptions import Forbidden, Invalid
from ..core.handlers import CommandContext, command
from ..core.protocol import format_time, message_body, optional_seq, room_slug
from ..events.outbox import emit
from ..models import Message, MessageVersion, Room
from ..signals import message_edited, send_on_commit
from .permissions import may_edit
from .revs import next_rev
from .rooms import joined_room


@dataclass(frozen=True)
class MessageRef:
    """One message of a room: the data of `message.delete` and of a reaction."""

    room: str
    seq: int


@dataclass(frozen=True)
class Edit:
    room: str
    seq: int
    body: str


def message_seq(d: dict[str, Any]) -> int:
    seq = optional_seq(d, "seq")
    if seq is None or seq < 1:
        raise Invalid("seq must be an integer >= 1")
    return seq


def live_message_id(room_id: int, room: str, seq: int) -> int:
    """The id of message `seq` of room `room_id` (named `room` to the client); `Invalid` if there is none or it is deleted."""
    found = Message.objects.filter(room_id=room_id, seq=seq).values_list("id", "deleted_at").first()
    if found is None:
        raise Invalid(f"no message {seq} in room {room}")
    message_id, deleted_at = found
    if deleted_at is not None:
        raise Invalid(f"message {seq} is deleted")
    return message_id


def validate_message_ref(d: dict[str, Any]) -> MessageRef:
    return MessageRef(room=room_slug(d), seq=message_seq(d))


def validate_edit(d: dict[str, Any]) -> Edit:
    return Edit(room=room_slug(d), seq=message_seq(d), body=message_body(d, get_settings().BODY_MAX_CHARS))


def locked_message(room: Room, seq: int) -> Message:
    """The room's message `seq`, its row locked until commit, so the changes
    of one message are made one after another; `Invalid` if there is none.

    FOR NO KEY UPDATE, the lock an UPDATE of the row takes: it leaves the key
    share lock of a reaction's foreign key free. Of the message's row alone
    (`of`): Message's ordering by the room's slug joins the room, whose row
    would be locked too, first. Taken before the room's row (`next_rev`);
    posts and reactions take the room's and no message's, and receipts take
    the rooms' last, after every message's of their batch (migration 0016),
    so no two changes wait on each other in a cycle.
    """
    message = Message.objects.select_for_update(no_key=True, of=("self",)).filter(room=room, seq=seq).first()
    if message is None:
        raise Invalid(f"no message {seq} in room {room.slug}")
    return message


def record_version(
    ctx: CommandContext, message: Message, kind: str, at: Any, previous_body: str | None, event_id: UUID | None
) -> None:
    """The admin's record of one change, with its event's id (a delete finds the event by it);
    the replaced body only while history is kept."""
    keep = get_settings().EDIT_HISTORY_RETENTION > 0
    MessageVersion.objects.create(
        message=message,
        version=message.version,
        kind=kind,
        by=ctx.user,
        at=at,
        previous_body=previous_body if keep else None,
        event_id=event_id,
    )


def edit_frame(room: str, message: Message) -> dict[str, Any]:
    return {
        "t": "msg.edit",
        "d": {
            "room": room,
            "seq": message.seq,
            "id": message.client_msg_id,
            "body": message.body,
            "version": message.version,
            "edited_at": format_time(cast(datetime, message.edited_at)),
            "rev": message.rev,
        },
    }


@command("message.edit", validate=validate_edit, lane="room")
def edit_message(ctx: CommandContext, edit: Edit) -> dict[str, Any]:
    room = joined_room(ctx.user, edit.room)
    message = locked_message(room, edit.seq)
    if not may_edit(ctx.user, message, room):
        raise Forbidden("only its sender edits a message")
    if message.deleted_at is not None:
        raise Invalid(f"message {edit.seq} is deleted")
    previous = message.body
    message.rev, position = next_rev(room.pk)
    message.edited_at = timezone.now()
    message.body, message.version = edit.body, message.version + 1
    message.save(update_fields=["body", "version", "edited_at", "rev"])
    frame = edit_frame(room.slug, message)
    event_id = emit(ctx, "message.edited", room.slug, frame["d"], at=(room.pk, position))  # in the change's transaction
    record_version(ctx, message, MessageVersion.Kind.EDIT, message.edited_at, previous, event_id)
    ctx.broadcast(room.slug, frame)
    send_on_commit(
        message_edited,
        Message,
        room=room.slug,
        seq=message.seq,
        user=ctx.user,
        command_id=ctx.command_id,
        message=frame["d"],
    )
    return {
        "room": room.slug,
        "seq": message.seq,
        "version": message.version,
        "edited_at": format_time(message.edited_at),
    }
