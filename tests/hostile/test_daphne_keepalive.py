"""Under a real daphne process of the demo project, every keepalive ping it sends is counted
(`messaging_keepalive_pings_total{server="daphne"}`), as uvicorn's wheel counts its own.

Daphne runs with a ping a second and three seconds for its pong.
"""

from __future__ import annotations

import pytest

from messaging_client import sign_in

from ..support.rawws import RawSocket
from .conftest import scrape
from .test_uvicorn_pings import answer_pings

pytestmark = [pytest.mark.e2e]

PINGS = ("--ping-interval", "1", "--ping-timeout", "3")


def test_every_ping_daphne_sends_is_counted_under_its_name(daphne):
    server = daphne(PINGS)
    sockets = [RawSocket(server.url, sign_in(server.url, f"counted{n}")).connect() for n in range(3)]
    try:
        pinged = answer_pings(sockets, 5)
        assert min(pinged) >= 2, pinged
    finally:
        for ws in sockets:
            ws.close()
    counted = scrape(server, "messaging_keepalive_pings_total", server="daphne")
    # Each socket may have been sent one more ping than it read before it closed.
    assert sum(pinged) <= counted <= sum(pinged) + len(sockets), (counted, pinged)
    assert scrape(server, "messaging_keepalive_pings_total", server="uvicorn") == 0
