"""The uvicorn adapter on uvicorn's own Sans-I/O protocol, in process: past a real handshake the
connection lets go of what the handshake left behind and still writes, reads and closes.
tests/hostile/test_uvicorn_adapter.py runs the adapter against real uvicorn processes."""

from __future__ import annotations

import asyncio
import sys
from types import SimpleNamespace

from uvicorn.config import Config
from uvicorn.protocols.websockets.websockets_sansio_impl import WebSocketsSansIOProtocol
from uvicorn.server import ServerState

from messaging.transport.frames import frame_bytes
from messaging.transport.servers import send_buffer
from messaging.transport.servers.queues import ApplicationQueue, Flag
from messaging.transport.servers.uvicorn import UvicornSendBuffer, lighten_queue, lighten_writable

from ..support.rawws import client_frame, upgrade_request


class Transport(asyncio.Transport):
    """An asyncio transport that keeps what is written."""

    def __init__(self) -> None:
        super().__init__()
        self.written = bytearray()
        self.closing = False

    def write(self, data: bytes) -> None:
        self.written += data

    def is_closing(self) -> bool:
        return self.closing

    def close(self) -> None:
        self.closing = True

    def get_extra_info(self, name, default=None):
        return {"peername": ("127.0.0.1", 50000), "sockname": ("127.0.0.1", 8000)}.get(name, default)

    def get_write_buffer_size(self) -> int:
        return 0

    def pause_reading(self) -> None: ...

    def resume_reading(self) -> None: ...


HANDSHAKE = upgrade_request("127.0.0.1", "http://127.0.0.1", "abc")


async def test_an_open_connection_lets_go_of_its_handshake_and_still_writes_reads_and_closes():
    received: asyncio.Queue = asyncio.Queue()
    opened: list[tuple[dict, UvicornSendBuffer]] = []

    async def app(scope, receive, send):
        assert (await receive())["type"] == "websocket.connect"
        await send({"type": "websocket.accept"})
        opened.append((scope, send_buffer(send, 1 << 20, lambda frames, waited: None)))
        while (message := await receive())["type"] != "websocket.disconnect":
            await received.put(message)
            await send({"type": "websocket.close", "code": 1008})

    config = Config(app=app, ws="websockets-sansio", ws_per_message_deflate=False, lifespan="off")
    config.load()
    protocol = WebSocketsSansIOProtocol(config, ServerState(), app_state={})
    transport = Transport()
    protocol.connection_made(transport)
    protocol.data_received(HANDSHAKE)
    while not opened:
        await asyncio.sleep(0.01)
    scope, buffer = opened[0]
    assert isinstance(buffer, UvicornSendBuffer)
    assert transport.written.startswith(b"HTTP/1.1 101 ")
    # Gone: the response, and the request's headers (websockets' parser still holds the request).
    assert protocol.response is None
    assert len(protocol.request.headers) == 0
    assert isinstance(protocol.queue, ApplicationQueue)
    assert isinstance(protocol.writable, Flag) and protocol.writable.is_set()
    # Its dict is no larger than a fresh copy of it (grown on the way, it was twice that).
    assert sys.getsizeof(protocol.__dict__) == sys.getsizeof(dict(protocol.__dict__))
    assert protocol.pause_writing == buffer.pause_writing and protocol.resume_writing == buffer.resume_writing
    # The application's scope keeps its own copy.
    assert (b"cookie", b"sessionid=abc") in [(name.lower(), value) for name, value in scope["headers"]]

    transport.written.clear()
    assert buffer.send("hi")
    assert bytes(transport.written) == frame_bytes(b"hi")
    protocol.data_received(client_frame(0x1, b"yo"))
    assert await asyncio.wait_for(received.get(), 5) == {"type": "websocket.receive", "text": "yo"}
    close = b"\x88\x02" + (1008).to_bytes(2, "big")
    while not bytes(transport.written).endswith(close):
        await asyncio.sleep(0.01)
    protocol.data_received(client_frame(0x8, (1008).to_bytes(2, "big")))  # the client's reply
    while not transport.closing:
        await asyncio.sleep(0.01)
    protocol.connection_lost(None)
    while protocol.tasks:
        await asyncio.sleep(0.01)


async def test_what_waits_in_uvicorns_queue_is_kept_in_order_by_the_lighter_one():
    protocol = SimpleNamespace(queue=asyncio.Queue())
    for n in range(3):
        protocol.queue.put_nowait({"type": "websocket.receive", "text": str(n)})
    lighten_queue(protocol)
    assert isinstance(protocol.queue, ApplicationQueue)
    assert [protocol.queue.get_nowait()["text"] for _ in range(3)] == ["0", "1", "2"]


async def test_a_queue_a_receive_waits_on_is_left_as_it_is():
    queue: asyncio.Queue = asyncio.Queue()
    protocol = SimpleNamespace(queue=queue)
    waiting = asyncio.ensure_future(queue.get())
    await asyncio.sleep(0)
    lighten_queue(protocol)
    assert protocol.queue is queue
    queue.put_nowait({"type": "websocket.disconnect"})
    assert (await waiting)["type"] == "websocket.disconnect"


async def test_a_writable_event_is_replaced_only_while_set():
    waited = asyncio.Event()
    protocol = SimpleNamespace(writable=waited)
    lighten_writable(protocol)
    assert protocol.writable is waited  # clear: a send may be waiting on it
    waited.set()
    lighten_writable(protocol)
    assert isinstance(protocol.writable, Flag) and protocol.writable.is_set()
