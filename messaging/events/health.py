"""What `/healthz` says of the events: whether the relay keeps up."""

from __future__ import annotations

import logging
from typing import Any

from django.db import DatabaseError

from ..conf import get_settings
from .stats import backlog

log = logging.getLogger(__name__)


def events_health() -> dict[str, Any]:
    """`{"events": {...}}` to merge into the health body when the relay is stuck, else `{}`.

    Stuck: the oldest unpublished event is older than `EVENTS_STUCK_AFTER`
    (no relay runs, or it cannot reach its sink). A healthy body stays as it
    was, so monitors that compare it keep working.
    """
    conf = get_settings()
    if not conf.EVENTS_OUTBOX:
        return {}
    try:
        unpublished, lag = backlog()
    except DatabaseError as exc:
        log.warning("health check: events backlog failed: %s", exc)
        return {}
    if lag <= conf.EVENTS_STUCK_AFTER:
        return {}
    log.warning("health check: the events relay is stuck: %d unpublished, the oldest %.0f s old", unpublished, lag)
    return {"events": {"relay": "stuck", "unpublished": unpublished, "lag_seconds": round(lag, 3)}}
