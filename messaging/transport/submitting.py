"""Commands from anywhere but a socket: one command run as a socket runs it, its ack returned.

`asubmit` (and `submit`, the same coroutine for sync code) is what a host's
views, tasks and management commands call, and what `POST /api/commands`
calls: the command takes the socket's path through the exactly-once core
(`_execute`), so the same `(user, id)` from here and from a socket is one
command, and its effects reach the rooms' sockets through this process's
hub, as a socket's do.

What a command sends only to the issuing socket (a join's backlog) has no
socket to go to here and is dropped: the ack is the whole answer.

Like the consumer, it hands each command to the core's one pipeline
(`messaging.core.pipeline.submit`, in `_execute`).
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from typing import Any

from asgiref.sync import AsyncToSync, SyncToAsync

from ..core import handlers, pipeline
from ..core.exceptions import BadFrame, CommandError, Unavailable
from ..core.handlers import CommandContext
from ..core.outcomes import Outcome
from ..core.protocol import COMMAND_ID, AckFrame, Command, ack_error, ack_ok, encode
from ..ops import metrics
from ..ops.logcontext import command_scope, loggable
from .fanout import get_hub
from .presence import add_online

log = logging.getLogger(__name__)

ID_RULE = "an id is 1-64 characters of A-Z a-z 0-9 _ -"


def new_id() -> str:
    """The id of a command whose type is not exactly-once and that came without one."""
    return uuid.uuid4().hex


async def asubmit(user: Any, t: Any, d: Any, *, id: str | None = None, client_address: str | None = None) -> AckFrame:
    """Run the command `{"id": id, "t": t, "d": d}` as `user`, once; return its ack frame.

    `id` is required for an exactly-once type (`room.post`, a host's own types)
    and is the command's identity, as on a socket: call again with the same
    id after any failure and the command still takes effect once. A type
    that is not exactly-once may leave it out (one is made up for its ack).
    Refusals are acks with `ok: false`; an `id` missing or not of the
    protocol's shape raises `BadFrame`. Not rate-limited: in-process code is
    the server's own (`POST /api/commands` limits its callers itself).

    `client_address`: the key of the client the command came from
    (`messaging.client_of_request`), for the limits per address (rooms
    created); `POST /api/commands` gives its request's. Server code gives
    none, and is not limited by address.
    """
    if id is not None and (not isinstance(id, str) or not COMMAND_ID.fullmatch(id)):
        raise BadFrame(ID_RULE)
    command = Command(id=id if id is not None else new_id(), t=t, d=d)
    started = time.perf_counter()
    with command_scope(command.id, command.t, user.pk):
        handler = None
        try:
            handler = handlers.lookup(command.t)
            if id is None and handler.exactly_once:
                raise BadFrame(f"{handler.type} is exactly-once: it needs an id ({ID_RULE})")
            outcome = await _execute(user, command, client_address)
        except CommandError as exc:
            _answered(handler, exc.code, started)
            return ack_error(command.id, exc.as_error())
        except BadFrame:
            raise
        except Exception:
            log.exception("command %s %s by user %s failed", loggable(command.t), command.id, user.pk)
            _answered(handler, Unavailable.code, started)
            return ack_error(command.id, Unavailable().as_error())
        if handler.member_list:
            # As on a socket (PROTOCOL.md 1.1, "Presence"): member entries say who is online.
            await add_online(outcome.data.get("members"))
        _answered(handler, "dup" if outcome.dup else "ok", started, source=outcome.source)
        publish(outcome)
        return ack_ok(command.id, outcome.data, dup=outcome.dup)


async def _execute(user: Any, command: Command, client_address: str | None) -> Outcome:
    """The core's one entry: the pipeline prepares (looks up, validates, fingerprints) and runs, or raises the refusal."""
    return await pipeline.submit(user, command, client_address)


def publish(outcome: Outcome) -> None:
    """Queue a committed effect's frames on this loop's hub, as the consumer's `publish` does."""
    hub = get_hub()
    for room, frame in outcome.broadcasts:
        seq = frame["d"].get("seq") if frame.get("t") == "msg" else None
        hub.publish(room, seq, encode(frame))
    for user_id, only_in, frame in outcome.to_users:
        hub.publish_to_user(user_id, only_in, encode(frame))


def publish_from_code(ctx: CommandContext) -> None:
    """Publish the frames an effect committed outside the pipeline left on `ctx`
    (the admin's moderation: messaging/chat/moderation.py), as `submit` publishes
    a command's: on the server's loop from a sync view under it, else on a loop
    of this call's own, whose frames are out before it returns."""
    on_own_loop = not _server_loop_running()
    AsyncToSync(_publish_settled)(Outcome.applied({}, ctx), on_own_loop=on_own_loop)


async def _publish_settled(outcome: Outcome, *, on_own_loop: bool) -> None:
    try:
        publish(outcome)
    finally:
        if on_own_loop:
            await close_loop()


def _answered(handler: handlers.Handler | None, outcome: str, started: float, *, source: str | None = None) -> None:
    metrics.command_answered(
        handler.type if handler else metrics.UNKNOWN_TYPE, outcome, time.perf_counter() - started, source=source
    )


def submit(user: Any, t: Any, d: Any, *, id: str | None = None, client_address: str | None = None) -> AckFrame:
    """`asubmit` for sync code (a view, a Celery task, a management command): the same coroutine.

    Called from a thread of a running server (a sync view under daphne), it
    runs on the server's event loop; elsewhere asgiref gives it a loop of its
    own, which ends with the call: that loop's live frames are published
    before it returns, and its runtime (connections, clients) closes with it.
    """
    on_own_loop = not _server_loop_running()
    return AsyncToSync(_submit_settled)(user, t, d, id=id, client_address=client_address, on_own_loop=on_own_loop)


def _server_loop_running() -> bool:
    """Whether asgiref's `async_to_sync` will run a coroutine on this thread's
    server loop (its test, as of asgiref 3.8), not on a new loop of its own."""
    main_loop = getattr(SyncToAsync.threadlocal, "main_event_loop", None)
    return main_loop is not None and main_loop.is_running()


async def _submit_settled(
    user: Any, t: Any, d: Any, *, id: str | None, client_address: str | None, on_own_loop: bool
) -> AckFrame:
    try:
        return await asubmit(user, t, d, id=id, client_address=client_address)
    finally:
        if on_own_loop:
            await close_loop()


async def close_loop() -> None:
    """Before an event loop of one call ends: publish what its hub holds (closing the runtime would drop it)."""
    hub = get_hub()
    if hub.pump is not None:
        try:
            await asyncio.wait_for(asyncio.shield(hub.pump), timeout=5)
        except Exception:
            log.warning("live frames of an in-process command were not all published", exc_info=True)
