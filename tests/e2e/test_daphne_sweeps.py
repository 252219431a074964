"""Daphne's sweeps visit only what is due, and every deadline they kept is still kept.

A real daphne process serves tests/support/sweep_app.py, with
`sweep_only_due_connections()` applied (messaging/transport/daphne_sweeps.py),
short timeouts and a one-second ping interval where a test needs them.
"""

from __future__ import annotations

import asyncio
import time

import pytest
import websockets

from tests.support.daphne_apps import daphnes_serving, raw_handshake, state, ws_url
from tests.support.servers import Daphne, wait_until

pytestmark = pytest.mark.e2e

APP = "tests.support.sweep_app:application"
TIMEOUTS = ("--application-close-timeout", "2", "--websocket_connect_timeout", "2")


@pytest.fixture
def daphne(tmp_path):
    yield from daphnes_serving(APP, tmp_path, *TIMEOUTS)


async def open_sockets(server: Daphne, count: int) -> list:
    return [
        await websockets.connect(ws_url(server, "/ws/echo"), ping_interval=None, compression=None) for _ in range(count)
    ]


def test_idle_sockets_are_not_visited_again_before_their_next_ping(daphne):
    server = daphne("--ping-interval", "30")

    async def scenario():
        sockets = await open_sockets(server, 40)
        # Past each handshake's own deadline (2 s), visited once for it.
        await asyncio.sleep(5)
        before = state(server)["ws_visits"]
        await asyncio.sleep(6)  # three of daphne's two-second passes
        after = state(server)["ws_visits"]
        for ws in sockets:
            await ws.send("still here")
            assert await ws.recv() == "still here"
            await ws.close()
        return after - before

    # Daphne's own pass calls check_timeouts on all 40 each time: 120.
    assert asyncio.run(scenario()) == 0


def test_a_client_that_never_answers_pings_is_pinged_then_dropped(daphne):
    server = daphne("--ping-interval", "1", "--ping-timeout", "3")
    conn = raw_handshake(server, "/ws/echo")
    received, started = b"", time.monotonic()
    try:
        while chunk := conn.recv(4096):
            received += chunk
    except ConnectionResetError:
        pass  # autobahn aborts the connection on a ping's timeout
    conn.close()
    # A ping frame from a server: FIN and opcode 9, unmasked.
    assert received.startswith(b"\x89"), received
    assert time.monotonic() - started < 12


def test_a_client_that_answers_pings_stays(daphne):
    server = daphne("--ping-interval", "1", "--ping-timeout", "3")

    async def scenario():
        # websockets answers every ping with its pong by itself.
        async with websockets.connect(ws_url(server, "/ws/echo"), ping_interval=None) as ws:
            await asyncio.sleep(8)
            await ws.send("after 8 s")
            return await ws.recv()

    assert asyncio.run(scenario()) == "after 8 s"


def test_a_connections_events_reach_its_application_through_the_lighter_queue_in_order(daphne):
    server = daphne()

    async def scenario():
        async with websockets.connect(ws_url(server, "/ws/echo"), ping_interval=None) as ws:
            await ws.send("queue?")
            kind = await ws.recv()
            # Many frames in one burst: several wait in the queue at once.
            await asyncio.gather(*(ws.send(str(n)) for n in range(500)))
            return kind, [await ws.recv() for _ in range(500)]

    kind, echoed = asyncio.run(scenario())
    assert kind == "ApplicationQueue"
    assert echoed == [str(n) for n in range(500)]


def test_a_handshake_never_accepted_is_refused_at_its_deadline(daphne):
    server = daphne()
    started = time.monotonic()

    async def scenario():
        # Daphne drops the connection without an answer.
        with pytest.raises(websockets.exceptions.InvalidHandshake):
            await websockets.connect(ws_url(server, "/ws/never-accept"), open_timeout=15)

    asyncio.run(scenario())
    assert time.monotonic() - started < 10
    wait_until(lambda: state(server)["connections"] <= 1, 10, "the refused handshake forgotten")


def test_an_application_that_fails_closes_its_socket_with_1011(daphne):
    server = daphne()

    async def scenario():
        async with websockets.connect(ws_url(server, "/ws/raise"), ping_interval=None) as ws:
            with pytest.raises(websockets.exceptions.ConnectionClosedError) as closed:
                await asyncio.wait_for(ws.recv(), 10)
            return closed.value.rcvd.code

    assert asyncio.run(scenario()) == 1011


def test_an_application_that_outlives_its_socket_is_cancelled_and_forgotten(daphne):
    server = daphne()

    async def scenario():
        ws = await websockets.connect(ws_url(server, "/ws/linger"), ping_interval=None)
        await ws.close()

    asyncio.run(scenario())
    wait_until(lambda: state(server)["cancelled"] == 1, 10, "the lingering application cancelled")
    wait_until(lambda: state(server)["connections"] <= 1, 10, "its connection forgotten")


def test_closed_sockets_leave_no_connection_behind(daphne):
    server = daphne()

    async def scenario():
        sockets = await open_sockets(server, 50)
        assert state(server)["connections"] >= 50
        for ws in sockets:
            await ws.close()

    asyncio.run(scenario())
    wait_until(lambda: state(server)["connections"] <= 1, 10, "50 closed sockets forgotten")
