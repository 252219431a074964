"""Consumer groups over the Redis stream: each `event_id` applied once per group.

`consume(handler, group=...)` (and `python manage.py messaging_consume`) reads
the stream as one consumer of a Redis consumer group. A new group starts from
the oldest entry the stream holds. Entries a dead consumer left pending are
claimed again with `XAUTOCLAIM` once idle for `claim_after` seconds; an entry
whose handler failed is left pending the same way, so it is retried after
`claim_after`, and after `max_attempts` deliveries it goes to the dead
letters (the admin lists them) instead.

Two shapes of "once" (docs/EVENTS.md):

- transactional (the default): the handler runs in a database transaction
  that also inserts the inbox record `(group, event_id)` under a unique
  constraint. A redelivered event finds its record and is acknowledged
  without running the handler; a handler that failed left no record.
- outside the database (`@outside_database`): for an effect that cannot join
  the transaction (an HTTP call, an e-mail). The inbox is the seen-set: the
  handler runs only for an unseen `event_id`, and the record is written after
  it returns. A crash in between runs it again, so the handler must forward
  the `event_id` downstream as its idempotency key (`Idempotency-Key`,
  `Message-ID`), where the far side drops the repeat.

The entry is acknowledged (`XACK`) only after the transaction commits: a
consumer killed before that leaves it pending, to be reclaimed.

A handler marked `also_every(seconds, task)` has its group's consumers run
`task` between reads, at most once per `seconds` each: work that comes due
with time rather than with an event (the mentions' digests), done by the
group's own processes. Every consumer runs it, so `task` takes its own locks.
"""

from __future__ import annotations

import logging
import os
import socket
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import orjson
import redis
from django.db import (
    DatabaseError,
    IntegrityError,
    InterfaceError,
    OperationalError,
    close_old_connections,
    connection,
    connections,
    transaction,
)

from ..backends import required_url
from .models import DeadLetter, InboxRecord
from .redaction import as_it_stands
from .retries import exponential

if TYPE_CHECKING:
    from ..conf import MessagingSettings

log = logging.getLogger(__name__)

Handler = Callable[[dict[str, Any]], Any]

# Errors remembered per pending entry, for its dead letter; bounded.
ERRORS_KEPT = 1000


def outside_database(handler: Handler) -> Handler:
    """Mark `handler` as one whose effect is outside the database (the seen-set shape)."""
    handler.outside_database = True  # type: ignore[attr-defined]  # a mark on the function object
    return handler


def also_every(seconds: float, task: Callable[[], Any]) -> Callable[[Handler], Handler]:
    """Mark a handler whose group's consumers also run `task` every `seconds`, between reads."""

    def mark(handler: Handler) -> Handler:
        handler.also_every = (seconds, task)  # type: ignore[attr-defined]  # a mark on the function object
        return handler

    return mark


def event_of(fields: dict[str, str]) -> dict[str, Any]:
    """The handler's argument: the entry's fields with `data` decoded."""
    return {
        "event_id": fields["event_id"],
        "type": fields["type"],
        "room": fields["room"],
        "data": orjson.loads(fields["data"]),
    }


def consumer_name() -> str:
    return f"{socket.gethostname()}-{os.getpid()}"


class GroupApplier:
    """Applies a group's events once each, whatever carries them (the Redis stream here, JetStream in nats.py)."""

    def __init__(
        self, group: str, handler: Handler, *, name: str | None = None, claim_after: float = 30.0, max_attempts: int = 5
    ) -> None:
        if not group or len(group) > 100:
            raise ValueError("a group name is 1 to 100 characters")
        self.group = group
        self.handler = handler
        self.name = name or consumer_name()
        self.claim_after = claim_after
        self.max_attempts = max_attempts
        self.errors: OrderedDict[str, str] = OrderedDict()
        self.stopping = False
        self.periodic_at = float("-inf")

    @classmethod
    def from_settings(
        cls,
        conf: MessagingSettings,
        *,
        url: str | None,
        group: str,
        handler: Handler,
        name: str | None = None,
        claim_after: float = 30.0,
        stream: str | None = None,
        block: float = 1.0,
    ) -> GroupApplier:
        """A consumer of `group` reading `url` (`consume` passes the events' URL), as the settings describe."""
        raise NotImplementedError

    def run(self) -> None:
        """Consume until `stop()`, waiting out the outages of the stream's service and of the database."""
        raise NotImplementedError

    def stop(self) -> None:
        self.stopping = True

    def handle(self, entry_id: str, fields: dict[str, str], *, deliveries: int) -> bool:
        """Apply one entry (its `deliveries`-th delivery); whether to acknowledge it.

        Should the database go away meanwhile, it waits for it and applies the
        entry again, so an outage costs the event none of its attempts.
        """
        while True:
            try:
                return self.handle_once(entry_id, fields, deliveries=deliveries)
            except (OperationalError, InterfaceError) as exc:
                log.warning("consumer %s: database: %s", self.group, exc)
                self.wait_for_database()
                if self.stopping:
                    return False

    def handle_once(self, entry_id: str, fields: dict[str, str], *, deliveries: int) -> bool:
        close_old_connections()
        try:
            event = event_of(fields)
            uuid.UUID(event["event_id"])
        except (KeyError, ValueError, orjson.JSONDecodeError) as exc:
            # Not one of ours: it can never succeed.
            self.dead_letter(
                entry_id, {"fields": fields}, fields.get("event_id"), deliveries, f"malformed entry: {exc}"
            )
            return True
        if deliveries > self.max_attempts:
            error = self.errors.pop(entry_id, f"failed {deliveries - 1} deliveries")
            self.dead_letter(entry_id, event, event["event_id"], deliveries - 1, error)
            return True
        try:
            if getattr(self.handler, "outside_database", False):
                self.apply_outside(event)
            else:
                self.apply_in_transaction(event)
        except (OperationalError, InterfaceError):
            raise  # the database, not the handler: `handle` waits and tries again
        except Exception as exc:
            log.exception("consumer %s: handler failed on %s (delivery %d)", self.group, event["event_id"], deliveries)
            self.remember(entry_id, f"{type(exc).__name__}: {exc}")
            return False  # left pending: reclaimed after claim_after
        self.errors.pop(entry_id, None)
        return True

    def run_periodic(self) -> None:
        """The handler's `also_every` task, if it has one and it is due; a failure is logged, not raised."""
        periodic = getattr(self.handler, "also_every", None)
        if periodic is None or time.monotonic() - self.periodic_at < periodic[0]:
            return
        self.periodic_at = time.monotonic()
        close_old_connections()
        try:
            periodic[1]()
        except (OperationalError, InterfaceError) as exc:
            log.warning("consumer %s: database: %s", self.group, exc)
            self.wait_for_database()
        except Exception:
            log.exception("consumer %s: the handler's periodic task failed", self.group)

    def wait_for_database(self) -> None:
        """Back off until the database answers again (it went away under a handler)."""
        failures = 0
        while not self.stopping:
            connections.close_all()
            try:
                connection.ensure_connection()
                return
            except DatabaseError as exc:
                failures += 1
                log.warning("consumer %s: database: %s (waiting)", self.group, exc)
                time.sleep(exponential(failures))

    def apply_in_transaction(self, event: dict[str, Any]) -> None:
        with transaction.atomic():
            try:
                with transaction.atomic():
                    InboxRecord.objects.create(group=self.group, event_id=event["event_id"])
            except IntegrityError:
                return  # applied before (a redelivery, or another consumer of the group)
            self.handler(event)

    def apply_outside(self, event: dict[str, Any]) -> None:
        if InboxRecord.objects.filter(group=self.group, event_id=event["event_id"]).exists():
            return
        self.handler(event)
        InboxRecord.objects.get_or_create(group=self.group, event_id=event["event_id"])

    def dead_letter(self, entry_id: str, event: dict[str, Any], event_id: Any, attempts: int, error: str) -> None:
        log.error("consumer %s: %s to the dead letters after %d attempts: %s", self.group, event_id, attempts, error)
        try:
            key = uuid.UUID(str(event_id))
        except ValueError:
            key = uuid.uuid5(uuid.NAMESPACE_OID, entry_id)
        with transaction.atomic():
            # The stream's copy may carry the body of a message deleted since: not into the table.
            DeadLetter.objects.get_or_create(
                group=self.group,
                event_id=key,
                defaults={"event": as_it_stands(event), "attempts": attempts, "error": error[:10_000]},
            )

    def remember(self, entry_id: str, error: str) -> None:
        self.errors[entry_id] = error
        self.errors.move_to_end(entry_id)
        while len(self.errors) > ERRORS_KEPT:
            self.errors.popitem(last=False)


class Consumer(GroupApplier):
    """One consumer of a group of the Redis stream."""

    def __init__(
        self,
        client: redis.Redis,
        stream: str,
        group: str,
        handler: Handler,
        *,
        name: str | None = None,
        claim_after: float = 30.0,
        max_attempts: int = 5,
        batch: int = 100,
        block: float = 1.0,
    ) -> None:
        super().__init__(group, handler, name=name, claim_after=claim_after, max_attempts=max_attempts)
        self.client = client
        self.stream = stream
        self.batch = batch
        self.block = block
        self.claim_cursor = "0-0"

    @classmethod
    def from_settings(
        cls,
        conf: MessagingSettings,
        *,
        url: str | None,
        group: str,
        handler: Handler,
        name: str | None = None,
        claim_after: float = 30.0,
        stream: str | None = None,
        block: float = 1.0,
    ) -> GroupApplier:
        return cls(
            redis_for_consumer(required_url(url), block),
            stream or conf.EVENTS_STREAM,
            group,
            handler,
            name=name,
            claim_after=claim_after,
            max_attempts=conf.EVENTS_MAX_ATTEMPTS,
            batch=conf.EVENTS_BATCH,
            block=block,
        )

    def ensure_group(self) -> None:
        try:
            # From the oldest entry the stream holds ("0"), creating the stream if need be.
            self.client.xgroup_create(self.stream, self.group, id="0", mkstream=True)
        except redis.ResponseError as exc:
            if "BUSYGROUP" not in str(exc):
                raise

    def run(self) -> None:
        """Consume until `stop()`; a Redis that is down is waited out."""
        failures = 0
        while not self.stopping:
            try:
                self.ensure_group()
                while not self.stopping:
                    self.step()
                    failures = 0
            except (redis.ConnectionError, redis.TimeoutError) as exc:
                failures += 1
                log.warning("consumer %s: redis: %s (retrying)", self.group, exc)
                time.sleep(exponential(failures))
            except DatabaseError as exc:
                log.warning("consumer %s: database: %s", self.group, exc)
                self.wait_for_database()

    def step(self) -> int:
        """Reclaim idle pending entries, then read new ones; the entries handled."""
        handled = self.reclaim()
        read: Any = self.client.xreadgroup(  # redis-py types a reply as whatever any command may answer
            self.group, self.name, {self.stream: ">"}, count=self.batch, block=int(self.block * 1000)
        )
        for _, entries in read or ():
            for entry_id, fields in entries:
                if self.handle(entry_id, fields, deliveries=1):
                    self.client.xack(self.stream, self.group, entry_id)
                handled += 1
        self.run_periodic()
        return handled

    def reclaim(self) -> int:
        # redis-py types a reply as whatever any command may answer.
        reply: Any = self.client.xautoclaim(
            self.stream,
            self.group,
            self.name,
            min_idle_time=int(self.claim_after * 1000),
            start_id=self.claim_cursor,
            count=self.batch,
        )
        cursor, claimed, *_ = reply
        self.claim_cursor = cursor
        handled = 0
        for entry_id, fields in claimed:
            if fields is None:  # trimmed from the stream while pending: nothing left to apply
                self.client.xack(self.stream, self.group, entry_id)
                continue
            if self.handle(entry_id, fields, deliveries=self.deliveries(entry_id)):
                self.client.xack(self.stream, self.group, entry_id)
            handled += 1
        return handled

    def deliveries(self, entry_id: str) -> int:
        pending: Any = self.client.xpending_range(self.stream, self.group, min=entry_id, max=entry_id, count=1)
        return int(pending[0]["times_delivered"]) if pending else 1


def redis_for_consumer(url: str, block: float) -> redis.Redis:
    # The read blocks for `block` seconds: the socket must wait longer than
    # that (redis-py's 5 s default would fail a blocking read of 5 s).
    return redis.Redis.from_url(url, decode_responses=True, socket_timeout=block + 10, socket_connect_timeout=5)


def consume(
    handler: Handler,
    *,
    group: str,
    claim_after: float = 30.0,
    name: str | None = None,
    url: str | None = None,
    stream: str | None = None,
    block: float = 1.0,
) -> GroupApplier:
    """A consumer of the configured stream (call `.run()`): `EVENTS_URL`, or the Redis stream on `REDIS_URL`.

    Of the class `EVENTS_GROUP` names, else the one the URL's scheme picks
    (messaging/backends.py): `Consumer` for Redis, `NatsConsumer` for NATS.
    """
    from .. import backends
    from ..conf import get_settings

    conf = get_settings()
    url = url or backends.events_url(conf)
    cls = backends.backend("EVENTS_GROUP", backends.group_path(conf, url))
    consumer: GroupApplier = cls.from_settings(
        conf, url=url, group=group, handler=handler, name=name, claim_after=claim_after, stream=stream, block=block
    )
    return consumer
