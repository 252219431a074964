"""Daphne's pings go to the socket at once, their pongs are read at once and
waited for on the sweeps' wheel, and pings and their timeouts work as they did.

A real daphne process serves tests/support/pings_app.py, with
`sweep_only_due_connections()` and `ping_plainly()` applied
(messaging/transport/daphne_sweeps.py, daphne_pings.py), a ping every second
and three seconds for its pong.
"""

from __future__ import annotations

import asyncio
import os
import socket
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
import websockets

from messaging.transport.daphne_sweeps import SLOT_SECONDS
from tests.support.daphne_apps import daphnes_serving, raw_handshake, state, ws_url

pytestmark = pytest.mark.e2e

APP = "tests.support.pings_app:application"
PING_TIMEOUT = 3
PINGS = ("--ping-interval", "1", "--ping-timeout", str(PING_TIMEOUT))
# Time for a loaded box: a pass of the sweeps late, a drop's reset on its way.
SLACK = 3.0


@pytest.fixture
def daphne(tmp_path):
    yield from daphnes_serving(APP, tmp_path, *PINGS)


def test_idle_sockets_are_pinged_and_answered_without_the_reactor_or_the_frame_parser(daphne):
    server = daphne()

    async def scenario():
        # websockets answers every ping with its pong by itself.
        sockets = [
            await websockets.connect(ws_url(server, "/ws/echo"), ping_interval=None, compression=None)
            for _ in range(20)
        ]
        before = await asyncio.to_thread(state, server)
        # Past the ping timeout twice over: a pong not taken would have dropped them.
        await asyncio.sleep(7)
        after = await asyncio.to_thread(state, server)
        for n, ws in enumerate(sockets):
            await ws.send(f"still here {n}")
            assert await ws.recv() == f"still here {n}"
            await ws.close()
        return {key: after[key] - before[key] for key in ("pings", "add_writer", "parsed", "pong_timers")}

    seen = asyncio.run(scenario())
    assert seen["pings"] >= 60  # 20 sockets, about three passes of daphne's ping check each
    # Twisted's own write registers each ping's frame with the reactor: 63 for
    # 60 pings, 3 of them the first state request's response and close.
    assert seen["add_writer"] <= 3
    # Autobahn's parser reads each pong (twice: the frame, then the empty buffer).
    assert seen["parsed"] == 0
    # Autobahn arms a txaio timer for each ping's pong, one a ping.
    assert seen["pong_timers"] == 0


def read_ping(conn: socket.socket) -> bytes:
    """The payload of the next frame from the server, which must be a ping."""
    header = conn.recv(2, socket.MSG_WAITALL)
    assert header[:1] == b"\x89", header
    return conn.recv(header[1], socket.MSG_WAITALL) if header[1] else b""


def pong(payload: bytes) -> bytes:
    """A client's pong frame: FIN and opcode 10, masked with a random key."""
    key = os.urandom(4)
    return bytes([0x8A, 0x80 | len(payload)]) + key + bytes(b ^ key[i % 4] for i, b in enumerate(payload))


def split(frame: bytes, at: int) -> list[bytes]:
    return [frame[:at], frame[at:]]


def answer_pings(conn: socket.socket, seconds: float, answer) -> None:
    """Answer each ping of `seconds` with `answer(payload)` (bytes, or a list of bytes sent one by one)."""
    conn.settimeout(5)
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        answered = answer(read_ping(conn))
        for part in answered if isinstance(answered, list) else [answered]:
            conn.sendall(part)
            time.sleep(0.05)


def still_open(conn: socket.socket) -> bool:
    """Whether the server kept the connection: it answers a text frame with its echo."""
    key = os.urandom(4)
    text = b"still here"
    conn.sendall(bytes([0x81, 0x80 | len(text)]) + key + bytes(b ^ key[i % 4] for i, b in enumerate(text)))
    try:
        while True:
            header = conn.recv(2, socket.MSG_WAITALL)
            if len(header) < 2:
                return False
            payload = conn.recv(header[1], socket.MSG_WAITALL) if header[1] else b""
            if header[0] == 0x81:
                return payload == text
    except OSError:
        return False


@pytest.mark.parametrize(
    "answer",
    [
        pytest.param(pong, id="the pong in one read"),
        pytest.param(lambda payload: split(pong(payload), 5), id="the pong split over two reads"),
    ],
)
def test_a_client_that_answers_its_pings_stays(daphne, answer):
    server = daphne()
    conn = raw_handshake(server, "/ws/echo")
    try:
        answer_pings(conn, 7, answer)
        assert still_open(conn)
    finally:
        conn.close()


def dropped_after_first_ping(conn: socket.socket) -> float:
    """Seconds from the first ping the server sends to its dropping the connection, reading all it sends
    (and failing if that takes twice the ping timeout and the sweeps' resolution)."""
    conn.settimeout(5)
    read_ping(conn)
    pinged = time.monotonic()
    try:
        while conn.recv(4096):
            assert time.monotonic() - pinged < 2 * (PING_TIMEOUT + SLOT_SECONDS), "pinged on, never dropped"
    except ConnectionResetError:
        pass  # autobahn aborts the connection on a ping's timeout
    return time.monotonic() - pinged


def test_a_client_that_never_answers_is_dropped_by_the_sweeps_within_two_seconds_of_its_ping_timeout(daphne):
    server = daphne()
    before = state(server)
    conn = raw_handshake(server, "/ws/echo")
    try:
        dropped = dropped_after_first_ping(conn)
    finally:
        conn.close()
    after = state(server)
    # Later pings do not push the first one's deadline back: dropped at the
    # first pass of the sweeps after it, never before it (autobahn's timer,
    # its deadline rounded down to the second, fires as much as one early).
    assert PING_TIMEOUT - 0.1 <= dropped <= PING_TIMEOUT + SLOT_SECONDS + SLACK
    assert after["pong_timeouts"] - before["pong_timeouts"] == 1
    # The deadline was the wheel's: autobahn arms a timer a ping.
    assert after["pong_timers"] - before["pong_timers"] == 0


def test_a_client_that_answers_its_pings_with_data_not_pongs_stays(daphne):
    # Autobahn takes any data frame for an answer (`autoPingRestartOnAnyTraffic`,
    # on in daphne's factory). A frame after each ping, not a steady stream:
    # daphne waits `--ping-interval` from a socket's last message to ping it.
    server = daphne()
    before = state(server)
    conn = raw_handshake(server, "/ws/echo")
    conn.settimeout(5)
    pings, deadline = 0, time.monotonic() + 2 * PING_TIMEOUT + SLOT_SECONDS
    try:
        while time.monotonic() < deadline:
            read_ping(conn)
            pings += 1
            assert still_open(conn)  # a text frame for an answer, and its echo
    finally:
        conn.close()
    after = state(server)
    assert pings >= 2
    assert after["pong_timeouts"] - before["pong_timeouts"] == 0
    assert after["pong_timers"] - before["pong_timers"] == 0


def test_under_daphnes_own_sweeps_autobahn_times_the_pongs(daphne):
    # Daphne's own timeout pass knows nothing of a deadline the wheel would keep:
    # a ping's pong is autobahn's to wait for, with its timer, as before.
    server = daphne(env={"DAPHNES_OWN_SWEEPS": "1"})
    before = state(server)
    answering, silent = raw_handshake(server, "/ws/echo"), raw_handshake(server, "/ws/echo")
    try:
        with ThreadPoolExecutor(1) as pool:
            drop = pool.submit(dropped_after_first_ping, silent)
            answer_pings(answering, PING_TIMEOUT + SLOT_SECONDS + SLACK + 1, pong)
            dropped = drop.result()
        assert still_open(answering)
    finally:
        answering.close()
        silent.close()
    after = state(server)
    assert dropped <= PING_TIMEOUT + SLOT_SECONDS + SLACK
    # Each ping's timer, left running when the next is armed, fires: a drop, then drops skipped.
    assert after["pong_timeouts"] - before["pong_timeouts"] >= 1
    assert after["pong_timers"] - before["pong_timers"] >= 2


def test_a_pong_with_another_payload_does_not_answer_the_ping(daphne):
    server = daphne()
    conn = raw_handshake(server, "/ws/echo")
    started = time.monotonic()
    try:
        with pytest.raises((ConnectionResetError, AssertionError, TimeoutError)):
            answer_pings(conn, 12, lambda payload: pong(bytes(len(payload))))
    finally:
        conn.close()
    assert time.monotonic() - started < 12


def test_a_ping_waits_behind_frames_a_slow_client_has_not_taken(daphne):
    server = daphne()
    count, size = 2000, 8192

    async def scenario():
        async with websockets.connect(
            ws_url(server, "/ws/burst"), ping_interval=None, compression=None, max_size=None, max_queue=None
        ) as ws:
            await ws.send(f"{count} {size}")
            # Not read for a while: 16 MB fill the kernel's buffers, the rest
            # waits in Twisted's, and the pings of these seconds behind it.
            ws.transport.pause_reading()
            await asyncio.sleep(2.5)
            ws.transport.resume_reading()
            frames = [await asyncio.wait_for(ws.recv(), 30) for _ in range(count)]
            # The pings were answered (or the socket would be gone by now): it still echoes.
            await asyncio.sleep(4)
            await ws.send("1 16")
            return frames, await asyncio.wait_for(ws.recv(), 10)

    frames, after = asyncio.run(scenario())
    assert [frame[:8] for frame in frames] == [f"{n:08d}" for n in range(count)]
    assert {len(frame) for frame in frames} == {size}
    assert after == "00000000xxxxxxxx"
