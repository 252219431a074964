"""Two real daphne processes share PROMETHEUS_MULTIPROC_DIR: one scrape of either shows both."""

from __future__ import annotations

import pytest
from prometheus_client.parser import text_string_to_metric_families

from messaging.testing import SocketClient
from messaging_client import sign_in

from ..support.servers import Daphne

pytestmark = [pytest.mark.django_db(transaction=True)]

TOKEN = "scrape-token"


@pytest.fixture
def servers(start_daphne, tmp_path):
    metrics_dir = tmp_path / "prometheus"
    metrics_dir.mkdir()
    return lambda: start_daphne(PROMETHEUS_MULTIPROC_DIR=str(metrics_dir), METRICS_TOKEN=TOKEN)


def scrape(server: Daphne) -> dict[tuple, float]:
    status, _, body = server.request("GET", "/metrics", headers={"Authorization": f"Bearer {TOKEN}"})
    assert status == 200, body
    return {
        (sample.name, *sorted(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(body.decode())
        for sample in family.samples
    }


async def test_one_scrape_adds_up_every_process_and_forgets_killed_sockets(servers):
    a, b = servers(), servers()
    session = sign_in(a.url, "ana")  # the session lives in the shared database: b knows it too
    on_a, on_b = await SocketClient(a.url, session).connect(), await SocketClient(b.url, session).connect()
    try:
        for ws in (on_a, on_b):
            assert (await ws.call("room.join", {"room": "lobby"}))["ok"]
        first = await on_a.call("room.post", {"room": "lobby", "body": "from a"}, id="mp-1")
        second = await on_b.call("room.post", {"room": "lobby", "body": "from b"}, id="mp-2")
        again = await on_b.call("room.post", {"room": "lobby", "body": "from a"}, id="mp-1")
        assert first["dup"] is False and second["dup"] is False and again["dup"] is True
        assert again["d"] == first["d"]

        for server in (a, b):
            seen = scrape(server)
            assert seen[("messaging_commands_total", ("outcome", "ok"), ("type", "room.post"))] == 2
            assert seen[("messaging_commands_total", ("outcome", "dup"), ("type", "room.post"))] == 1
            assert seen[("messaging_duplicates_suppressed_total", ("source", "redis"), ("type", "room.post"))] == 1
            assert seen[("messaging_ack_latency_seconds_count", ("type", "room.join"))] == 2
            assert seen[("messaging_open_sockets",)] == 2

        # b dies without closing its socket: its commands stay counted, its socket does not.
        b.kill()
        seen = scrape(a)
        assert seen[("messaging_commands_total", ("outcome", "ok"), ("type", "room.post"))] == 2
        assert seen[("messaging_open_sockets",)] == 1
    finally:
        await on_a.close()
