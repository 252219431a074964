"""The WebSocket handshake after PostgreSQL ended the server's connections (a failover, a restart).

The handshake reads the session and the user on channels' database thread.
That thread's connection is persistent and, with health checks off, is only
found dead when a query fails on it: the handshake that meets it must still
sign the user in, not answer HTTP 500.
"""

from __future__ import annotations

import pytest
from asgiref.sync import sync_to_async

from messaging.testing import SocketClient
from messaging_client import sign_in

from .conftest import database_time, terminate_backends

pytestmark = [pytest.mark.e2e]


async def test_a_handshake_after_the_backends_were_terminated_signs_the_user_in(start_daphne):
    before_the_server = await sync_to_async(database_time)()
    server = start_daphne()
    session = await sync_to_async(sign_in)(server.url, "ana")
    # The handshake thread's connection now exists (sign-in and this handshake used it).
    first = await SocketClient(server.url, session).connect()
    assert (await first.call("room.join", {"room": "lobby"}))["ok"]
    await first.close()
    assert await sync_to_async(terminate_backends)(before_the_server) >= 1

    # Every handshake meets a connection that died: the first used to fail with 500.
    for _ in range(3):
        socket = await SocketClient(server.url, session).connect()
        joined = await socket.call("room.join", {"room": "lobby"})
        # The join's own thread may have met a dead connection too: that is
        # `unavailable`, retried as any client does; the sign-in must not fail.
        if not joined["ok"]:
            assert joined["error"]["code"] == "unavailable", joined
            joined = await socket.call("room.join", {"room": "lobby"})
        assert joined["ok"], joined
        assert [m["name"] for m in joined["d"]["members"]] == ["ana"]
        await socket.close()
    # What daphne logs for a handshake the application raised in (the 500).
    assert "Exception inside application" not in server.log()
