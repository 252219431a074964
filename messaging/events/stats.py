"""The events' metrics: what the relay published, and the outbox's backlog.

The relay counts what it publishes (`messaging_events_published`, its
throughput as a rate); with `PROMETHEUS_MULTIPROC_DIR` shared with the web
processes, any scrape shows it. The backlog is read from the outbox itself
at scrape time (`OutboxCollector`), so a relay that is down or stuck shows as
a growing lag rather than as a stale number of its own.
"""
from __future__ import annotations

from datetime import datetime, timezone

from django.db import DatabaseError, connection
from prometheus_client import Counter, Gauge
from prometheus_client.core import GaugeMetricFamily

from .models import Event

PUBLISHED = Counter("messaging_events_published", "Events the relay published to its sink (at least once: "
                    "a republished event counts again).")
PARTITIONS = Gauge("messaging_events_relay_partitions", "Outbox partitions held by live relays.",
                   multiprocess_mode="livesum")
PUBLISH_LAG = Gauge("messaging_events_publish_lag_seconds", "Age of the oldest event of the relay's last batch "
                    "when it was published.", multiprocess_mode="livemax")

# The most unpublished rows a scrape counts: past it the count says "at least".
BACKLOG_COUNT_LIMIT = 100_000


def published(count: int, *, oldest: datetime) -> None:
    PUBLISHED.inc(count)
    lag((datetime.now(timezone.utc) - oldest).total_seconds())


def lag(seconds: float) -> None:
    PUBLISH_LAG.set(max(0.0, seconds))


def partitions(count: int) -> None:
    PARTITIONS.set(count)


def backlog() -> tuple[int, float]:
    """Unpublished events (counted up to `BACKLOG_COUNT_LIMIT`) and the oldest one's age in seconds (0 if none)."""
    table = Event._meta.db_table
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT (SELECT count(*) FROM (SELECT 1 FROM {table} WHERE published_at IS NULL LIMIT %s) AS b), "
            f"(SELECT min(created_at) FROM {table} WHERE published_at IS NULL)", [BACKLOG_COUNT_LIMIT])
        count, oldest = cursor.fetchone()
    if oldest is None:
        return count, 0.0
    return count, max(0.0, (datetime.now(timezone.utc) - oldest).total_seconds())


class OutboxCollector:
    """`messaging_events_unpublished` and `messaging_events_lag_seconds`, read at scrape time."""

    def collect(self):
        try:
            count, age = backlog()
        except DatabaseError:
            return
        yield GaugeMetricFamily("messaging_events_unpublished", "Events in the outbox not yet published "
                                f"(counted up to {BACKLOG_COUNT_LIMIT}).", value=count)
        yield GaugeMetricFamily("messaging_events_lag_seconds", "Age of the oldest unpublished event: "
                                "the relay's lag (0 when it has caught up).", value=age)
