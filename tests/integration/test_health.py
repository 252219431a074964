"""/healthz answers for the database and the dedup window's Redis."""

from __future__ import annotations

import pytest

from messaging.core.claims import reset_claim_store

pytestmark = [pytest.mark.django_db(transaction=True)]


def test_healthy_when_database_and_redis_answer(client):
    response = client.get("/healthz")
    assert response.status_code == 200
    assert response.json() == {"status": "ok", "checks": {"database": "ok", "redis": "ok"}}
    assert "no-cache" in response["Cache-Control"]


def test_unhealthy_when_redis_is_down(client, settings, own_redis):
    settings.MESSAGING = {**settings.MESSAGING, "REDIS_URL": own_redis.url}
    reset_claim_store()
    assert client.get("/healthz").status_code == 200
    own_redis.stop()
    response = client.get("/healthz")
    assert response.status_code == 503
    assert response.json() == {"status": "failed", "checks": {"database": "ok", "redis": "failed"}}
    own_redis.start()
    assert client.get("/healthz").status_code == 200


def test_without_redis_the_database_alone_is_healthy(client, settings):
    settings.MESSAGING = {**settings.MESSAGING, "REDIS_URL": None}
    reset_claim_store()
    response = client.get("/healthz")
    assert response.status_code == 200
    assert response.json()["checks"] == {"database": "ok", "redis": "not configured"}


def test_healthz_is_get_only(client):
    assert client.post("/healthz").status_code == 405
