"""The durable record of exactly-once, and the portable way to apply one delivery.

The effect and a `CommandRecord` are written in one transaction, and a
unique constraint on `(user, command_id)` makes a second commit impossible.
A duplicate Redis does not know (window passed, data flushed, server down)
fails on that constraint, is rolled back and answered from the record.

Everything here is ORM work on a database thread (`Gateway.run`): a type's
portable `apply`, for any database, and the record's lookup.

Every copy of a command's ack is the same text: PostgreSQL's jsonb keeps an
object's keys in its own order (shorter first, then bytewise), so a result is
put in that order before it is first answered (`in_record_order`), and the
original, Redis's copy and the record's all read alike.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, cast

from django.db import DatabaseError, IntegrityError, transaction

from ..models import CommandRecord
from .claims import Stored
from .exceptions import CommandError, IdReused, Unavailable
from .outcomes import Applied, Delivery, Outcome

log = logging.getLogger(__name__)


@contextmanager
def unexpected_as_unavailable(delivery: Delivery) -> Iterator[None]:
    """Unexpected failures inside, logged, become `Unavailable`; refusals and IntegrityError pass."""
    command = delivery.command
    try:
        yield
    except (CommandError, IntegrityError):
        raise
    except DatabaseError as exc:
        log.warning("storage failed for %s %s by user %s: %s", command.t, command.id, delivery.user.pk, exc)
        raise Unavailable() from exc
    except Exception as exc:
        log.exception("handler failed for %s %s by user %s", command.t, command.id, delivery.user.pk)
        raise Unavailable() from exc


def in_record_order(value: Any) -> Any:
    """`value` with every object's keys in the order a jsonb record keeps them: by length
    in UTF-8, then bytewise. Lists keep theirs."""
    if isinstance(value, dict):
        return {key: in_record_order(value[key]) for key in sorted(value, key=_record_key)}
    if isinstance(value, list):
        return [in_record_order(item) for item in value]
    return value


def _record_key(key: str) -> tuple[int, bytes]:
    encoded = key.encode()
    return len(encoded), encoded


def apply_portably(delivery: Delivery) -> Outcome:
    """The type's `apply` in a transaction, with the command's record if it is exactly-once.

    Raises the refusal, IntegrityError (the record exists: applied before),
    or `Unavailable` for anything unexpected.
    """
    ctx = delivery.context_for()
    with unexpected_as_unavailable(delivery):
        with transaction.atomic():
            result = delivery.handler.apply(ctx, delivery.data)
            if delivery.fingerprint is not None:
                result = in_record_order(result)
                CommandRecord.objects.create(
                    user=delivery.user,
                    command_id=delivery.command.id,
                    type=delivery.handler.type,
                    fingerprint=delivery.fingerprint,
                    result=result,
                )
    return Outcome.applied(result, ctx)


def apply_alone(delivery: Delivery) -> Applied:
    """One claimed exactly-once delivery on its own: its result, and what Redis should learn of it."""
    try:
        outcome = apply_portably(delivery)
    except IntegrityError:
        # The rollback took our attempt's effect back.
        return answer_from_record(delivery)
    except CommandError as exc:
        return exc, None
    # Applied alone only when exactly-once: it has its fingerprint.
    return outcome, Stored(cast(str, delivery.fingerprint), outcome.data)


def answer_from_record(delivery: Delivery) -> Applied:
    """A delivery applied before, where Redis does not remember it: the durable record answers."""
    try:
        stored = recall(delivery.user, delivery.command.id)
    except Unavailable as exc:
        return exc, None
    if stored is None:
        log.error("integrity error without a record for %s %s", delivery.command.t, delivery.command.id)
        return Unavailable(), None
    return replay_or_refuse(stored, delivery.fingerprint, source="database"), stored


def apply_each(deliveries: list[Delivery]) -> list[Applied]:
    """`apply_alone` for each delivery, in order, each in its caller's context (one thread hop for all)."""
    return [delivery.run(apply_alone, delivery) for delivery in deliveries]


def recall(user: Any, command_id: str) -> Stored | None:
    try:
        row = (
            CommandRecord.objects.filter(user=user, command_id=command_id).values_list("fingerprint", "result").first()
        )
    except DatabaseError as exc:
        raise Unavailable() from exc
    return Stored(*row) if row else None


def replay_or_refuse(stored: Stored, fingerprint: str | None, *, source: str) -> Outcome | IdReused:
    if stored.fingerprint != fingerprint:
        return IdReused()
    return Outcome(data=stored.data, dup=True, source=source)
