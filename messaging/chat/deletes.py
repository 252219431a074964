"""`message.delete` (PROTOCOL.md 1.1): a message becomes a tombstone, exactly once.

The tombstone keeps its seq and loses its body: in the same transaction
(`tombstone`, the whole effect, which the admin's moderators run too) the
row's body is set to "", every body the version history kept is cleared,
and so is the body in the events of its post and edits and in every copy
made of them (deliveries, dead letters, mentions:
messaging/events/redaction.py), so after the commit no copy of it stays in
the app's tables (PROTOCOL.md 1.2, "Deleted means gone"). Its files are
content too: their rows go in the same transaction (no one may fetch them
from then on), their bytes leave the storage once it has committed
(messaging/files/storage.py), and the message and its events list them no more. Deleting a
tombstone again is ok and changes nothing: no frame, no rev, an ack with
the delete's version and time. Its emoji reactions go too (a tombstone shows
none); its thread stays: a deleted root keeps its count and its replies.

Locks, in order: the message's row, the copies' rows, its files' rows, the room's row
(`next_rev`) last, as an edit takes the message's and then the room's.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, cast

from django.utils import timezone

from ..core.exceptions import Forbidden
from ..core.handlers import CommandContext, command
from ..core.protocol import format_time
from ..events.outbox import emit
from ..events.redaction import blank_copies
from ..files.models import Upload
from ..models import Message, MessageVersion, ModerationAction, Room
from ..signals import message_deleted, send_on_commit
from .edits import MessageRef, locked_message, record_version, validate_message_ref
from .emoji import forget_reactions
from .permissions import may_delete
from .revs import next_rev
from .rooms import joined_room


def delete_frame(room: str, message: Message) -> dict[str, Any]:
    return {
        "t": "msg.delete",
        "d": {
            "room": room,
            "seq": message.seq,
            "id": message.client_msg_id,
            "version": message.version,
            "deleted_at": format_time(cast(datetime, message.deleted_at)),  # deleted: set
            "rev": message.rev,
        },
    }


def deleted(room: str, message: Message) -> dict[str, Any]:
    at = cast(datetime, message.deleted_at)  # deleted: set
    return {"room": room, "seq": message.seq, "version": message.version, "deleted_at": format_time(at)}


@command("message.delete", validate=validate_message_ref, lane="room")
def delete_message(ctx: CommandContext, ref: MessageRef) -> dict[str, Any]:
    room = joined_room(ctx.user, ref.room)
    message = locked_message(room, ref.seq)
    if not may_delete(ctx.user, message, room):
        raise Forbidden("only its sender, the room's owner or a moderator deletes a message")
    if message.deleted_at is not None:
        return deleted(room.slug, message)
    tombstone(ctx, room, message)
    if message.sender_id != ctx.user.pk:
        # Someone else's message: a moderator's act (the owner's or staff's), for the admin's audit.
        audit_delete(ctx.user, room, message)
    return deleted(room.slug, message)


def tombstone(ctx: CommandContext, room: Room, message: Message) -> None:
    """The whole effect of a delete of `message` (locked, not deleted yet), in the
    caller's transaction: its body gone from every table, its rev, its event,
    and its `msg.delete` queued for the room on `ctx`."""
    # Before the room's row: should the relay be publishing one of these events,
    # the wait for its batch holds up no other change of the room.
    blank_copies(message, room.slug)
    # Its files' rows now, their bytes after the commit (a post_delete receiver).
    Upload.objects.filter(room=room, seq=message.seq).delete()
    message.rev, position = next_rev(room.pk)
    # Its emoji reactions (messaging/chat/emoji.py), after the room's row, as `reaction.set` takes them.
    forget_reactions(message)
    message.deleted_at = timezone.now()
    message.body, message.version, message.attachments = "", message.version + 1, None
    message.save(update_fields=["body", "version", "deleted_at", "rev", "attachments"])
    MessageVersion.objects.filter(message=message, previous_body__isnull=False).update(previous_body=None)
    frame = delete_frame(room.slug, message)
    # In the change's transaction.
    event_id = emit(ctx, "message.deleted", room.slug, frame["d"], at=(room.pk, position))
    record_version(ctx, message, MessageVersion.Kind.DELETE, message.deleted_at, None, event_id)
    ctx.broadcast(room.slug, frame)
    send_on_commit(
        message_deleted,
        Message,
        room=room.slug,
        seq=message.seq,
        user=ctx.user,
        command_id=ctx.command_id,
        message=frame["d"],
    )


def audit_delete(actor: Any, room: Room, message: Message) -> None:
    ModerationAction.objects.create(
        room=room,
        room_slug=room.slug,
        actor=actor,
        kind=ModerationAction.Kind.DELETE,
        target_id=message.sender_id,
        seq=message.seq,
    )
