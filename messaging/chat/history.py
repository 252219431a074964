"""`room.history` (PROTOCOL.md 1.1): a room's messages page by page, backwards by seq.

One page is the newest `limit` messages below `before`, in seq order, each
as a `msg` frame's `d` in its current state (tombstones included: a deleted
message keeps its place), and `more`: whether older ones exist. Of those,
only the newest that fit in one frame (PROTOCOL 1.2, messaging/chat/sizes.py):
fewer than `limit`, with `more: true`, where the rest would not. What the apps
beside the chat have for the page's messages (their `on_page` hooks,
messaging/chat/hooks.py: the counts of those with reactions, as `reaction`
frames) follows the ack, as after a join's backlog. Two queries, each bounded by the page.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..core.exceptions import Invalid
from ..core.handlers import CommandContext, command
from ..core.protocol import room_slug
from ..models import Message
from .edits import message_seq
from .hooks import page_hooks
from .messages import stored_msg_frame
from .rooms import joined_room
from .shown import with_reactions
from .sizes import history_page_length

# PROTOCOL.md 1.1 fixes the page's bounds.
HISTORY_DEFAULT = 50
HISTORY_MAX = 100


@dataclass(frozen=True)
class HistoryPage:
    room: str
    before: int
    limit: int


def validate_history(d: dict[str, Any]) -> HistoryPage:
    try:
        before = message_seq({"seq": d.get("before")})
    except Invalid:
        raise Invalid("before must be an integer >= 1") from None
    limit = d.get("limit", HISTORY_DEFAULT)
    if limit is None:
        limit = HISTORY_DEFAULT
    if not isinstance(limit, int) or isinstance(limit, bool) or not 1 <= limit <= HISTORY_MAX:
        raise Invalid(f"limit must be an integer from 1 to {HISTORY_MAX}")
    return HistoryPage(room=room_slug(d), before=before, limit=limit)


@command("room.history", validate=validate_history, exactly_once=False)
def room_history(ctx: CommandContext, page: HistoryPage) -> dict[str, Any]:
    room = joined_room(ctx.user, page.room)
    found = list(
        Message.objects.filter(room=room, seq__lt=page.before)
        .select_related("sender", "thread")
        .order_by("-seq")[: page.limit + 1]
    )
    newest = [stored_msg_frame(m, room.slug, ctx.user)["d"] for m in found[: page.limit]]
    with_reactions(newest, found[: page.limit], ctx.user)
    kept = history_page_length(ctx.command_id, room.slug, newest)
    messages = found[:kept][::-1]
    for frames in page_hooks():
        ctx.replies.extend(frames(room.slug, messages))
    return {"room": room.slug, "messages": newest[:kept][::-1], "more": len(found) > kept}
