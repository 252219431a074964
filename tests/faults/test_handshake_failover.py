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

# Each connection the server held may be met dead once by a command: one per
# database thread (the demo's `DB_THREADS` is 4) and per loop connection (at
# most `max(2, DB_THREADS)`).
DEAD_CONNECTIONS_AT_MOST = 8


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
        joined = await join_as_a_client_does(socket)
        assert joined["ok"], joined
        assert [m["name"] for m in joined["d"]["members"]] == ["ana"]
        await socket.close()
    # What daphne logs for a handshake the application raised in (the 500).
    assert "Exception inside application" not in server.log()


async def join_as_a_client_does(socket: SocketClient) -> dict:
    """`room.join`, retried while it is `unavailable` with `retry`, as a client does.

    The join runs on whichever database thread or loop connection is free, and
    each may meet its own dead connection once before it is replaced; the
    handshake, which this file is about, must not fail at all."""
    for _ in range(DEAD_CONNECTIONS_AT_MOST):
        joined = await socket.call("room.join", {"room": "lobby"})
        if joined["ok"]:
            return joined
        assert joined["error"]["code"] == "unavailable" and joined["error"]["retry"], joined
    return await socket.call("room.join", {"room": "lobby"})
