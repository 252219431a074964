"""Under real uvicorn processes, the uvicorn adapter (messaging/transport/servers/uvicorn.py) is the one
chosen, writes the bytes uvicorn's own ASGI path would write, and leaves a permessage-deflate connection
to websockets' framing.

The frames are compared with websockets' own serialisation of the same
payload (`Frame.serialize`, what uvicorn's `send` has its `ServerProtocol`
write), read off the wire by a bare TCP client, for each of the three forms
of a frame's length (RFC 6455 5.2) at their edges.
"""

from __future__ import annotations

import asyncio
import json
import uuid

import pytest
from websockets.exceptions import ConnectionClosed
from websockets.frames import Frame, Opcode

from messaging.conf import get_settings
from messaging.testing import SocketClient
from messaging_client import sign_in

from ..support.rawws import RawSocket
from ..support.waiting import wait_for
from .conftest import kernel_send_buffer, scrape
from .test_backpressure import UNLIMITED

pytestmark = [pytest.mark.e2e]

# Bodies long enough for frames past 64 KiB, and the frames to carry them in.
LARGE = {"MESSAGING_BODY_MAX_CHARS": "100000", "MESSAGING_MAX_FRAME_BYTES": "400000"}
PLAIN = ("--ws", "websockets-sansio", "--ws-per-message-deflate", "false")
LOOPS = ["asyncio", "uvloop"]


def what_uvicorn_writes(payload: bytes) -> bytes:
    """The bytes uvicorn's ASGI `send` writes for a text frame of `payload` on a connection with no extension."""
    return Frame(Opcode.TEXT, payload).serialize(mask=False, extensions=[])


def post(ws: RawSocket, body: str, id: str | None = None) -> dict[str, tuple[bytes, bytes]]:
    """Post `body`; the raw bytes and the payload of the post's ack and of its own `msg` frame as they came."""
    id = id or uuid.uuid4().hex
    ws.send_command("room.post", {"room": "sizes", "body": body}, id=id)
    found: dict[str, tuple[bytes, bytes]] = {}
    while len(found) < 2:
        opcode, raw, payload = ws.raw_frame()
        if opcode == 0x1:
            frame = json.loads(payload)
            if frame["t"] == "ack" and frame["id"] == id:
                assert frame["ok"], frame
                found["ack"] = raw, payload
            elif frame["t"] == "msg" and frame["d"]["id"] == id:
                found["msg"] = raw, payload
    return found


def adapters(server) -> dict[tuple[str, str], float]:
    return {
        (adapter, framing): scrape(server, "messaging_send_buffers_total", adapter=adapter, framing=framing)
        for adapter in ("uvicorn", "asgi")
        for framing in ("frames", "server", "asgi")
    }


@pytest.mark.parametrize("loop", LOOPS)
def test_the_uvicorn_writer_sends_the_bytes_uvicorn_would_for_each_length_form(uvicorn, loop):
    server = uvicorn((*PLAIN, "--loop", loop), **LARGE)
    ws = RawSocket(server.url, sign_in(server.url, "sizes")).connect()
    ws.send_command("room.join", {"room": "sizes"})
    # What a frame is longer than the command id (its ack) or the body (its
    # msg) it carries: the seq stays one digit, the times are of one width.
    # (Command ids are unique: each length of id once.)
    around_id = len(post(ws, "x", id="i")["ack"][1]) - 1
    around_body = len(post(ws, "x")["msg"][1]) - 1
    # Each edge of the three length forms: the 1- and 2-byte forms of a short frame by the ack's id, the
    # 2- and 8-byte forms of a long one by the msg's body; non-ASCII (2 bytes a character) across the last.
    sent = [
        post(ws, "x", id="i" * (125 - around_id))["ack"],
        post(ws, "x", id="i" * (126 - around_id))["ack"],
        post(ws, "x" * (65535 - around_body))["msg"],
        post(ws, "x" * (65536 - around_body))["msg"],
        post(ws, "é" * 35000)["msg"],
    ]
    assert [len(payload) for _, payload in sent] == [125, 126, 65535, 65536, around_body + 70000]
    for raw, payload in sent:
        assert raw == what_uvicorn_writes(payload)
    assert json.loads(sent[-1][1])["d"]["body"] == "é" * 35000
    ws.close()
    # Every one of these sockets went through the adapter's own frames, none through the ASGI send.
    counts = adapters(server)
    assert counts[("uvicorn", "frames")] >= 1
    assert sum(counts.values()) == counts[("uvicorn", "frames")]


async def test_with_permessage_deflate_negotiated_frames_go_through_websockets_framing_and_arrive_whole(uvicorn):
    # Uvicorn offers permessage-deflate by default; websockets' client accepts it, as a browser does.
    server = uvicorn(("--ws", "auto"), **LARGE)
    client = await SocketClient(server.url, sign_in(server.url, "deflater")).connect()
    assert [extension.name for extension in client.ws.protocol.extensions] == ["permessage-deflate"]
    await client.join("sizes")
    bodies = ["x", "é" * 60, "x" * 70000, "😀" * 20000]
    for body in bodies:
        ack = await client.call("room.post", {"room": "sizes", "body": body})
        assert ack["ok"]
        [frame] = await client.frames("msg", 1)
        assert frame["d"]["body"] == body and frame["d"]["seq"] == ack["d"]["seq"]
    await client.close()
    counts = adapters(server)
    assert counts[("uvicorn", "server")] >= 1
    assert sum(counts.values()) == counts[("uvicorn", "server")]


@pytest.mark.parametrize(
    "args, env",
    [(("--ws", "websockets", "--ws-per-message-deflate", "false"), {}), (PLAIN, {"MESSAGING_SERVER_ADAPTERS": "0"})],
    ids=["legacy", "adapters-off"],
)
def test_under_uvicorns_legacy_implementation_or_with_adapters_off_frames_go_through_the_asgi_send(uvicorn, args, env):
    server = uvicorn(args, **LARGE, **env)
    ws = RawSocket(server.url, sign_in(server.url, "legacy")).connect()
    ws.send_command("room.join", {"room": "sizes"})
    raw, payload = post(ws, "z" * 70000)["msg"]
    assert raw == what_uvicorn_writes(payload)
    ws.close()
    assert adapters(server)[("asgi", "asgi")] >= 1


CLOSE_LIMIT = 1000


def post_of(size: int) -> str:
    """A room.post frame of exactly `size` bytes."""
    frame = {"id": "sized", "t": "room.post", "d": {"room": "sizes", "body": ""}}
    frame["d"]["body"] = "x" * (size - len(json.dumps(frame)))
    return json.dumps(frame)


async def close_code(client: SocketClient) -> int | None:
    """Read until the server closes; its close code (None: no close frame arrived)."""
    with pytest.raises(ConnectionClosed) as closed:
        for _ in range(100):
            await asyncio.wait_for(client.ws.recv(), 10)
    return closed.value.rcvd.code if closed.value.rcvd else None


@pytest.mark.parametrize(
    "send, code",
    [
        # Past MAX_FRAME_BYTES, within uvicorn's --ws-max-size: the consumer's close.
        pytest.param(lambda ws: ws.send(post_of(CLOSE_LIMIT + 1)), 1009, id="over-MAX_FRAME_BYTES"),
        # Past --ws-max-size: websockets refuses it from its header and uvicorn closes.
        pytest.param(lambda ws: ws.send("x" * (4 * CLOSE_LIMIT)), 1009, id="over-ws-max-size"),
        pytest.param(lambda ws: ws.send(b"\x00\x01"), 1003, id="binary"),
        pytest.param(lambda ws: ws.send("{"), None, id="bad-frames-in-a-row"),
    ],
)
async def test_under_uvicorn_the_protocols_close_codes_reach_the_client(uvicorn, send, code):
    server = uvicorn((*PLAIN, "--ws-max-size", str(2 * CLOSE_LIMIT)), MESSAGING_MAX_FRAME_BYTES=str(CLOSE_LIMIT))
    client = await SocketClient(server.url, sign_in(server.url, "closer")).connect()
    await client.join("sizes")
    if code is None:  # BAD_FRAME_LIMIT frames that are no command close with 1008
        code = 1008
        for _ in range(get_settings().BAD_FRAME_LIMIT):
            await send(client.ws)
    else:
        await send(client.ws)
    assert await close_code(client) == code


async def test_under_uvicorn_frames_queued_while_a_client_does_not_read_go_before_its_close(uvicorn):
    """A hoarder that does not read while its room's frames pile up (in the kernel, the transport and the adapter's
    queue, within the limit), then is closed for bad frames, reads every frame, in order, before the close."""
    server = uvicorn(PLAIN, MESSAGING_MAX_SEND_BUFFER=str(64 * 1024 * 1024), **UNLIMITED)
    poster = await SocketClient(server.url, sign_in(server.url, "poster")).connect()
    await poster.join("piles")
    hoarder = RawSocket(server.url, sign_in(server.url, "hoarder"), receive_buffer=4096).connect()
    hoarder.send_command("room.join", {"room": "piles"})
    await wait_for(
        lambda: scrape(server, "messaging_commands_total", type="room.join", outcome="ok") == 2,
        30,
        "the hoarder joined",
    )
    # More than the kernel's buffers (4 MB at most) and the transport's hold: the rest waits in the adapter.
    posts = (2 * kernel_send_buffer() // (4000 * 50) + 1) * 50
    for _ in range(posts // 50):
        ids = [await poster.send("room.post", {"room": "piles", "body": "y" * 4000}) for _ in range(50)]
        for id in ids:
            assert (await poster.ack(id))["ok"]
    for _ in range(get_settings().BAD_FRAME_LIMIT):
        hoarder.send_text("{")
    frames, code = await asyncio.to_thread(hoarder.read_until_closed, 60)
    seqs = [frame["d"]["seq"] for frame in frames if frame["t"] == "msg"]
    assert seqs == list(range(1, len(seqs) + 1)) and len(seqs) == posts
    assert code == 1008
    assert not scrape(server, "messaging_send_buffer_overflows_total")
    await poster.close()
