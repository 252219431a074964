"""`/healthz` (is the database and the dedup window's Redis answering) and `/metrics` (Prometheus)."""

from __future__ import annotations

import functools
import hmac
import logging

import redis
from django.db import DatabaseError, connection
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET

from ..conf import get_settings
from ..core.claims import RedisClaimStore, get_claim_store
from ..events.health import events_health
from . import metrics

log = logging.getLogger(__name__)


@never_cache
@require_GET
def healthz(request: HttpRequest) -> JsonResponse:
    """200 when the database and the dedup window's Redis answer, else 503 naming what failed.

    Without Redis configured the app runs on the database alone, so its absence
    is reported, not failed. A stuck events relay is reported too (`events`,
    messaging/events/health.py), not failed: this process is healthy, and
    restarting it would not move the relay.
    """
    checks = {"database": "ok", "redis": "ok"}
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
    except DatabaseError as exc:
        log.warning("health check: database failed: %s", exc)
        checks["database"] = "failed"
    store = get_claim_store()
    if isinstance(store, RedisClaimStore):
        try:
            ping_client(store.url, store.timeout).ping()
        except Exception as exc:
            log.warning("health check: redis failed: %s", exc)
            checks["redis"] = "failed"
    else:
        checks["redis"] = "not configured"
    healthy = "failed" not in checks.values()
    body = {"status": "ok" if healthy else "failed", "checks": checks}
    body.update(events_health())
    return JsonResponse(body, status=200 if healthy else 503)


@functools.lru_cache(maxsize=4)
def ping_client(url: str, timeout: float) -> redis.Redis:
    """A client of the view's own for `/healthz` (a sync view; the pipeline's clients are its event loops')."""
    return redis.Redis.from_url(url, socket_timeout=timeout, socket_connect_timeout=timeout, retry_on_timeout=False)


@never_cache
@require_GET
def metrics_view(request: HttpRequest) -> HttpResponse:
    """Prometheus exposition, for scrapers that send `Authorization: Bearer <METRICS_TOKEN>`."""
    token = get_settings().METRICS_TOKEN
    if not token:
        return HttpResponse("metrics are off: set MESSAGING['METRICS_TOKEN']\n", status=404, content_type="text/plain")
    scheme, _, given = request.headers.get("Authorization", "").partition(" ")
    if scheme.lower() != "bearer" or not hmac.compare_digest(given.strip().encode(), token.encode()):
        response = HttpResponse("a bearer token is required\n", status=401, content_type="text/plain")
        response["WWW-Authenticate"] = 'Bearer realm="metrics"'
        return response
    body, content_type = metrics.exposition()
    return HttpResponse(body, content_type=content_type)
