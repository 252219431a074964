"""A replica's thread and emoji counts, as the room's home has them (PROTOCOL.md 1.2, "Threads, reactions").

A push brings a reply's `thread.changed` (with its own rev, the one after its
reply's, applied in the rev order as every change with a rev) and an emoji's
`reaction.changed` (with `emoji`); a catch-up page brings the same as
`thread` and `reactions` frames. Each sets the count it carries, where its
rev is newer than the replica's, and tells the replica's sockets. Who
reacted stays at home: a replica's `mine` is always empty.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any

from ..chat.emoji import reactions_frame
from ..chat.models import ReactionTally, Thread
from ..chat.threads import thread_frame
from ..models import Message

if TYPE_CHECKING:
    from .applying import Replica


def _time(text: Any) -> datetime | None:
    try:
        return datetime.fromisoformat(text) if isinstance(text, str) else None
    except ValueError:
        return None


def threaded(replica: Replica, data: dict[str, Any]) -> None:
    """A root's thread as its home has it (a `thread.changed`, or a page's `thread` frame)."""
    replica.flush()
    seq, replies, rev, at = data.get("seq"), data.get("replies"), data.get("rev"), _time(data.get("last_reply_at"))
    if not isinstance(seq, int) or not isinstance(replies, int) or not isinstance(rev, int) or at is None:
        return
    root = replica.message(seq) or Message.objects.filter(room=replica.room, seq=seq).first()
    if root is None or root.pk is None:
        return
    kept = Thread.objects.filter(root_id=root.pk).values_list("rev", flat=True).first()
    if kept is not None and kept >= rev:
        return
    Thread.objects.update_or_create(
        root_id=root.pk, defaults={"room": replica.room, "replies": replies, "last_reply_at": at, "rev": rev}
    )
    replica.frames.room(replica.room.slug, thread_frame(replica.room.slug, seq, replies, data["last_reply_at"], rev))


def reacted(replica: Replica, data: dict[str, Any]) -> None:
    """An emoji's count on a message, as its home has it."""
    replica.flush()
    replica.load([data.get("seq")])
    message, emoji, count, rev = replica.message(data.get("seq")), data.get("emoji"), data.get("count"), data.get("rev")
    if message is None or message.pk is None or not isinstance(emoji, str) or not isinstance(count, int):
        return
    kept = ReactionTally.objects.filter(message_id=message.pk, emoji=emoji).values_list("rev", flat=True).first()
    if kept is not None and isinstance(rev, int) and rev <= kept:
        return
    ReactionTally.objects.update_or_create(
        message_id=message.pk, emoji=emoji, defaults={"count": count, "room": replica.room, "rev": rev}
    )
    replica.frames.room(replica.room.slug, reactions_frame(replica.room.slug, message.seq, emoji, count, rev))
