"""The relay: publishes committed events from the outbox, in order per room, at least once.

The outbox is split into `EVENTS_PARTITIONS` partitions by room id. A relay
publishes only the partitions whose session advisory lock it holds, so any
number of relays may run: one wins each partition, and a relay that dies
(SIGKILL included) loses its locks with its connection, so another takes its
partitions over within `CLAIM_EVERY` seconds. Per batch, in one
transaction: mark the oldest unpublished events of its partitions published
(the outbox's order follows each room's positions,
messaging/events/outbox.py), publish them in that order, and only then
commit. A relay killed before the commit publishes the batch again on
restart: the same rows, so the same `event_id`s and data (unless a delete
blanked a body meanwhile: PROTOCOL.md 1.2, "Deleted means gone").

It reaches the database through its own psycopg connection (with Django's
parameters), not Django's: it is a long-running asyncio process whose sinks
(redis.asyncio, nats-py) are async.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any, cast

import psycopg

from . import stats
from .models import Event, InboxRecord
from .retries import full_jitter
from .sinks import Sink, entry

log = logging.getLogger(__name__)

# The first key of the partitions' two-key advisory locks ("evts").
EVENTS_LOCK = 0x65767473
# Seconds between attempts to take partitions no relay holds.
CLAIM_EVERY = 2.0
# Seconds between prunes of published events and old inbox records.
PRUNE_EVERY = 60.0
# Most rows one prune statement deletes, so it never holds many locks long.
PRUNE_CHUNK = 5000


class Relay:
    def __init__(
        self,
        connection_params: dict[str, Any],
        sink: Sink,
        *,
        partitions: int,
        batch: int,
        poll_interval: float,
        retention: float,
    ) -> None:
        self.params = connection_params
        self.sink = sink
        self.partitions = partitions
        self.batch = batch
        self.poll_interval = poll_interval
        self.retention = retention
        self.conn: psycopg.AsyncConnection | None = None
        self.owned: set[int] = set()
        self.claimed_at = 0.0
        self.pruned_at = 0.0
        self.stopping = asyncio.Event()

    def stop(self) -> None:
        self.stopping.set()

    async def run(self) -> None:
        """Publish until `stop()`; database and sink failures are waited out, never fatal."""
        failures = 0
        while not self.stopping.is_set():
            try:
                published = await self.step()
                failures = 0
            except Exception as exc:  # a database or sink failure: nothing was marked
                failures += 1
                log.warning("relay: %s: %s (retrying)", type(exc).__name__, exc)
                if isinstance(exc, psycopg.Error):
                    await self.disconnect()
                await self.sleep(full_jitter(failures))
                continue
            if published < self.batch:
                await self.sleep(self.poll_interval)
        await self.disconnect()
        await self.sink.aclose()

    async def sleep(self, seconds: float) -> None:
        try:
            await asyncio.wait_for(self.stopping.wait(), seconds)
        except TimeoutError:
            pass

    async def step(self) -> int:
        """Claim free partitions when due, publish one batch, prune when due; the events published."""
        if self.conn is None or self.conn.closed:
            self.conn = await psycopg.AsyncConnection.connect(**self.params, autocommit=True)
            self.owned = set()
            self.claimed_at = 0.0
        now = time.monotonic()
        if now - self.claimed_at >= CLAIM_EVERY and len(self.owned) < self.partitions:
            await self.claim()
            self.claimed_at = now
        published = await self.publish_batch()
        if now - self.pruned_at >= PRUNE_EVERY:
            await self.prune()
            self.pruned_at = now
        return published

    @property
    def connected(self) -> psycopg.AsyncConnection[tuple[Any, ...]]:
        """The relay's connection, which `step` opens before anything uses it."""
        return cast("psycopg.AsyncConnection[tuple[Any, ...]]", self.conn)

    async def claim(self) -> None:
        free = [k for k in range(self.partitions) if k not in self.owned]
        cursor = await self.connected.execute(
            "SELECT k FROM unnest(%s::int[]) AS k WHERE pg_try_advisory_lock(%s, k)", [free, EVENTS_LOCK]
        )
        taken = {k for (k,) in await cursor.fetchall()}
        if taken:
            log.info("relay: took partitions %s", sorted(taken))
        self.owned |= taken
        stats.partitions(len(self.owned))

    async def publish_batch(self) -> int:
        """Publish the next batch; how many events it had.

        The batch's rows stay locked from the read until the sink has them:
        they are read by the UPDATE that marks them, locked in id order (as a
        delete locks its events, messaging/events/redaction.py), in a
        transaction that commits only once the sink has stored the batch and
        rolls back if it fails. So a delete that blanks one of them waits for
        the batch to be out, and a batch reads a row a delete has blanked
        only once that delete commits: an event leaves with the body it has
        when it is published, never with one deleted before.
        """
        if not self.owned:
            return 0
        table = Event._meta.db_table
        conn = self.connected
        async with conn.transaction():
            cursor = await conn.execute(
                f"UPDATE {table} SET published_at = now() WHERE id IN (SELECT id FROM {table} "
                "WHERE published_at IS NULL AND mod(room_id, %s) = ANY(%s) ORDER BY id LIMIT %s FOR UPDATE) "
                "RETURNING id, event_id, type, room, data, created_at",
                [self.partitions, sorted(self.owned), self.batch],
            )
            rows = sorted(await cursor.fetchall())  # RETURNING has no order: the outbox's is by id
            if not rows:
                stats.lag(0.0)
                return 0
            await self.sink.publish([entry(event_id, type, room, data) for _, event_id, type, room, data, _ in rows])
        stats.published(len(rows), oldest=rows[0][5])
        return len(rows)

    async def prune(self) -> None:
        """Delete published events and inbox records older than the retention, a chunk at a time.

        Rows a delete holds (blanking them) are skipped, left to the next
        prune: a prune that waited for one while holding others it deleted
        could meet that delete in a cycle.
        """
        for model, column, condition in (
            (Event, "published_at", "published_at IS NOT NULL AND "),
            (InboxRecord, "applied_at", ""),
        ):
            table = model._meta.db_table
            while True:
                cursor = await self.connected.execute(
                    f"DELETE FROM {table} WHERE id IN (SELECT id FROM {table} WHERE {condition}"
                    f"{column} < now() - make_interval(secs => %s) LIMIT %s FOR UPDATE SKIP LOCKED)",
                    [self.retention, PRUNE_CHUNK],
                )
                if cursor.rowcount < PRUNE_CHUNK:
                    break

    async def disconnect(self) -> None:
        if self.conn is not None:
            conn, self.conn = self.conn, None
            self.owned = set()
            try:
                await conn.close()
            except Exception:
                pass
