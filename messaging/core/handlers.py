"""The registry of command types.

A command type maps to a `Handler`: a `validate` step (pure, raises
`Invalid`) and an `apply` step that runs inside a database transaction.
Types are looked up in this explicit registry, never by attribute lookup on a
client-supplied string.

Host projects add their own types with the `command` decorator; their writes
get the same exactly-once guarantee as `room.post` unless they opt out with
`exactly_once=False` (for effects that are idempotent by nature).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable

from .exceptions import CommandError, Invalid, UnknownType
from .protocol import check_data, require_object


@dataclass
class CommandContext:
    """What a handler sees of its command, and where it leaves side effects.

    `replies` are frames for the issuing socket, sent after the ack;
    `broadcasts` are `(room, frame)` pairs, sent to the room after commit;
    `to_users` are `(user id, room or None, frame)`, sent after commit to
    that user's sockets (those joined to the room, if one is given). All are
    discarded when the transaction fails.
    """

    user: Any
    command_id: str
    type: str
    replies: list[dict] = field(default_factory=list)
    broadcasts: list[tuple[str, dict]] = field(default_factory=list)
    to_users: list[tuple[Any, str | None, dict]] = field(default_factory=list)

    def reply(self, frame: dict) -> None:
        self.replies.append(frame)

    def broadcast(self, room: str, frame: dict) -> None:
        self.broadcasts.append((room, frame))

    def send_to_user(self, user_id: Any, frame: dict, *, room: str | None = None) -> None:
        """After commit, `frame` to the sockets of the user `user_id`, in every
        process: those joined to `room`, or all of them without one."""
        self.to_users.append((user_id, room, frame))


Validator = Callable[[dict], Any]
Applier = Callable[[CommandContext, Any], dict]
# `apply` from the event loop (messaging/core/loopdb.py), without a database thread;
# None where the database has no such form.
AsyncApplier = Callable[[CommandContext, Any], Awaitable["dict | None"]]
# Applies the command and writes its durable record for the given fingerprint
# in one atomic statement; returns None where the database has no such form.
RecordedApplier = Callable[[CommandContext, Any, str], "dict | None"]
# The same for several commands of the type at once: `(ctx, data, fingerprint)`
# per command in, per command out its ack data or the `CommandError` refusing it.
BatchEntries = list[tuple[CommandContext, Any, str]]
RecordedBatchApplier = Callable[[BatchEntries], "list[dict | CommandError] | None"]
# That batch form from the event loop (messaging/core/loopdb.py), without a database thread.
AsyncRecordedBatchApplier = Callable[[BatchEntries], Awaitable["list[dict | CommandError] | None"]]


def _accept_object(data: dict) -> dict:
    return data


@dataclass(frozen=True)
class Handler:
    type: str
    apply: Applier
    validate: Validator = _accept_object
    exactly_once: bool = True
    # A room this command subscribes the socket to, taken from the validated
    # data. The consumer subscribes *before* apply runs, so nothing posted
    # between the backlog query and the subscription is missed.
    subscribes_to: Callable[[Any], str] | None = None
    # Optional fast path of an exactly-once type: effect and record in one
    # round trip instead of a transaction of several (see idempotency._apply).
    apply_recorded: RecordedApplier | None = None
    # Its batch form, for commands of the type that arrive together (see `command`).
    apply_recorded_many: RecordedBatchApplier | None = None
    # The batch form on the event loop, tried first where it is set (see `command`).
    apply_recorded_many_async: AsyncRecordedBatchApplier | None = None
    # A command that is not exactly-once from the event loop, tried first where it is set.
    apply_async: AsyncApplier | None = None


_registry: dict[str, Handler] = {}


def register(handler: Handler) -> Handler:
    if handler.type in _registry and _registry[handler.type] != handler:
        raise ValueError(f"command type {handler.type!r} is already registered")
    _registry[handler.type] = handler
    return handler


def command(
    type: str,
    *,
    validate: Validator | None = None,
    exactly_once: bool = True,
    subscribes_to: Callable[[Any], str] | None = None,
    apply_recorded: RecordedApplier | None = None,
    apply_recorded_many: RecordedBatchApplier | None = None,
    apply_recorded_many_async: AsyncRecordedBatchApplier | None = None,
    apply_async: AsyncApplier | None = None,
) -> Callable[[Applier], Applier]:
    """Register `apply(ctx, data) -> ack data` as the handler of `type`.

    `validate(d)` gets the command's `d` (already known to be an object) and
    returns what `apply` receives; it raises `messaging.core.exceptions.Invalid`.

    An exactly-once type may add faster forms that write its effect and its
    `CommandRecord` in one atomic statement, each returning None where the
    database has no such form (then `apply` runs in a transaction):

    - `apply_recorded(ctx, data, fingerprint)` returns the ack data of one
      command;
    - `apply_recorded_many([(ctx, data, fingerprint), ...])`, for commands of
      the type that arrive together, returns per command, in the given order,
      its ack data or the `CommandError` that refuses it (nothing of a
      refused command may be stored), and leaves replies and broadcasts on
      each command's `ctx`. It raises `IntegrityError` if any command was
      applied before or comes twice: the whole statement is undone and each
      command runs alone, where its record answers a duplicate. Any other
      error fails every command of the batch with `unavailable`.
    - `apply_recorded_many_async(...)`, the same contract as a coroutine on
      the event loop (a statement through `messaging.core.loopdb`), for batches of
      one command or more; where it returns None the batch takes a database
      thread and the forms above.

    A type that is not exactly-once may add `apply_async(ctx, data)`: `apply`
    as a coroutine on the event loop, in a transaction of its own (one
    statement through `messaging.core.loopdb`). Where it returns None, `apply` runs
    in a transaction on a database thread.
    """

    if exactly_once and apply_async is not None:
        # Its statement would write no record: an exactly-once type's loop form
        # is `apply_recorded_many_async`.
        raise ValueError(f"{type!r} is exactly-once: give apply_recorded_many_async, not apply_async")

    def decorate(apply: Applier) -> Applier:
        register(
            Handler(
                type=type,
                apply=apply,
                validate=validate or _accept_object,
                exactly_once=exactly_once,
                subscribes_to=subscribes_to,
                apply_recorded=apply_recorded,
                apply_recorded_many=apply_recorded_many,
                apply_recorded_many_async=apply_recorded_many_async,
                apply_async=apply_async,
            )
        )
        return apply

    return decorate


def lookup(command_type: Any) -> Handler:
    if not isinstance(command_type, str):
        raise Invalid("t must be a string")
    try:
        return _registry[command_type]
    except KeyError:
        # Bounded after escaping: a repr of 64 characters can be 640 long.
        shown = repr(command_type[:64])
        raise UnknownType(f"no handler for {shown if len(shown) <= 80 else shown[:77] + '...'}") from None


def validate(handler: Handler, data: Any) -> Any:
    """What `handler.validate` makes of `data`, once it is an object within every command's limits."""
    return handler.validate(check_data(require_object(data)))
