"""Text frames written straight to daphne's connection (messaging/transport/servers/daphne.py) are
the bytes autobahn would have written, and anything autobahn would write
differently is left to it."""

from __future__ import annotations

import functools

import pytest
from autobahn.exception import Disconnected
from channels.sessions import InstanceSessionWrapper
from daphne.server import Server
from daphne.ws_protocol import WebSocketFactory
from twisted.internet.address import IPv4Address
from twisted.internet.testing import StringTransport

from messaging.transport import frames
from messaging.transport.frames import frame_bytes
from messaging.transport.servers.daphne import FrameWriter, frame_writer

TEXTS = ["x", "a" * 125, "b" * 126, "é" * 100, "😀" * 4000, "c" * 65535, "d" * 70000]


def open_connection(**options) -> tuple[Server, object, StringTransport]:
    """A daphne WebSocket connection past its handshake, on a transport that keeps what is written."""
    server = Server(application=None, endpoints=["tcp:port=0:interface=127.0.0.1"])
    factory = WebSocketFactory(server, server="Daphne")
    factory.setProtocolOptions(openHandshakeTimeout=0, autoPingInterval=0)
    for name, value in options.items():
        setattr(factory, name, value)
    protocol = factory.buildProtocol(IPv4Address("TCP", "127.0.0.1", 50000))
    transport = StringTransport()
    protocol.makeConnection(transport)
    # What the handshake sets.
    protocol.state = protocol.STATE_OPEN
    protocol.client_addr = ["127.0.0.1", 50000]
    transport.clear()
    return server, protocol, transport


def autobahn_bytes(text: str) -> bytes:
    """What daphne and autobahn write for `text`, as a consumer's `send` would have them."""
    _, protocol, transport = open_connection()
    protocol.handle_reply({"type": "websocket.send", "text": text})
    return transport.value()


@pytest.mark.parametrize("text", TEXTS, ids=lambda t: f"{len(t.encode())}-bytes")
def test_a_frame_is_the_bytes_autobahn_writes(text):
    assert frame_bytes(text.encode()) == autobahn_bytes(text)
    _, protocol, transport = open_connection()
    assert FrameWriter(protocol).write(text)
    assert transport.value() == autobahn_bytes(text)


def test_the_same_text_to_several_sockets_is_encoded_once(monkeypatch):
    built = []
    real = frames.frame_bytes
    monkeypatch.setattr(frames, "frame_bytes", lambda payload: built.append(payload) or real(payload))
    text = '{"t":"msg","d":{"seq":1}}'
    connections = [open_connection() for _ in range(3)]
    for _, protocol, _ in connections:
        assert FrameWriter(protocol).write(text)
    assert built == [text.encode()]
    assert {transport.value() for _, _, transport in connections} == {autobahn_bytes(text)}
    # An equal string that is another object is encoded anew: only identity is cheap to check.
    assert FrameWriter(connections[0][1]).write("".join(['{"t":"msg","d":{"seq":1', "}}"]))
    assert len(built) == 2


def test_an_empty_text_is_left_to_daphne_which_drops_it():
    _, protocol, transport = open_connection()
    assert not FrameWriter(protocol).write("")
    assert autobahn_bytes("") == b""


def not_open(protocol):
    protocol.state = protocol.STATE_CLOSING


def data_queued(protocol):
    protocol.send_queue.append((b"\x89\x00", True))


def compressed(protocol):
    protocol._perMessageCompress = object()


@pytest.mark.parametrize("condition", [not_open, data_queued, compressed])
def test_a_connection_autobahn_would_write_differently_to_is_left_to_it(condition):
    _, protocol, transport = open_connection()
    condition(protocol)
    assert not FrameWriter(protocol).write("hello")
    assert transport.value() == b""


@pytest.mark.parametrize("state", ["STATE_CLOSING", "STATE_CLOSED"])
def test_a_closing_or_closed_connection_is_left_to_autobahn_which_refuses_its_frames(state):
    _, protocol, transport = open_connection()
    protocol.state = getattr(protocol, state)
    writer = FrameWriter(protocol)
    assert not writer.write("hello")
    with pytest.raises(Disconnected):
        protocol.handle_reply({"type": "websocket.send", "text": "hello"})
    assert transport.value() == b""


def test_a_frame_over_autobahns_message_size_limit_is_written_all_the_same():
    # The limit is on what clients send; the app's own on what it sends is MAX_SEND_BUFFER.
    _, protocol, transport = open_connection(maxMessagePayloadSize=10)
    writer = FrameWriter(protocol)
    assert writer.write("a" * 10)
    assert writer.write("é" * 6), "12 bytes of payload, over the limit of 10"
    assert transport.value() == frame_bytes(b"a" * 10) + frame_bytes("é".encode() * 6)


def daphne_send(protocol_options: dict | None = None):
    server, protocol, _ = open_connection(**(protocol_options or {}))
    return functools.partial(server.handle_reply, protocol), protocol


def test_the_writer_is_found_under_channels_session_middleware():
    send, protocol = daphne_send()
    wrapped = InstanceSessionWrapper({"cookies": {}}, send).send
    for candidate in (send, wrapped):
        writer = frame_writer(candidate)
        assert isinstance(writer, FrameWriter) and writer.protocol is protocol


async def other_server_send(message: dict) -> None:
    pass


@pytest.mark.parametrize(
    "send",
    [
        other_server_send,
        functools.partial(other_server_send),
        InstanceSessionWrapper({"cookies": {}}, other_server_send).send,
    ],
)
def test_another_servers_send_gets_no_writer(send):
    assert frame_writer(send) is None


@pytest.mark.parametrize("options", [{"maskServerFrames": True}, {"autoFragmentSize": 1000}, {"logOctets": True}])
def test_a_connection_set_up_to_frame_otherwise_gets_no_writer(options):
    send, _ = daphne_send(options)
    assert frame_writer(send) is None
