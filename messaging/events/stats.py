"""The events' numbers: what the relay published, and the outbox's backlog
(the metrics themselves are in messaging/ops/metrics.py)."""

from __future__ import annotations

from datetime import UTC, datetime

from ..ops.metrics import EVENTS_PUBLISH_LAG, EVENTS_PUBLISHED, EVENTS_RELAY_PARTITIONS
from .models import Event

# The most unpublished rows a scrape counts: past it the count says "at least".
BACKLOG_COUNT_LIMIT = 100_000


def published(count: int, *, oldest: datetime) -> None:
    EVENTS_PUBLISHED.inc(count)
    lag((datetime.now(UTC) - oldest).total_seconds())


def lag(seconds: float) -> None:
    EVENTS_PUBLISH_LAG.set(max(0.0, seconds))


def partitions(count: int) -> None:
    EVENTS_RELAY_PARTITIONS.set(count)


def backlog() -> tuple[int, float]:
    """Unpublished events (counted up to `BACKLOG_COUNT_LIMIT`) and the oldest one's age in seconds (0 if none).

    Two queries on the partial index of unpublished rows, however long the backlog.
    """
    unpublished = Event.objects.filter(published_at__isnull=True)
    count = unpublished[:BACKLOG_COUNT_LIMIT].count()
    oldest = unpublished.order_by("id").values_list("created_at", flat=True).first()
    if oldest is None:
        return count, 0.0
    return count, max(0.0, (datetime.now(UTC) - oldest).total_seconds())
