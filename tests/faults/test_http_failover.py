"""HTTP requests after PostgreSQL ended the server's connections (a failover, a restart).

Django's request threads keep their connections between requests
(`CONN_MAX_AGE`), and with health checks off (the demo's default) a
connection is only found dead when a query fails on it. The WebSocket
handshake reads again on a fresh connection (test_handshake_failover.py);
the sign-in form, a plain Django view, must not answer HTTP 500 either, on
either server.
"""

from __future__ import annotations

import pytest
from asgiref.sync import sync_to_async

from messaging_client import sign_in

from .conftest import database_time, terminate_backends

pytestmark = [pytest.mark.e2e]


@pytest.mark.parametrize("server", ["daphne", "uvicorn"])
async def test_the_sign_in_form_after_the_backends_were_terminated_signs_the_user_in(
    server, start_daphne, start_uvicorn
):
    before_the_server = await sync_to_async(database_time)()
    started = (start_daphne if server == "daphne" else start_uvicorn)()
    # The request thread's connection now exists.
    await sync_to_async(sign_in)(started.url, "ana")
    assert await sync_to_async(terminate_backends)(before_the_server) >= 1

    # The server's connections are all dead now: no sign-in may answer 500 (Django logs each one it does).
    for n in range(3):
        assert await sync_to_async(sign_in)(started.url, f"bea{n}")
    assert "Internal Server Error" not in started.log()
