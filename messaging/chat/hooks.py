"""The chat's public hooks, for apps beside it (`messaging.contrib.reactions` is one).

`on_join(name, replies, validate=...)`: after a `room.join` reads its backlog,
`replies(ctx, room, options, backlog)` returns more frames for the joining
socket, sent after the backlog's `msg` frames; `options` is what
`validate(d)` made of the join's `d` (an extension field of the hook's own;
raise `messaging.Invalid` to refuse the join). Both run inside the join's
transaction, on a database thread.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from ..core.handlers import CommandContext
from ..models import Message, Room

JoinReplies = Callable[[CommandContext, Room, Any, list[Message]], list[dict]]


def _no_options(d: dict) -> None:
    return None


@dataclass(frozen=True)
class JoinHook:
    name: str
    replies: JoinReplies
    validate: Callable[[dict], Any] = _no_options


# By name, in the order registered (a handful: one per installed app).
_join_hooks: dict[str, JoinHook] = {}


def on_join(name: str, replies: JoinReplies, *, validate: Callable[[dict], Any] = _no_options) -> JoinReplies:
    """Register (or replace) the join hook `name`; returns `replies`."""
    _join_hooks[name] = JoinHook(name, replies, validate)
    return replies


def join_hooks() -> tuple[JoinHook, ...]:
    return tuple(_join_hooks.values())
