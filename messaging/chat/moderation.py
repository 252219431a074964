"""Moderation of a room its moderator is not a member of, from the Django admin.

Since invitations are requests (PROTOCOL.md 1.2) staff cannot make
themselves members of a private room, so the commands that need membership
(`message.delete`) are closed to them there. The admin's actions
(messaging/admin.py) moderate through here instead: the room policy's
`can_moderate` decides, the effect is the command's own (the same tombstone,
event and `msg.delete` frame), and every act is recorded in
`ModerationAction`. A removal is `room.remove` itself, which staff may send
to a room they are not in; the admin submits it.
"""

from __future__ import annotations

from typing import Any

from django.db import transaction

from ..core.exceptions import Forbidden
from ..core.handlers import CommandContext
from ..ids import time_ordered_id
from ..models import Message
from .deletes import audit_delete, tombstone
from .edits import locked_message
from .policy import get_policy


def delete_as_moderator(actor: Any, message_id: int) -> CommandContext | None:
    """Delete the message `message_id` as `actor`, a moderator of its room (else
    `Forbidden`), recorded in the audit; the context holding its frames, for
    the caller to publish after the commit, or None if it was deleted already."""
    with transaction.atomic():
        message = Message.objects.select_related("room").get(pk=message_id)
        room = message.room
        if not get_policy().can_moderate(actor, room):
            raise Forbidden(f"you do not moderate room {room.slug}")
        message = locked_message(room, message.seq)
        if message.deleted_at is not None:
            return None
        # The id its event carries as `command_id`: an act of the admin's, not a client's command.
        ctx = CommandContext(user=actor, command_id=time_ordered_id(), type="message.delete")
        tombstone(ctx, room, message)
        audit_delete(actor, room, message)
    return ctx
