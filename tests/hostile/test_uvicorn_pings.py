"""Under real uvicorn processes, keepalive pings come from the process's ping wheel
(messaging/transport/servers/uvicorn_pings.py): a client that answers them stays, one that
does not is dropped once uvicorn's pong timeout has passed, as before.

Uvicorn runs with a ping a second and three seconds for its pong.
"""

from __future__ import annotations

import time

import pytest

from messaging_client import sign_in

from ..support.rawws import RawSocket, client_frame
from .conftest import scrape
from .test_uvicorn_adapter import LOOPS, PLAIN

pytestmark = [pytest.mark.e2e]

PING_TIMEOUT = 3
PINGS = ("--ws-ping-interval", "1", "--ws-ping-timeout", str(PING_TIMEOUT))


def answer_pings(sockets: list[RawSocket], seconds: float) -> list[int]:
    """Answer every ping each socket gets for `seconds`; how many each got."""
    pinged = [0] * len(sockets)
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        for n, ws in enumerate(sockets):
            try:
                opcode, payload = ws.frame(timeout=0.1)
            except TimeoutError:
                continue
            if opcode == 0x9:
                pinged[n] += 1
                ws.sock.sendall(client_frame(0xA, payload))
    return pinged


@pytest.mark.parametrize("loop", LOOPS)
def test_sockets_that_answer_their_pings_are_pinged_from_the_wheel_and_stay(uvicorn, loop):
    server = uvicorn((*PLAIN, *PINGS, "--loop", loop))
    sockets = [RawSocket(server.url, sign_in(server.url, f"pinged{n}")).connect() for n in range(4)]
    try:
        # Past the pong timeout twice over: a pong not taken would have dropped them.
        pinged = answer_pings(sockets, 2 * PING_TIMEOUT + 1)
        assert min(pinged) >= 3, pinged
        for ws in sockets:
            ask(ws)
    finally:
        for ws in sockets:
            ws.close()
    # Every ping is the wheel's, each connection's first (armed by its handshake) included.
    assert scrape(server, "messaging_keepalive_pings_total", server="uvicorn") >= sum(pinged)


@pytest.mark.parametrize("loop", LOOPS)
def test_the_first_ping_of_a_fresh_servers_first_socket_is_the_wheels(uvicorn, loop):
    # The wheel is in place from the ASGI module's import, before any handshake arms a ping.
    server = uvicorn((*PLAIN, *PINGS, "--loop", loop))
    ws = RawSocket(server.url, sign_in(server.url, "first")).connect()
    try:
        while ws.frame()[0] != 0x9:
            pass
        # Unanswered, that ping is the only one: the next is scheduled by its pong.
        assert scrape(server, "messaging_keepalive_pings_total", server="uvicorn") == 1
    finally:
        ws.close()


def ask(ws: RawSocket) -> None:
    """A command's ack, the pings before it answered: the socket is open and served."""
    id = ws.send_command("rooms.list", {})
    while True:
        opcode, payload = ws.frame()
        if opcode == 0x9:
            ws.sock.sendall(client_frame(0xA, payload))
        elif opcode == 0x1 and id.encode() in payload:
            return


@pytest.mark.parametrize("loop", LOOPS)
def test_a_socket_that_never_answers_is_dropped_after_its_pong_timeout(uvicorn, loop):
    server = uvicorn((*PLAIN, *PINGS, "--loop", loop))
    silent = RawSocket(server.url, sign_in(server.url, "silent")).connect()
    try:
        while silent.frame()[0] != 0x9:
            pass
        pinged = time.monotonic()
        _, code = silent.read_until_closed(timeout=4 * PING_TIMEOUT)
        dropped = time.monotonic() - pinged
    finally:
        silent.close()
    assert code == 1011, code
    # Never before the timeout (the pong's deadline is uvicorn's own timer), and not long after.
    assert PING_TIMEOUT - 0.1 <= dropped <= 3 * PING_TIMEOUT, dropped
    # The silent socket's ping was the wheel's.
    assert scrape(server, "messaging_keepalive_pings_total", server="uvicorn") == 1
    # The server serves on.
    again = RawSocket(server.url, sign_in(server.url, "answering")).connect()
    try:
        ask(again)
    finally:
        again.close()
