"""The chat's public hooks, for apps beside it (`messaging.contrib.reactions` is one).

`on_join(name, replies, validate=...)`: after a `room.join` reads its backlog,
`replies(ctx, room, options, backlog)` returns more frames for the joining
socket, sent after the backlog's `msg` frames; `options` is what
`validate(d)` made of the join's `d` (an extension field of the hook's own;
raise `messaging.Invalid` to refuse the join). Both run inside the join's
transaction, on a database thread.

`on_replay(name, changes)`: a `room.join` with `since_rev` asks
`changes(room, since_rev, upto, limit)` for the app's own changes in
(since_rev, upto], at most `limit`, each as (place, rev of the state shown,
frame); the replay orders them with the messages' and cuts them alike
(messaging/chat/replay.py).

`on_page(name, frames)`: after a `room.history` page, `frames(room, messages)`
returns more frames for the asking socket (the page's counts).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..core.handlers import CommandContext
from ..models import Message, Room

JoinReplies = Callable[[CommandContext, Room, Any, list[Message]], list[dict[str, Any]]]
PageFrames = Callable[[str, list[Message]], list[dict[str, Any]]]
ReplayChanges = Callable[[Room, int, int, int], list[tuple[int, int, dict[str, Any]]]]


def _no_options(d: dict[str, Any]) -> None:
    return None


@dataclass(frozen=True)
class JoinHook:
    name: str
    replies: JoinReplies
    validate: Callable[[dict[str, Any]], Any] = _no_options


# By name, in the order registered (a handful: one per installed app).
_join_hooks: dict[str, JoinHook] = {}


def on_join(name: str, replies: JoinReplies, *, validate: Callable[[dict[str, Any]], Any] = _no_options) -> JoinReplies:
    """Register (or replace) the join hook `name`; returns `replies`."""
    _join_hooks[name] = JoinHook(name, replies, validate)
    return replies


def join_hooks() -> tuple[JoinHook, ...]:
    return tuple(_join_hooks.values())


_replay_hooks: dict[str, ReplayChanges] = {}


def on_replay(name: str, changes: ReplayChanges) -> ReplayChanges:
    """Register (or replace) the replay hook `name`; returns `changes`."""
    _replay_hooks[name] = changes
    return changes


def replay_hooks() -> tuple[ReplayChanges, ...]:
    return tuple(_replay_hooks.values())


_page_hooks: dict[str, PageFrames] = {}


def on_page(name: str, frames: PageFrames) -> PageFrames:
    """Register (or replace) the history page hook `name`; returns `frames`."""
    _page_hooks[name] = frames
    return frames


def page_hooks() -> tuple[PageFrames, ...]:
    return tuple(_page_hooks.values())
