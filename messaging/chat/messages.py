"""A message as frames carry it: the `msg` frame of a new post, and of a
stored message in its current state (join backlogs, `room.history`, the
`since_rev` replay)."""

from __future__ import annotations

from typing import Any

from ..core.protocol import format_time
from ..models import Message
from .attachments import message_files, with_files
from .nodes import with_node
from .shown import with_thread


def display_name(user: Any) -> str:
    """How every frame, ack and event shows `user`: its display name, else `user <id>`.

    Never its account name (`username`, PROTOCOL.md 1.2): that is the first
    half of a sign-in, and an admin's often has no display name to hide it.
    The posts' statement takes its sender's name from here too.
    """
    return user.get_full_name() or f"user {user.pk}"


def msg_frame(room: str, seq: int, id: str, sender: Any, body: str, at: str, rev: int | None = None) -> dict[str, Any]:
    """A new message's `msg` frame; `at` is the time as the protocol writes it (`format_time`)."""
    return {
        "t": "msg",
        "d": {
            "room": room,
            "seq": seq,
            "id": id,
            "sender": with_node({"id": sender.pk, "name": display_name(sender)}, sender),
            "body": body,
            "at": at,
            "version": 1,
            "rev": rev,
        },
    }


def stored_msg_frame(message: Message, room: str, viewer: Any) -> dict[str, Any]:
    """A stored message's `msg` frame for `viewer`'s socket, in its current state
    (its files; edited: its body and `edited_at`; deleted: a tombstone). Of the viewer's own
    messages it carries the stored `state` (an extension): in a room too big for
    `status` frames a client cannot work it out from the members' watermarks."""
    frame = msg_frame(
        room,
        message.seq,
        message.client_msg_id,
        message.sender,
        message.body,
        format_time(message.sent_at),
        message.rev,
    )
    d = frame["d"]
    with_files(d, message_files(message))
    with_thread(d, message)
    d["version"] = message.version
    if message.deleted_at is not None:
        d.update(body="", deleted=True, deleted_at=format_time(message.deleted_at))
    if message.edited_at is not None:
        d["edited_at"] = format_time(message.edited_at)
    if message.sender_id == viewer.pk:
        d["state"] = message.state
    return frame
