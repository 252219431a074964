"""Typing indicators: the `typing` command and frames (PROTOCOL.md 1.1, "Typing").

Ephemeral by design: never stored, never deduplicated, not exactly-once.
A `typing: true` lasts `LAPSE` seconds unless repeated; it ends with
`typing: false`, with a post by the same user in the room, or when it
lapses, and the room hears `typing: false` each time. At most one
`typing: true` per user and room every `THROTTLE` seconds goes to the room,
so a burst of keystrokes costs the room one frame (docs/PERFORMANCE.md).

The frames travel like any room frame, through the hub to every process
(messaging/fanout.py). The state (when the last `true` went out, the lapse
timer) lives in the process that got the command, on its event loop, at
most `TYPING_STATES` entries. A user typing on two processes at once has a
state on each; each one's lapse ends it with a `false`, which is harmless
twice. A post on another process than the `typing: true` is ended there by
the client, which clears a user's indicator on their `msg`, and here by the
lapse.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import Any

from ..chat.messages import display_name
from ..chat.rooms import joined_room_id
from ..conf import get_settings
from ..core.exceptions import CommandError, Forbidden, Invalid, RateLimited
from ..core.gateway import Gateway
from ..core.handlers import CommandContext, command
from ..core.protocol import encode, room_slug
from ..core.runtime import runtime
from ..models import Membership, Room
from .fanout import get_hub

# PROTOCOL.md fixes both: a `true` lasts 6 s, and the room hears at most one every 2 s.
LAPSE = 6.0
THROTTLE = 2.0


@dataclass(frozen=True)
class Typing:
    room: str
    typing: bool


def validate_typing(d: dict[str, Any]) -> Typing:
    typing = d.get("typing")
    if not isinstance(typing, bool):
        raise Invalid("typing must be true or false")
    return Typing(room=room_slug(d), typing=typing)


def typing_frame(room: str, user: Any, typing: bool) -> dict[str, Any]:
    # `user` first: a socket skips its own user's frames by their prefix (`own_prefix`).
    return {"t": "typing", "d": {"user": user.pk, "room": room, "name": display_name(user), "typing": typing}}


def own_prefix(kind: str, user_id: Any) -> str:
    """How every encoded frame of type `kind` about the user `user_id` begins,
    for the frames that list `user` first (`typing`, `presence`): a socket
    does not send its own user's back to them."""
    return encode({"t": kind, "d": {"user": user_id}})[:-2] + ","


@dataclass
class Typist:
    # When the room last heard this user's `true`, and the timer that ends it.
    sent_at: float
    lapse: asyncio.TimerHandle


class Typists:
    """This event loop's users typing, per (room, user): the throttle and the lapse."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.states: dict[tuple[str, str], Typist] = {}

    def started(self, room: str, user: Any) -> bool:
        """A `typing: true`; whether the room hears it (not within `THROTTLE` of the last one)."""
        key = (room, str(user.pk))
        now = time.monotonic()
        state = self.states.get(key)
        loop = asyncio.get_running_loop()
        if state is None:
            if len(self.states) >= self.limit:
                raise RateLimited(f"{self.limit} users are typing on this server", retry_after=THROTTLE)
            self.states[key] = Typist(now, loop.call_later(LAPSE, self.lapsed, room, user))
            return True
        state.lapse.cancel()
        state.lapse = loop.call_later(LAPSE, self.lapsed, room, user)
        if now - state.sent_at < THROTTLE:
            return False
        state.sent_at = now
        return True

    def ended(self, room: str, user: Any) -> bool:
        """The user stopped typing in `room`; whether they were typing here."""
        state = self.states.pop((room, str(user.pk)), None)
        if state is None:
            return False
        state.lapse.cancel()
        return True

    def close(self) -> None:
        for state in self.states.values():
            state.lapse.cancel()
        self.states.clear()

    def lapsed(self, room: str, user: Any) -> None:
        if self.ended(room, user):
            get_hub().publish(room, None, encode(typing_frame(room, user, False)))


def get_typists() -> Typists:
    """This event loop's typists, their timers cancelled when the loop closes."""
    return runtime().part("typists", lambda: Typists(get_settings().TYPING_STATES), close=lambda t: t.close())


def posted(room: str, user: Any) -> None:
    """A post by `user` in `room` was published: it ends their typing there."""
    typists = runtime().parts.get("typists")
    if typists is not None and typists.ended(room, user):
        get_hub().publish(room, None, encode(typing_frame(room, user, False)))


MEMBER_SQL = """
SELECT 1 FROM {membership} m JOIN {room} r ON r.id = m.room_id WHERE r.slug = %(room)s AND m.user_id = %(user)s
"""


async def check_member(gateway: Gateway, user: Any, room: str) -> None:
    """`Forbidden` unless `user` is a member of `room`: one statement through the gateway."""
    sql = MEMBER_SQL.format(membership=Membership._meta.db_table, room=Room._meta.db_table)
    if not await gateway.fetch(sql, {"room": room, "user": user.pk}):
        raise Forbidden("join the room first")


async def typing_on_loop(gateway: Gateway, entries: list[Any]) -> list[dict[str, Any] | CommandError]:
    """The batch form (one command per call, on the event loop, where the state lives)."""
    [(ctx, typing, _)] = entries
    try:
        return [await atyping(gateway, ctx, typing)]
    except CommandError as exc:
        return [exc]


async def atyping(gateway: Gateway, ctx: CommandContext, typing: Typing) -> dict[str, Any]:
    await check_member(gateway, ctx.user, typing.room)
    typists = get_typists()
    if typing.typing:
        heard = typists.started(typing.room, ctx.user)
    else:
        # Always heard: the `true` may have come through another process, which has the state.
        typists.ended(typing.room, ctx.user)
        heard = True
    if heard:
        ctx.broadcast(typing.room, typing_frame(typing.room, ctx.user, typing.typing))
    return {"room": typing.room}


# Every vendor: the statement runs through the gateway, on a database thread where the loop has no connection.
@command(
    "typing",
    validate=validate_typing,
    exactly_once=False,
    batch={vendor: typing_on_loop for vendor in ("postgresql", "sqlite", "mysql", "oracle")},
)
def typing(ctx: CommandContext, typing: Typing) -> dict[str, Any]:
    """Off the event loop (a caller without one) only the membership check: the state lives on the loop."""
    joined_room_id(ctx.user, typing.room)
    return {"room": typing.room}
