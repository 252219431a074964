"""A socket's send buffer (messaging/transport/servers/): frames in order, queued while the
connection pushes back, and a limit past which what waits is dropped.

Under daphne the buffer is the connection's push producer; here Twisted's
calls (`pauseProducing`, `resumeProducing`, `stopProducing`) are made as a
transport makes them. tests/hostile runs the same against real daphne and
uvicorn processes and clients that do not read.
"""

from __future__ import annotations

import asyncio
import gc
import sys
import weakref

import pytest
from daphne.server import Server
from daphne.ws_protocol import WebSocketFactory, WebSocketProtocol
from prometheus_client import REGISTRY
from twisted.internet.address import IPv4Address
from twisted.internet.testing import StringTransport
from twisted.web.http import HTTPChannel

from messaging.transport.daphne_compat import allow_protocol_close_codes
from messaging.transport.frames import frame_bytes
from messaging.transport.servers.asgi import TRANSPORT_BUFFER, SendBuffer
from messaging.transport.servers.daphne import DaphneSendBuffer, register_producer
from messaging.transport.servers.daphne_idle import HANDSHAKE_ATTRIBUTES, release_handshake, shared_class
from messaging.transport.servers.queues import SendQueue

from ..support.rawws import client_frame, upgrade_request
from .test_frames import open_connection


def dropped() -> float:
    return REGISTRY.get_sample_value("messaging_send_buffer_dropped_frames_total") or 0.0


def frames(*texts: str) -> bytes:
    return b"".join(frame_bytes(text.encode()) for text in texts)


class Overflows(list):
    def __call__(self, frames: int, waited: int) -> None:
        self.append((frames, waited))


def daphne_buffer(limit: int = 1 << 20, **options) -> tuple[DaphneSendBuffer, object, StringTransport, Overflows]:
    _, protocol, transport = open_connection(**options)
    overflows = Overflows()
    buffer = DaphneSendBuffer(protocol, None, None, limit, overflows)
    buffer.slot = register_producer(buffer, transport)
    assert buffer.slot is transport
    return buffer, protocol, transport, overflows


def test_frames_go_to_the_transport_until_it_pushes_back_then_queue_and_follow_in_order():
    buffer, _, transport, _ = daphne_buffer()
    assert buffer.send("a") and transport.value() == frames("a")
    transport.producer.pauseProducing()
    assert buffer.send("b") and buffer.send("cc")
    assert transport.value() == frames("a")
    assert buffer.pushed_back and buffer.waiting == TRANSPORT_BUFFER + 3
    transport.producer.resumeProducing()
    assert transport.value() == frames("a", "b", "cc")
    assert not buffer.pushed_back and buffer.waiting == 0
    assert buffer.send("d") and transport.value() == frames("a", "b", "cc", "d")


def test_more_than_the_limit_waiting_overflows_once_and_drops_what_waits_and_what_follows():
    buffer, _, transport, overflows = daphne_buffer(limit=TRANSPORT_BUFFER + 10)
    transport.producer.pauseProducing()
    before = dropped()
    buffer.send("12345")
    assert overflows == []
    buffer.send("123456")
    assert overflows == [(2, TRANSPORT_BUFFER + 11)]
    assert buffer.waiting == TRANSPORT_BUFFER and not buffer.queue
    buffer.send("later")
    assert dropped() - before == 3
    transport.producer.resumeProducing()
    assert transport.value() == b"" and overflows == [(2, TRANSPORT_BUFFER + 11)]


def test_exactly_the_limit_waiting_does_not_overflow():
    buffer, _, transport, overflows = daphne_buffer(limit=TRANSPORT_BUFFER + 10)
    transport.producer.pauseProducing()
    buffer.send("1234567890")
    assert buffer.waiting == buffer.limit and overflows == []


async def test_a_close_writes_what_waits_before_the_close_frame_and_happens_once():
    buffer, protocol, transport, _ = daphne_buffer()
    closes = []

    async def closer():
        closes.append(1)
        protocol.handle_reply({"type": "websocket.close", "code": 1000})

    transport.producer.pauseProducing()
    buffer.send("a")
    buffer.send("b")
    await buffer.close(closer)
    await buffer.close(closer)
    assert closes == [1]
    written = transport.value()
    assert written.startswith(frames("a", "b")) and written[len(frames("a", "b"))] == 0x88
    buffer.send("after the close")
    assert transport.value() == written


def test_a_lost_connection_drops_what_waits_and_lets_go_of_the_transport():
    buffer, _, transport, _ = daphne_buffer()
    transport.producer.pauseProducing()
    buffer.send("a")
    transport.producer.stopProducing()
    assert buffer.stopped and not buffer.queue and transport.producer is None
    buffer.resumeProducing()
    assert transport.value() == b""


@pytest.mark.parametrize("state", ["STATE_CLOSING", "STATE_CLOSED"])
def test_a_frame_for_a_closing_or_closed_connection_is_dropped(state):
    """The client closed (its disconnect is on its way) or this socket did:
    autobahn would raise, and a room's fan-out would log every such frame."""
    buffer, protocol, transport, _ = daphne_buffer()
    protocol.state = getattr(protocol, state)
    assert buffer.send("hello")
    assert transport.value() == b""


def test_a_connection_that_frames_otherwise_is_written_by_autobahn_as_daphne_would():
    buffer, _, transport, _ = daphne_buffer(autoFragmentSize=10)
    assert buffer.writer is None
    buffer.send("a" * 25)
    _, reference, reference_transport = open_connection(autoFragmentSize=10)
    reference.handle_reply({"type": "websocket.send", "text": "a" * 25})
    assert transport.value() == reference_transport.value() != frames("a" * 25)


@pytest.mark.parametrize("options", [{}, {"autoFragmentSize": 4}], ids=["frames", "autobahn"])
def test_a_frame_over_the_servers_message_size_is_sent_and_one_over_the_limit_is_refused(options):
    # Daphne's --websocket-max-message-size limits what clients send; what the
    # server sends is limited by MAX_SEND_BUFFER alone, written by autobahn or not.
    buffer, protocol, transport, _ = daphne_buffer(limit=20, maxMessagePayloadSize=10, **options)
    assert buffer.largest == 20
    assert buffer.send("a" * 10) and buffer.send("é" * 6), "12 bytes of payload, over 10"
    _, reference, reference_transport = open_connection(maxMessagePayloadSize=0, **options)
    for text in ("a" * 10, "é" * 6):
        reference.handle_reply({"type": "websocket.send", "text": text})
    assert transport.value() == reference_transport.value()
    assert protocol.maxMessagePayloadSize == 10, "still the limit on what the client sends"
    assert not buffer.fits("a" * 21) and not buffer.send("a" * 21)


def upgraded_channel() -> tuple[HTTPChannel, StringTransport]:
    """Daphne's HTTP channel past an upgrade: still its transport's producer, the connection handed on."""
    transport = StringTransport()
    channel = HTTPChannel()
    channel.timeOut = None
    channel.makeConnection(transport)
    assert transport.producer is channel
    transport.protocol = object()  # the WebSocket protocol, as daphne's upgrade sets it
    return channel, transport


def test_the_buffer_takes_the_transport_from_daphnes_spent_http_channel_which_then_goes():
    """Daphne's HTTP channel registered itself on the TCP transport before the
    upgrade and stays registered, holding the upgrade's request: the buffer
    takes its place, hears the transport's pushback itself, and the channel
    is no longer held."""
    _, protocol, _ = open_connection()
    channel, transport = upgraded_channel()
    held = weakref.ref(channel)
    buffer = DaphneSendBuffer(protocol, None, None, 1 << 20, Overflows())
    buffer.slot = register_producer(buffer, transport)
    assert buffer.slot is transport and transport.producer is buffer
    del channel
    gc.collect()
    assert held() is None
    transport.producer.pauseProducing()
    assert buffer.paused
    transport.producer.resumeProducing()
    assert not buffer.paused
    buffer.stop()
    assert transport.producer is None


def test_a_channel_still_serving_its_connection_or_lending_its_slot_keeps_it():
    _, protocol, _ = open_connection()
    channel, transport = upgraded_channel()
    transport.protocol = channel
    assert register_producer(DaphneSendBuffer(protocol, None, None, 1 << 20, Overflows()), transport) is None
    assert transport.producer is channel
    transport.protocol = object()
    channel.registerProducer(PullsNothing(), True)
    assert register_producer(DaphneSendBuffer(protocol, None, None, 1 << 20, Overflows()), transport) is None
    assert transport.producer is channel


class PullsNothing:
    def pauseProducing(self) -> None: ...
    def resumeProducing(self) -> None: ...
    def stopProducing(self) -> None: ...


def shaken_hands(**options) -> tuple[Server, object, StringTransport]:
    """A daphne WebSocket connection through a real handshake and accept, on a transport that keeps what is written.

    `options`: autobahn's protocol options of its factory, besides no handshake timeout and no pings."""
    server = Server(
        application=lambda scope, receive, send: asyncio.sleep(0), endpoints=["tcp:port=0:interface=127.0.0.1"]
    )
    server.connections = {}
    factory = WebSocketFactory(server, server="Daphne")
    factory.setProtocolOptions(**{"openHandshakeTimeout": 0, "autoPingInterval": 0, **options})
    protocol = factory.buildProtocol(IPv4Address("TCP", "127.0.0.1", 50000))
    transport = StringTransport()
    protocol.makeConnection(transport)
    protocol._raw_query_string = b""
    protocol.dataReceived(upgrade_request("127.0.0.1", "http://127.0.0.1", "abc"))
    return server, protocol, transport


async def test_a_connection_lets_go_of_its_handshake_and_still_sends_receives_and_closes():
    allow_protocol_close_codes()
    server, protocol, transport = shaken_hands()
    await server.handle_reply(protocol, {"type": "websocket.accept"})
    assert transport.value().startswith(b"HTTP/1.1 101 ")
    assert protocol.state == protocol.STATE_OPEN and len(protocol.__dict__) > 85
    full = sys.getsizeof(protocol.__dict__)
    release_handshake(protocol)
    assert not any(hasattr(protocol, name) for name in HANDSHAKE_ATTRIBUTES if name not in type(protocol).__dict__)
    assert not hasattr(protocol, "application_deferred") and not hasattr(protocol, "is_open")
    assert not protocol.is_closed.called, "the Deferred the close fires stays"
    assert isinstance(protocol.send_queue, SendQueue) and protocol.send_queue.waiting is None
    transport.clear()
    protocol.sendData(b"chopped", chopsize=4)  # autobahn's own queued writes: the first at once
    assert transport.value() == b"chop" and len(protocol.send_queue) == 1
    protocol._send()
    assert transport.value() == b"chopped" and protocol.send_queue.waiting is None
    assert protocol.request.headers == {} and protocol.request.path == "/ws/"
    assert sys.getsizeof(protocol.__dict__) < full * 0.6
    # The factory's options and the idle flags are read from the class: a table of 64 slots, not 128.
    assert len(protocol.__dict__) <= 42, sorted(protocol.__dict__)
    assert isinstance(protocol, WebSocketProtocol) and type(protocol).__name__ == "WebSocketProtocol"
    assert protocol.autoPingInterval == 0 and protocol.tcpNoDelay is True and protocol.closedByMe is False
    transport.clear()
    await server.handle_reply(protocol, {"type": "websocket.send", "text": "hi"})
    assert transport.value() == frames("hi")
    # A masked text frame from the client reaches the application's queue.
    protocol.dataReceived(client_frame(0x1, b"yo"))
    assert protocol.application_queue.get_nowait() == {"type": "websocket.connect"}
    assert protocol.application_queue.get_nowait() == {"type": "websocket.receive", "text": "yo"}
    transport.clear()
    await server.handle_reply(protocol, {"type": "websocket.close", "code": 1008})
    assert transport.value() == b"\x88\x02" + (1008).to_bytes(2, "big")


async def test_a_factorys_connections_share_one_class_and_keep_what_is_their_own():
    allow_protocol_close_codes()
    server, first, transport = shaken_hands()
    factory = first.factory
    await server.handle_reply(first, {"type": "websocket.accept"})
    release_handshake(first)
    second = another_connection(server, factory)
    second.maxFramePayloadSize = 4096  # an option of its own, as autobahn allows
    # The factory's options changed after its class was made: later connections keep the new value.
    factory.setProtocolOptions(autoPingInterval=20, autoPingTimeout=10)
    third = another_connection(server, factory)
    for protocol in (second, third):
        await server.handle_reply(protocol, {"type": "websocket.accept"})
        release_handshake(protocol)
    assert type(first) is type(second) is type(third) and type(first) is not WebSocketProtocol
    assert (first.autoPingInterval, third.autoPingInterval, third.autoPingTimeout) == (0, 20, 10)
    assert "autoPingInterval" in third.__dict__ and "autoPingInterval" not in first.__dict__
    assert second.__dict__["maxFramePayloadSize"] == 4096 and "maxFramePayloadSize" not in first.__dict__
    # Another factory, another class; it goes with its factory.
    _, elsewhere, _ = shaken_hands()
    await elsewhere.server.handle_reply(elsewhere, {"type": "websocket.accept"})
    release_handshake(elsewhere)
    assert type(elsewhere) is not type(first)
    # A flag set later is the connection's own; the class keeps the idle value.
    first.wasClean = True
    assert second.wasClean is False and type(first).wasClean is False
    # A ping and its pong, as daphne's keepalive does them, then the close.
    transport.clear()
    first._sendAutoPing()
    assert transport.value()[:1] == b"\x89" and first.autoPingPending is not None
    first.dataReceived(client_frame(0xA, first.autoPingPending))
    assert first.autoPingPending is None and type(first).autoPingPending is None
    await server.handle_reply(first, {"type": "websocket.close", "code": 1000})
    assert first.state == first.STATE_CLOSING and first.closedByMe is True


def test_a_factorys_class_of_connections_goes_with_it():
    server = Server(application=None, endpoints=["tcp:port=0:interface=127.0.0.1"])
    factory = WebSocketFactory(server, server="Daphne")
    protocol = factory.buildProtocol(IPv4Address("TCP", "127.0.0.1", 50002))
    shared = shared_class(protocol)
    assert shared is not None and shared_class(protocol) is shared and issubclass(shared, WebSocketProtocol)
    made = weakref.ref(shared)
    del protocol, factory, server, shared
    gc.collect()
    assert made() is None, "no cache outside the factory keeps it"


def another_connection(server: Server, factory: WebSocketFactory) -> object:
    protocol = factory.buildProtocol(IPv4Address("TCP", "127.0.0.1", 50001))
    protocol.makeConnection(StringTransport())
    protocol._raw_query_string = b""
    protocol.dataReceived(upgrade_request("127.0.0.1", "http://127.0.0.1", "abc"))
    return protocol


class PushingBack:
    """An ASGI send that holds every `websocket.send` until `release`, as a server whose client does not read."""

    def __init__(self) -> None:
        self.sent: list[dict] = []
        self.open = asyncio.Event()

    async def __call__(self, message: dict) -> None:
        if message["type"] == "websocket.send":
            await self.open.wait()
        self.sent.append(message)

    def texts(self) -> list[str]:
        return [m["text"] for m in self.sent if m["type"] == "websocket.send"]


async def settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


async def test_under_another_server_frames_go_in_order_and_wait_while_a_send_does_not_return():
    send = PushingBack()
    buffer = SendBuffer(send, 1 << 20, Overflows())
    for text in ("a", "b", "c"):
        buffer.send(text)
    await settle()
    assert send.texts() == [] and buffer.waiting == 3
    send.open.set()
    await settle()
    assert send.texts() == ["a", "b", "c"] and buffer.waiting == 0


async def test_under_another_server_a_send_that_does_not_return_overflows_and_the_close_still_goes():
    send = PushingBack()
    overflows = Overflows()
    buffer = SendBuffer(send, 100, overflows)
    buffer.send("x" * 60)
    await settle()  # in flight, held by the server
    buffer.send("y" * 30)
    assert overflows == []
    buffer.send("z" * 20)
    assert overflows == [(3, 110)] and buffer.waiting == 0

    async def closer():
        await send({"type": "websocket.close", "code": 1008})

    await buffer.close(closer)
    await settle()
    assert send.sent == [{"type": "websocket.close", "code": 1008}]


async def test_replies_wait_for_room_until_what_waits_is_taken_or_the_socket_goes():
    send = PushingBack()
    buffer = SendBuffer(send, 1 << 20, Overflows())
    buffer.send("a" * (TRANSPORT_BUFFER + 1))
    assert buffer.pushed_back
    waiting = asyncio.ensure_future(buffer.room())
    await settle()
    assert not waiting.done()
    send.open.set()
    await asyncio.wait_for(waiting, 5)
    send.open.clear()
    buffer.send("b" * (TRANSPORT_BUFFER + 1))
    waiting = asyncio.ensure_future(buffer.room())
    await settle()
    buffer.stop()
    await asyncio.wait_for(waiting, 5)


async def test_a_large_frame_of_the_sockets_own_waits_until_it_fits_beside_what_waits():
    # A room.history page may be as large as the limit: sent beside what the
    # client has not read yet, it would overflow the buffer and close the socket.
    send = PushingBack()
    overflows = Overflows()
    buffer = SendBuffer(send, 1000, overflows)
    buffer.send("a" * 100)
    await settle()
    assert not buffer.pushed_back, "less than a transport's buffer waits"
    waiting = asyncio.ensure_future(buffer.room(950))
    await settle()
    assert not waiting.done(), "950 bytes beside the 100 that wait would pass the limit of 1000"
    send.open.set()
    await asyncio.wait_for(waiting, 5)
    assert buffer.send("b" * 950) and overflows == []
    await settle()
    assert send.texts() == ["a" * 100, "b" * 950]


async def test_under_daphne_a_large_frame_waits_only_while_the_transport_pushes_back():
    buffer, _, transport, overflows = daphne_buffer(limit=1000)
    await asyncio.wait_for(buffer.room(1000), 5)
    transport.producer.pauseProducing()
    waiting = asyncio.ensure_future(buffer.room(10))
    await settle()
    assert not waiting.done()
    transport.producer.resumeProducing()
    await asyncio.wait_for(waiting, 5)
    assert buffer.send("c" * 1000) and overflows == []


def test_a_send_queue_is_a_deque_while_something_waits_and_nothing_while_empty():
    queue = SendQueue()
    assert len(queue) == 0 and not queue
    with pytest.raises(IndexError):
        queue.popleft()
    queue.append((b"ab", True))
    queue.append((b"cd", True))
    assert len(queue) == 2 and queue
    assert queue.popleft() == (b"ab", True) and queue.popleft() == (b"cd", True)
    assert queue.waiting is None and not queue
