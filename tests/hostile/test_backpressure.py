"""Clients that do not read what the server sends, against a real daphne process (PROTOCOL.md 1.1, "Safety limits").

What a socket's own commands send (a join's backlog) goes as fast as its
client reads it; anything else (a room's live frames) queues, and a socket
with more than `MAX_SEND_BUFFER` waiting is closed with 1008, what waited
dropped. Either way the server's memory does not grow with what such
clients leave unread, and their rooms' other members hear every frame.
"""

from __future__ import annotations

import asyncio
import json

import pytest

from messaging.testing import SocketClient
from messaging_client import sign_in

from ..support.rawws import RawSocket
from ..support.waiting import wait_for
from .conftest import kernel_send_buffer, peak_rss_kib, reset_peak_rss, rss_kib, scrape, seed_room, until

pytestmark = [pytest.mark.e2e]

BACKLOG = 500
BODY_CHARS = 4000
# What a process may hold at its peak for a socket that never reads: one
# join's backlog in flight (500 rows, their frames and their text, about
# 6 MB of Python objects), the send buffer (at most 1 MiB) and the
# allocator's slack. Without the send buffer the peak was 200 MB higher.
RSS_BOUND_KIB = 24 * 1024


def read_backlog(ws: RawSocket, count: int) -> list[dict]:
    frames = []
    while sum(f["t"] == "msg" for f in frames) < count:
        opcode, payload = ws.frame()
        if opcode == 0x1:
            frames.append(json.loads(payload))
    return frames


def test_a_socket_that_never_reads_its_joins_costs_the_server_no_memory(daphne):
    """The issue's reproduction: 100 joins with `since: 0` of a room of 500 messages of 4,000 characters,
    on a socket with a 4 KB receive buffer that never reads."""
    # Pings find the socket that never reads (it never answers one) in seconds.
    server = daphne(("--ping-interval", "1", "--ping-timeout", "2"))
    session = sign_in(server.url, "hoarder")
    seed_room("big", BACKLOG, BODY_CHARS)
    # A client that reads joins first, so what a join needs (code, the
    # allocator's pools) is in place before the baseline; it gets all of a
    # backlog larger than the send buffer.
    reader = RawSocket(server.url, session).connect()
    reader.send_command("room.join", {"room": "big", "since": 0})
    assert len(read_backlog(reader, BACKLOG)) >= BACKLOG
    reader.close()
    until(lambda: scrape(server, "messaging_open_sockets") == 0, "the reader gone")
    pid = server.process.pid
    before = rss_kib(pid)
    reset_peak_rss(pid)

    hoarder = RawSocket(server.url, session, receive_buffer=4096).connect()
    for _ in range(100):
        hoarder.send_command("room.join", {"room": "big", "since": 0})
    until(lambda: scrape(server, "messaging_open_sockets") == 1, "the hoarder connected")
    until(lambda: scrape(server, "messaging_open_sockets") == 0, "the hoarder dropped for its missing pongs")
    peak, after = peak_rss_kib(pid), rss_kib(pid)
    print(
        f"daphne VmRSS {before} KiB before, peak {peak} KiB (+{peak - before}), after {after} KiB (+{after - before})"
    )
    assert peak - before < RSS_BOUND_KIB
    # Its first join waited for it to read; the other 99 never ran.
    # Its joins stopped being answered once what it left unread filled the
    # kernel's buffers (a socket's send buffer grows to tcp_wmem's largest,
    # 4 MB here): each backlog it holds is 2 MB, the join after them waits
    # for it to read, and the rest never run.
    kernel_backlogs = kernel_send_buffer() // (BACKLOG * BODY_CHARS) + 1
    joins = scrape(server, "messaging_commands_total", type="room.join", outcome="ok") - 1
    assert 1 <= joins <= kernel_backlogs + 1
    _, code = hoarder.read_until_closed()
    assert code is None, "dropped without a close frame it would have had to read"


UNLIMITED = {
    "MESSAGING_RATE_BURST": "100000",
    "MESSAGING_RATE_PER_SECOND": "100000",
    "MESSAGING_USER_RATE_LIMIT": "10000000",
}


async def a_member_that_never_reads_among_readers(server) -> int | None:
    """A poster, a reader (reading all along) and a hoarder in one room; the poster posts until the
    hoarder's send buffer overflows. Checks the reader heard everything and the server's memory;
    returns the hoarder's close code and the seqs of the msg frames it read before it."""
    poster_session, reader_session, hoarder_session = (
        sign_in(server.url, name) for name in ("poster", "reader", "hoarder")
    )
    poster = await SocketClient(server.url, poster_session).connect()
    reader = await SocketClient(server.url, reader_session).connect()
    for ws in (poster, reader):
        assert (await ws.call("room.join", {"room": "live"}))["ok"]
    hoarder = RawSocket(server.url, hoarder_session, receive_buffer=4096).connect()
    hoarder.send_command("room.join", {"room": "live"})
    await wait_for(
        lambda: scrape(server, "messaging_commands_total", type="room.join", outcome="ok") == 3,
        30,
        "the hoarder joined",
    )
    heard: set[int] = set()

    async def read() -> None:
        async for text in reader.ws:
            frame = json.loads(text)
            if frame["t"] == "msg":
                heard.add(frame["d"]["seq"])

    reading = asyncio.ensure_future(read())
    pid = server.process.pid
    before = rss_kib(pid)
    reset_peak_rss(pid)
    posted = 0
    while not scrape(server, "messaging_send_buffer_overflows_total"):
        # The kernel's buffers (4 MB) and MAX_SEND_BUFFER (1 MiB) fill long before.
        assert posted < 3000, "the hoarder was never closed"
        ids = [await poster.send("room.post", {"room": "live", "body": "y" * BODY_CHARS}) for _ in range(50)]
        for id in ids:
            assert (await poster.ack(id))["ok"]
        posted += len(ids)
    peak = peak_rss_kib(pid)
    print(
        f"closed after {posted} posts of {BODY_CHARS} characters; VmRSS {before} KiB before, "
        f"peak {peak} KiB (+{peak - before})"
    )
    assert peak - before < RSS_BOUND_KIB
    await wait_for(lambda: len(heard) == posted, 30, "the reader heard every message")
    assert heard == set(range(1, posted + 1))
    reading.cancel()
    assert scrape(server, "messaging_send_buffer_overflows_total") == 1
    assert scrape(server, "messaging_send_buffer_dropped_frames_total") >= 1
    frames, code = hoarder.read_until_closed()
    for ws in (poster, reader):
        await ws.close()
    return code, [frame["d"]["seq"] for frame in frames if frame["t"] == "msg"]


async def test_a_member_that_never_reads_its_rooms_frames_is_closed_and_the_others_hear_everything(daphne):
    code, _ = await a_member_that_never_reads_among_readers(daphne(**UNLIMITED))
    # The close frame is behind everything the kernel holds for the hoarder:
    # read in time it shows 1008, else autobahn has stopped waiting for the
    # close handshake (1 s) and dropped the connection.
    assert code in (1008, None)


@pytest.mark.parametrize(
    "implementation, loop, hoarders_buffer",
    [
        ("websockets-sansio", "asyncio", {"adapter": "uvicorn", "framing": "frames"}),
        ("websockets-sansio", "uvloop", {"adapter": "uvicorn", "framing": "frames"}),
        ("websockets", "asyncio", {"adapter": "asgi", "framing": "asgi"}),
    ],
)
async def test_under_uvicorn_a_member_that_never_reads_is_closed_with_1008_and_the_others_hear_everything(
    uvicorn, implementation, loop, hoarders_buffer
):
    """Under websockets' Sans-I/O implementation the uvicorn adapter writes to the transport and counts what waits
    in it (pause_writing, resume_writing); under the legacy one uvicorn's send waits while its transport pushes
    back, and the generic buffer counts what waits."""
    server = uvicorn(("--ws", implementation, "--loop", loop), **UNLIMITED)
    code, seqs = await a_member_that_never_reads_among_readers(server)
    # Uvicorn sends the close once the client has read what was before it.
    assert code == 1008
    # What reached the hoarder came in order, with no gap, and nothing after the overflow's drop came
    # before the close.
    assert seqs == list(range(1, len(seqs) + 1))
    # The hoarder's frames went the way named (the others', over permessage-deflate, may not).
    assert scrape(server, "messaging_send_buffers_total", **hoarders_buffer) >= 1
