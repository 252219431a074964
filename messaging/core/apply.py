"""Applying a batch of deliveries: claims in, each delivery's outcome and what Redis learns out.

Per type, a batch's claimed deliveries go through the type's batch form for
the gateway's database (one statement for all of them: `room.post` on
PostgreSQL), else through its portable `apply`, one by one, all in one
database thread hop. The deliveries of an `early_batch` type go through its
form before their claims are known (`apply_early`, beside the claims' Redis
call): the form answers a command applied before from its record, so what
it applies had never been applied, whatever the claims then say. A not
exactly-once delivery runs alone, through the same two forms; those of a
`gathered` type (`receipt`) that arrived together, from any senders, run in
one call of its batch form (`apply_gathered`).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from itertools import groupby
from typing import Any, cast

from django.db import DatabaseError, IntegrityError

from .claims import Stored
from .exceptions import CommandError, Unavailable
from .gateway import Gateway
from .handlers import BatchEntries, BatchForm, Declined, Handler
from .outcomes import Applied, ClaimBusy, Delivery, Outcome
from .records import (
    answer_from_record,
    apply_each,
    apply_portably,
    in_record_order,
    replay_or_refuse,
    unexpected_as_unavailable,
)

log = logging.getLogger(__name__)


class Batch:
    """One run of a batch of exactly-once deliveries: its claims, what was applied, and each one's result."""

    def __init__(
        self, deliveries: list[Delivery], claims: list[Stored | bool | None], early: dict[int, Applied] | None = None
    ) -> None:
        self.deliveries = deliveries
        self.claims = claims
        self.outcomes: list[Outcome | Exception | None] = [None] * len(deliveries)
        # The deliveries still to apply: claimed, or unknown to Redis, and not applied early.
        self.claimed: list[int] = []
        # What applying came to, early (`apply_early`, beside the claims) or in `apply`.
        self.applied: dict[int, Applied] = {}
        early = early or {}
        for i, (delivery, claim) in enumerate(zip(deliveries, claims)):
            done = early.get(i)
            if done is not None and _applied_now(done):
                # Its effect is committed: whatever the claims say, this is its answer.
                self.applied[i] = done
            elif isinstance(claim, Stored):
                self.outcomes[i] = replay_or_refuse(claim, delivery.fingerprint, source="redis")
            elif done is not None:
                self.applied[i] = done
            elif claim is False:
                self.outcomes[i] = ClaimBusy()
            else:
                self.claimed.append(i)

    async def apply(self, gateway: Gateway) -> None:
        """Apply the claimed deliveries: each type's through its batch form where
        it has one for this database, the rest one by one in one thread hop."""
        portable = await _through_forms(self.deliveries, self.claimed, gateway, self.applied)
        if portable:
            done = await gateway.run(apply_each, [self.deliveries[i] for i in portable])
            self.applied.update(zip(portable, done))

    def finish(self) -> tuple[list[tuple[str, Stored]], list[str]]:
        """What Redis learns: each applied delivery's result (or its record's);
        the others (refused, failed, interrupted) give back their claims."""
        learned = {i: stored for i, (_, stored) in self.applied.items() if stored is not None}
        releases = [self.deliveries[i].key for i, claim in enumerate(self.claims) if claim is True and i not in learned]
        return [(self.deliveries[i].key, stored) for i, stored in learned.items()], releases

    def results(self) -> list[Outcome | Exception]:
        for i, (result, _) in self.applied.items():
            self.outcomes[i] = result
        return self.outcomes  # type: ignore[return-value]


def _applied_now(done: Applied) -> bool:
    """Whether this attempt applied its command (not a refusal, a failure or a record's answer)."""
    outcome = done[0]
    return isinstance(outcome, Outcome) and not outcome.dup


async def apply_early(deliveries: list[Delivery], indexes: list[int], gateway: Gateway) -> dict[int, Applied]:
    """The deliveries at `indexes` (of `early_batch` types, one copy of each
    command) through their batch forms, before their claims are known: per
    index what applying came to. A form that declines or meets a unique
    violation applies nothing here; its deliveries run after the claims, in
    `Batch.apply`, as any others do."""
    applied: dict[int, Applied] = {}
    await _through_forms(deliveries, indexes, gateway, applied, early=True)
    return applied


async def _through_forms(
    deliveries: list[Delivery],
    indexes: list[int],
    gateway: Gateway,
    applied: dict[int, Applied],
    *,
    early: bool = False,
) -> list[int]:
    """The deliveries at `indexes`, each type's through its batch form for this
    database, into `applied`; the indexes no form took (none here, or it
    declined them), in no particular order."""
    declined: list[int] = []
    for handler, of_type in _by_type(deliveries, indexes):
        form = handler.batch_form(gateway.vendor)
        done = None
        if form is not None:
            done = await _apply_batch(form, handler, [deliveries[i] for i in of_type], gateway, early=early)
        if done is None:
            declined.extend(of_type)
            continue
        for i, one in zip(of_type, done):
            # None: the form declined this one command (`DECLINED`).
            if one is None:
                declined.append(i)
            else:
                applied[i] = one
    return declined


def _by_type(deliveries: list[Delivery], indexes: list[int]) -> Iterator[tuple[Handler, list[int]]]:
    """The `indexes` grouped by their deliveries' type, each group in the given order."""
    by_type = sorted(indexes, key=lambda i: deliveries[i].handler.type)
    for _, group in groupby(by_type, key=lambda i: deliveries[i].handler.type):
        of_type = list(group)
        yield deliveries[of_type[0]].handler, of_type


def _entries(deliveries: list[Delivery]) -> BatchEntries:
    return [(d.context_for(), d.data, d.fingerprint) for d in deliveries]


async def _apply_batch(
    form: BatchForm, handler: Handler, deliveries: list[Delivery], gateway: Gateway, *, early: bool = False
) -> list[Applied | None] | None:
    """Claimed deliveries of one type through its batch form; None where the form declines
    them all, and None in place of each one it declines alone (`DECLINED`).

    A duplicate among them (one Redis forgot, where the form does not answer
    it from its record, or two copies of one command) fails the whole
    statement on a unique constraint: then each delivery runs alone, a batch
    of one, and where that fails too the record answers; `early`, before the
    claims are known, nothing is applied (None). Any other failure leaves
    every delivery of the batch `unavailable`.
    """
    entries = _entries(deliveries)
    try:
        results = await form(gateway, entries)
    except IntegrityError:
        if early:
            return None
        if len(deliveries) == 1:
            # The record answers (the statement undid this attempt's effect).
            return [await gateway.run(deliveries[0].run, answer_from_record, deliveries[0])]
        # Each alone, through the same form, so the others still take one statement each.
        alone: list[Applied | None] = []
        for delivery in deliveries:
            one = await _apply_batch(form, handler, [delivery], gateway)
            alone.extend(one or [None])
        return alone
    except Exception as exc:
        if isinstance(exc, DatabaseError):
            log.warning("storage failed for a batch of %d %s: %s", len(deliveries), handler.type, exc)
        else:
            log.error("handler failed for a batch of %d %s", len(deliveries), handler.type, exc_info=exc)
        return [(Unavailable(), None) for _ in deliveries]
    if results is None:
        return None
    applied: list[Applied | None] = []
    for (ctx, _, fingerprint), result in zip(entries, results, strict=True):
        if isinstance(result, Declined):  # `DECLINED`
            applied.append(None)
        elif isinstance(result, CommandError):
            applied.append((result, None))
        elif isinstance(result, Stored):
            # Applied before: its record answers, and Redis learns it again.
            applied.append((replay_or_refuse(result, fingerprint, source="database"), result))
        else:
            # A batch of claimed deliveries: exactly-once ones, each with its fingerprint.
            result = in_record_order(result)
            applied.append((Outcome.applied(result, ctx), Stored(cast(str, fingerprint), result)))
    return applied


async def apply_once(delivery: Delivery, gateway: Gateway) -> Outcome:
    """A delivery that is not exactly-once, alone: its type's batch form for this
    database (a batch of one), else its portable `apply` on a database thread."""
    form = delivery.handler.batch_form(gateway.vendor)
    if form is not None:
        [entry] = entries = _entries([delivery])
        with unexpected_as_unavailable(delivery):
            try:
                results = await form(gateway, entries)
            except IntegrityError as exc:
                raise Unavailable() from exc
        if results is not None and not isinstance(results[0], Declined):  # `DECLINED`
            [result] = results
            if isinstance(result, CommandError):
                raise result
            # Not exactly-once: no record, so no `Stored` answers.
            return Outcome.applied(cast("dict[str, Any]", result), entry[0])
    outcome: Outcome = await gateway.run(delivery.run, _portably_unrecorded, delivery)
    return outcome


async def apply_gathered(deliveries: list[Delivery], gateway: Gateway) -> list[Outcome | Exception]:
    """Not exactly-once deliveries of one `gathered` type, from any senders, in
    one call of its batch form: per delivery its `Outcome` or its refusal.

    The form answers each alone (a refusal changes nothing of the others);
    a failure of the whole call (the database) is `unavailable` for each.
    Where the form declines, each runs as `apply_once` does.
    """
    handler = deliveries[0].handler
    form = handler.batch_form(gateway.vendor)
    entries = _entries(deliveries)
    try:
        results = None if form is None else await form(gateway, entries)
    except Exception as exc:
        if isinstance(exc, DatabaseError):
            log.warning("storage failed for a batch of %d %s: %s", len(deliveries), handler.type, exc)
        else:
            log.error("handler failed for a batch of %d %s", len(deliveries), handler.type, exc_info=exc)
        return [Unavailable() for _ in deliveries]
    if results is None:
        alone: list[Outcome | Exception] = []
        for delivery in deliveries:
            try:
                alone.append(await gateway.run(delivery.run, _portably_unrecorded, delivery))
            except Exception as exc:
                alone.append(exc)
        return alone
    return [
        # Not exactly-once: no record, so no `Stored` answers.
        result if isinstance(result, CommandError) else Outcome.applied(cast("dict[str, Any]", result), ctx)
        for (ctx, _, _), result in zip(entries, results, strict=True)
    ]


def _portably_unrecorded(delivery: Delivery) -> Any:
    try:
        return apply_portably(delivery)
    except IntegrityError as exc:
        # Without a record, a unique violation is the handler's own failure.
        log.warning("storage failed for %s %s: %s", delivery.command.t, delivery.command.id, exc)
        raise Unavailable() from exc
