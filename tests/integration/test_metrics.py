"""Metrics count every answered command where its outcome is known, and /metrics is access-controlled."""

from __future__ import annotations

import asyncio

import pytest
from prometheus_client import REGISTRY

from messaging.core.claims import claim_key

pytestmark = [pytest.mark.django_db(transaction=True)]


class Counts:
    """Deltas of the process's metrics since the test started (the registry is process-wide)."""

    NAMES = {
        "commands": "messaging_commands_total",
        "dups": "messaging_duplicates_suppressed_total",
        "acks": "messaging_ack_latency_seconds_count",
        "sockets": "messaging_open_sockets",
    }

    def __init__(self) -> None:
        self.start: dict[tuple, float] = {}

    def value(self, kind: str, **labels: str) -> float:
        return REGISTRY.get_sample_value(self.NAMES[kind], labels) or 0.0

    def mark(self, kind: str, **labels: str) -> None:
        self.start[(kind, *sorted(labels.items()))] = self.value(kind, **labels)

    def delta(self, kind: str, **labels: str) -> float:
        return self.value(kind, **labels) - self.start.get((kind, *sorted(labels.items())), 0.0)


@pytest.fixture
def counts():
    c = Counts()
    for type, outcome in [
        ("room.join", "ok"),
        ("room.post", "ok"),
        ("room.post", "dup"),
        ("room.post", "invalid"),
        ("room.post", "id_reused"),
        ("unknown", "unknown_type"),
        ("unknown", "invalid"),
        ("room.post", "in_progress"),
        ("test.broken", "unavailable"),
    ]:
        c.mark("commands", type=type, outcome=outcome)
    for source in ("redis", "database"):
        c.mark("dups", type="room.post", source=source)
    for type in ("room.post", "unknown"):
        c.mark("acks", type=type)
    c.mark("sockets")
    return c


async def test_outcomes_and_where_duplicates_were_answered(make_user, open_clients, redis_client, counts):
    client = await open_clients(await make_user())
    await client.join("lobby")
    post = {"room": "lobby", "body": "hi"}
    assert (await client.call("room.post", post, id="m1"))["dup"] is False
    assert (await client.call("room.post", post, id="m1"))["dup"] is True  # from Redis
    redis_client.flushdb()
    assert (await client.call("room.post", post, id="m1"))["dup"] is True  # from the database
    assert (await client.call("room.post", {"room": "lobby", "body": "other"}, id="m1"))["error"]["code"] == "id_reused"
    assert (await client.call("room.post", {"room": "lobby", "body": " "}))["error"]["code"] == "invalid"
    assert (await client.call("no.such.type", {}))["error"]["code"] == "unknown_type"
    assert (await client.call(7, {}))["error"]["code"] == "invalid"

    assert counts.delta("commands", type="room.join", outcome="ok") == 1
    assert counts.delta("commands", type="room.post", outcome="ok") == 1
    assert counts.delta("commands", type="room.post", outcome="dup") == 2
    assert counts.delta("dups", type="room.post", source="redis") == 1
    assert counts.delta("dups", type="room.post", source="database") == 1
    assert counts.delta("commands", type="room.post", outcome="id_reused") == 1
    assert counts.delta("commands", type="room.post", outcome="invalid") == 1
    # A type without a handler never becomes a label of its own.
    assert counts.delta("commands", type="unknown", outcome="unknown_type") == 1
    assert counts.delta("commands", type="unknown", outcome="invalid") == 1
    assert (
        REGISTRY.get_sample_value("messaging_commands_total", {"type": "no.such.type", "outcome": "unknown_type"})
        is None
    )
    assert counts.delta("acks", type="room.post") == 5
    assert counts.delta("acks", type="unknown") == 2


async def test_in_progress_and_unavailable_are_counted(
    make_user, open_clients, redis_client, settings, counts, broken_type
):
    # With the posts' statement after the claims (beside them, it would apply the post: messaging/core/pipeline.py).
    settings.MESSAGING = {**settings.MESSAGING, "IN_PROGRESS_WAIT": 0.0, "EARLY_STATEMENT": False}
    client = await open_clients(await make_user())
    await client.join("lobby")
    redis_client.set(claim_key(client.user.pk, "busy"), b"c:elsewhere", px=5000)
    assert (await client.call("room.post", {"room": "lobby", "body": "x"}, id="busy"))["error"]["code"] == "in_progress"
    assert (await client.call("test.broken", {}))["error"]["code"] == "unavailable"
    assert counts.delta("commands", type="room.post", outcome="in_progress") == 1
    assert counts.delta("commands", type="test.broken", outcome="unavailable") == 1


async def test_open_sockets_go_up_and_down(make_user, open_clients, counts):
    user = await make_user()
    a, b = await open_clients(user), await open_clients(user)
    assert counts.delta("sockets") == 2
    await a.close()
    await b.close()
    # The consumer's disconnect runs after the client's close returns.
    for _ in range(100):
        if counts.delta("sockets") == 0:
            break
        await asyncio.sleep(0.02)
    assert counts.delta("sockets") == 0


def test_metrics_are_off_without_a_token(client, settings):
    settings.MESSAGING = {**settings.MESSAGING, "METRICS_TOKEN": None}
    assert client.get("/metrics").status_code == 404


def test_metrics_need_the_bearer_token(client, settings):
    settings.MESSAGING = {**settings.MESSAGING, "METRICS_TOKEN": "s3cret"}
    for headers in [
        {},
        {"Authorization": "Bearer wrong"},
        {"Authorization": "Basic s3cret"},
        {"Authorization": "s3cret"},
    ]:
        response = client.get("/metrics", headers=headers)
        assert response.status_code == 401, headers
        assert b"messaging_" not in response.content
    response = client.get("/metrics", headers={"Authorization": "Bearer s3cret"})
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/plain")
    text = response.content.decode()
    for name in (
        "messaging_commands_total",
        "messaging_duplicates_suppressed_total",
        "messaging_ack_latency_seconds_bucket",
        "messaging_open_sockets",
    ):
        assert f"# TYPE {name.removesuffix('_total').removesuffix('_bucket')}" in text, name
