"""What a stored message's `msg` frame shows beyond its own row (PROTOCOL.md 1.2): its thread and its reactions.

- `with_thread`: a reply's `reply_to`; a root's `replies` and `last_reply_at`
  (from its `Thread`, read with the message by `select_related("thread")`).
- `with_reactions`: for a page of messages, in two queries whatever its
  length, each one's `reactions` (emoji to count, only those above 0, in the
  order each emoji was first put on it) and the viewer's own `mine` (a list,
  present where `reactions` is). A deleted message shows neither: its
  reactions went with its body (messaging/chat/deletes.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..core.protocol import format_time
from ..models import Message
from .models import Reaction, ReactionTally, Thread


def thread_of(message: Message) -> Thread | None:
    """The message's thread as `select_related("thread")` read it (None: no replies)."""
    try:
        return message.thread
    except Thread.DoesNotExist:
        return None


def with_thread(d: dict[str, Any], message: Message) -> dict[str, Any]:
    """A stored message's `msg` d with `reply_to` (a reply) or `replies` and `last_reply_at` (a root with any)."""
    if message.reply_to is not None:
        d["reply_to"] = message.reply_to
        return d
    thread = thread_of(message)
    if thread is not None:
        d["replies"] = thread.replies
        d["last_reply_at"] = format_time(thread.last_reply_at)
    return d


def with_reactions(frames: Sequence[dict[str, Any]], messages: Sequence[Message], viewer: Any) -> None:
    """Each of `frames` (the `d` of `messages`' frames, in the same order) with its
    `reactions` and `mine` for `viewer`, where it has any."""
    ids = [m.pk for m in messages if m.deleted_at is None]
    if not ids:
        return
    counts: dict[int, dict[str, int]] = {}
    tallies = ReactionTally.objects.filter(message_id__in=ids, count__gt=0).order_by("id")
    for message_id, emoji, count in tallies.values_list("message_id", "emoji", "count"):
        counts.setdefault(message_id, {})[emoji] = count
    if not counts:
        return
    mine: dict[int, list[str]] = {}
    own = Reaction.objects.filter(message_id__in=list(counts), user_id=viewer.pk).order_by("id")
    for message_id, emoji in own.values_list("message_id", "emoji"):
        mine.setdefault(message_id, []).append(emoji)
    for d, message in zip(frames, messages, strict=True):
        if message.pk in counts:
            d["reactions"] = counts[message.pk]
            d["mine"] = mine.get(message.pk, [])
