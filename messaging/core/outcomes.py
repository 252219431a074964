"""What goes through the pipeline: a `Delivery` in, an `Outcome` (or a refusal) out."""

from __future__ import annotations

import contextvars
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from .claims import Stored, claim_key
from .handlers import CommandContext, Handler
from .protocol import Command


@dataclass
class Outcome:
    """The result of one delivery of a command."""

    data: dict[str, Any]
    dup: bool = False
    # Where a duplicate's answer came from: "redis" (the fast window) or
    # "database" (the durable record); None when this delivery applied it.
    source: str | None = None
    replies: list[dict[str, Any]] = field(default_factory=list)
    broadcasts: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    to_users: list[tuple[Any, str | None, dict[str, Any]]] = field(default_factory=list)

    @classmethod
    def applied(cls, data: dict[str, Any], ctx: CommandContext) -> Outcome:
        """This delivery applied the command: its result, and the frames its handler left on `ctx`."""
        return cls(data=data, replies=ctx.replies, broadcasts=ctx.broadcasts, to_users=ctx.to_users)


class ClaimBusy(Exception):
    """Another attempt holds the claim on this command; ask again shortly."""


@dataclass
class Delivery:
    """One delivery of a command, validated (`data`), as the pipeline carries it."""

    user: Any
    command: Command
    handler: Handler
    data: Any
    # The caller's context variables (the command's log scope), for the work
    # done for this delivery alone on a database thread.
    context: contextvars.Context | None = None
    # The client's address as its transport keyed it (`CommandContext.client_address`), or None.
    client_address: str | None = None
    fingerprint: str | None = field(init=False)
    # When its entry point received it (`time.perf_counter()`), for the answer's latency.
    received: float = 0.0

    def __post_init__(self) -> None:
        # Now, before the delivery joins a batch: a command whose data cannot
        # be fingerprinted raises here, for its caller alone (`Invalid`).
        self.fingerprint = self.command.fingerprint if self.handler.exactly_once else None

    @property
    def batchable(self) -> bool:
        """Whether it may run in one batch with others of its type: exactly-once, and not a join."""
        return self.handler.exactly_once and self.handler.subscribes_to is None

    @property
    def gathered(self) -> bool:
        """Whether it may run in one call with others of its type, from any senders: not
        exactly-once, of a `gathered` type (`receipt`)."""
        return not self.handler.exactly_once and self.handler.gathered

    @cached_property
    def key(self) -> str:
        return claim_key(self.user.pk, self.command.id)

    def context_for(self) -> CommandContext:
        return CommandContext(
            user=self.user, command_id=self.command.id, type=self.handler.type, client_address=self.client_address
        )

    def run(self, func: Callable[..., Any], *args: Any) -> Any:
        return func(*args) if self.context is None else self.context.run(func, *args)


# What applying a claimed delivery came to: its outcome (or the exception for
# its caller), and the result Redis learns for it (None: release its claim).
Applied = tuple["Outcome | Exception", "Stored | None"]
