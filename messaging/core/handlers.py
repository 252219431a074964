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

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from .exceptions import CommandError, Invalid, UnknownType
from .protocol import check_data, require_object

if TYPE_CHECKING:
    from .claims import Stored
    from .gateway import Gateway


@dataclass
class CommandContext:
    """What a handler sees of its command, and where it leaves side effects.

    `replies` are frames for the issuing socket, sent after the ack;
    `broadcasts` are `(room, frame)` pairs, sent to the room after commit;
    `to_users` are `(user id, room or None, frame)`, sent after commit to
    that user's sockets (those joined to the room, if one is given). All are
    discarded when the transaction fails.

    `client_address` is the key of the client the command came from, as the
    transport gave it (messaging/transport/addresses.py: an IPv4 address or
    an IPv6 /64), for limits per address; None for a command from server
    code. The core carries it and never reads it.
    """

    user: Any
    command_id: str
    type: str
    client_address: str | None = None
    replies: list[dict[str, Any]] = field(default_factory=list)
    broadcasts: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    to_users: list[tuple[Any, str | None, dict[str, Any]]] = field(default_factory=list)

    def reply(self, frame: dict[str, Any]) -> None:
        self.replies.append(frame)

    def broadcast(self, room: str, frame: dict[str, Any]) -> None:
        self.broadcasts.append((room, frame))

    def send_to_user(self, user_id: Any, frame: dict[str, Any], *, room: str | None = None) -> None:
        """After commit, `frame` to the sockets of the user `user_id`, in every
        process: those joined to `room`, or all of them without one."""
        self.to_users.append((user_id, room, frame))

    def emit(self, type: str, room: str, data: dict[str, Any]) -> None:
        """Write an event of this command's effect on `room` to the outbox, now,
        in the handler's transaction (docs/EVENTS.md): it commits or rolls
        back with the effect. `data` gets the command's id and user added."""
        from ..events.outbox import emit  # the outbox needs the app's models

        emit(self, type, room, data)


Validator = Callable[[dict[str, Any]], Any]
Applier = Callable[[CommandContext, Any], dict[str, Any]]
# `(ctx, data, fingerprint)` per command: the fingerprint its record keeps,
# None for a type that is not exactly-once.
BatchEntries = list[tuple[CommandContext, Any, "str | None"]]


class Declined:
    """A batch form's answer for one command it leaves to the type's portable `apply`.

    For what one statement cannot settle and a transaction of its own can:
    `room.post`'s statement declines a post whose files another post took
    while it ran (messaging/chat/attachments.py), which may be this very
    command, applied by another attempt whose record its snapshot missed.
    Nothing of a declined command may be stored.
    """


DECLINED = Declined()
# A type's batch form for one database: the commands of `entries` through
# the gateway (messaging/core/gateway.py), per command in order its ack data,
# the `CommandError` refusing it, `DECLINED`, or (an `early_batch` type's
# form) the `Stored` record of a command applied before; None where it
# declines them all (then `apply`).
BatchForm = Callable[
    ["Gateway", BatchEntries], Awaitable["Sequence[dict[str, Any] | CommandError | Stored | Declined] | None"]
]


Lane = Literal["room"]


def _accept_object(data: dict[str, Any]) -> dict[str, Any]:
    return data


@dataclass(frozen=True)
class Handler:
    """A command type: `validate`, the portable `apply`, and optional batch forms per database vendor."""

    type: str
    apply: Applier
    validate: Validator = _accept_object
    exactly_once: bool = True
    # A room this command subscribes the socket to, taken from the validated
    # data. The consumer subscribes *before* apply runs, so nothing posted
    # between the backlog query and the subscription is missed.
    subscribes_to: Callable[[Any], str] | None = None
    # Django's `connection.vendor` ("postgresql", ...) -> the type's batch form there.
    batch: Mapping[str, BatchForm] = field(default_factory=dict)
    # Not exactly-once: whether commands of this type that arrive together,
    # from any senders, run in one call of its batch form (`pipeline.run`).
    gathered: bool = False
    # Exactly-once: whether its batch forms answer a command applied before
    # with its record, so that a batch's statement may run beside the
    # batch's claims instead of after them (`pipeline.run_batch`).
    early_batch: bool = False
    # Whether its ack holds a member list (`members`), whose entries the
    # transport marks `online` before it sends the ack (PROTOCOL.md 1.1, "Presence").
    member_list: bool = False
    # The clients' outboxes send a type with a lane one command at a time per
    # lane, in order: "room", one lane per room (`d.room`), for a post and
    # what changes it. None: sent at once. Published to clients
    # (`GET /api/lanes`, and rendered into the page).
    lane: Lane | None = None

    def batch_form(self, vendor: str) -> BatchForm | None:
        """The batch form for a database of `vendor`, if the type has one there."""
        return self.batch.get(vendor)


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
    batch: Mapping[str, BatchForm] | None = None,
    gathered: bool = False,
    early_batch: bool = False,
    member_list: bool = False,
    lane: Lane | None = None,
) -> Callable[[Applier], Applier]:
    """Register `apply(ctx, data) -> ack data` as the handler of `type`.

    `validate(d)` gets the command's `d` (already known to be an object) and
    returns what `apply` receives; it raises `messaging.Invalid`.

    `apply` is the portable form: ORM code for any database, run on a
    database thread inside a transaction (which also writes the command's
    `CommandRecord` for an exactly-once type).

    `batch` maps a database vendor (`"postgresql"`) to a faster form there:
    `async form(gateway, [(ctx, data, fingerprint), ...])`, which runs the
    commands through the gateway's `fetch` (one statement, its own
    transaction) and returns per command, in the given order, its ack data or
    the `CommandError` that refuses it (nothing of a refused command may be
    stored), leaving replies and broadcasts on each command's `ctx`; or None
    to decline (then `apply` runs). For an exactly-once type it writes each
    applied command's `CommandRecord` with its fingerprint in the same
    statement, and raises `IntegrityError` if any command was applied before
    or comes twice: the whole statement is undone and each command runs
    alone through `apply`, where its record answers a duplicate. Any other
    error fails every command of the batch with `unavailable`. A type that
    is not exactly-once gets one command per call (fingerprint None), or,
    `gathered`, every one of its commands that arrived together, from any
    senders (a group commit, as exactly-once commands get): its form then
    answers each alone, and no command's refusal may undo another's effect.

    `early_batch`: the type's batch forms look up each command's record in
    their statement and answer a command applied before with it (its
    `Stored`: fingerprint and result), changing nothing for it; only a
    record committed while the statement runs, or a command twice in one
    call, still raises `IntegrityError`. Such a form cannot apply a command
    twice whatever the claims say, so the pipeline runs it beside the
    batch's claims' Redis call rather than after it (`pipeline.run_batch`).

    `member_list`: its ack data's `members` is a list of members, whose
    entries get `online`. `lane`: "room" has clients send the type's
    commands one at a time per room, in order, behind the posts, edits and
    deletes before them (the `lane` of `lanes()`).
    """

    def decorate(apply: Applier) -> Applier:
        register(
            Handler(
                type=type,
                apply=apply,
                validate=validate or _accept_object,
                exactly_once=exactly_once,
                subscribes_to=subscribes_to,
                batch=dict(batch or {}),
                gathered=gathered,
                early_batch=early_batch,
                member_list=member_list,
                lane=lane,
            )
        )
        return apply

    return decorate


def registered() -> list[str]:
    """The command types registered now."""
    return list(_registry)


def lanes() -> dict[str, Lane]:
    """The registered types that have a lane, with it: what clients' outboxes order (`Handler.lane`)."""
    return {handler.type: handler.lane for handler in _registry.values() if handler.lane is not None}


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
