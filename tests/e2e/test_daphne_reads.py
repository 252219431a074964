"""Daphne's reads reach its WebSocket connections without Twisted's legacy log
context, and a read that fails still drops its connection alone and is logged.

A real daphne process serves tests/support/reads_app.py with `read_plainly()`
applied (messaging/transport/daphne_reads.py), or, for the comparison,
without it (`TWISTEDS_OWN_READS`).
"""

from __future__ import annotations

import asyncio

import pytest
import websockets

from tests.support.daphne_apps import daphnes_serving, raw_handshake, state, ws_url

pytestmark = pytest.mark.e2e

APP = "tests.support.reads_app:application"
SOCKETS, ROUNDS = 5, 10


@pytest.fixture
def daphne(tmp_path):
    yield from daphnes_serving(APP, tmp_path)


def echo_rounds(server) -> dict[str, int]:
    """SOCKETS sockets each echo ROUNDS frames; what the server counted meanwhile."""

    async def scenario():
        sockets = [
            await websockets.connect(ws_url(server, "/ws/echo"), ping_interval=None, compression=None)
            for _ in range(SOCKETS)
        ]
        before = await asyncio.to_thread(state, server)
        for n in range(ROUNDS):
            for s, ws in enumerate(sockets):
                await ws.send(f"{s} {n}")
                assert await ws.recv() == f"{s} {n}"
        after = await asyncio.to_thread(state, server)
        for ws in sockets:
            await ws.close()
        return {key: after[key] - before[key] for key in ("with_log_context", "reads")}

    return asyncio.run(scenario())


def test_reads_reach_the_sockets_without_the_log_context(daphne):
    seen = echo_rounds(daphne())
    assert seen["reads"] >= SOCKETS * ROUNDS
    # Every TCP connection is registered plainly, the state requests' too.
    assert seen["with_log_context"] == 0, seen


def test_twisteds_own_reads_go_through_the_log_context(daphne):
    # What the test above would see without the change: it can fail.
    seen = echo_rounds(daphne(env={"TWISTEDS_OWN_READS": "1"}))
    assert seen["with_log_context"] >= SOCKETS * ROUNDS, seen


@pytest.mark.parametrize("env", [{}, {"TWISTEDS_OWN_READS": "1"}], ids=["plainly", "twisteds_own"])
@pytest.mark.parametrize(
    "read, logged",
    [
        (b"RAISE and nothing after", "a read the protocol could not take"),
        # Past what the reactor's read catches itself.
        (b"RAISE AND LOSE the connection", "a loss the protocol could not take"),
    ],
    ids=["in_the_read", "escaping_the_read"],
)
def test_a_read_that_raises_drops_its_connection_alone_and_is_logged(daphne, env, read, logged):
    # The same either way. Daphne sends Twisted's log to its own from verbosity 2 (below, nowhere).
    server = daphne("-v", "2", env=env)

    async def scenario():
        neighbour = await websockets.connect(ws_url(server, "/ws/echo"), ping_interval=None, compression=None)
        broken = await asyncio.to_thread(raw_handshake, server, "/ws/echo")
        broken.sendall(read)
        # Twisted logs the failure and drops the connection: the client reads its end.
        closed = await asyncio.to_thread(read_to_end, broken)
        await neighbour.send("still here")
        answer = await neighbour.recv()
        await neighbour.close()
        return closed, answer

    closed, answer = asyncio.run(scenario())
    assert closed and answer == "still here"
    assert logged in server.log_path.read_text(errors="replace")


def read_to_end(conn) -> bool:
    """Whether the server closed `conn` (its reads end, or are reset) before the socket's timeout."""
    try:
        while conn.recv(4096):
            pass
        return True
    except ConnectionResetError:
        return True
    except TimeoutError:
        return False
    finally:
        conn.close()
