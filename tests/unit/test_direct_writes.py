"""`DAPHNE_DIRECT_WRITES`: a frame goes to a plain TCP connection's socket at once while Twisted's
transport holds nothing unsent; what the kernel does not take, and every frame behind anything
unsent, goes through the transport, in order. Real sockets on 127.0.0.1, Twisted's own TCP transport."""

from __future__ import annotations

import select
import socket

import pytest
from django.test import override_settings
from twisted.internet import reactor, tcp

from messaging.transport.frames import frame_bytes
from messaging.transport.servers.daphne import DaphneSendBuffer, FrameWriter

from .test_frames import open_connection


@pytest.fixture
def connected():
    """A daphne WebSocket connection on Twisted's TCP transport of a real socket, and the client's end."""
    with socket.create_server(("127.0.0.1", 0)) as listener:
        client = socket.create_connection(listener.getsockname())
        ours, _ = listener.accept()
    ours.setblocking(False)
    client.setblocking(False)
    _, protocol, _ = open_connection()
    transport = tcp.Connection(ours, protocol, reactor)
    transport.connected = True  # as daphne's accepted connection (tcp.Server) starts
    protocol.transport = transport
    yield protocol, transport, client
    if transport in reactor.getWriters():
        reactor.removeWriter(transport)
    ours.close()
    client.close()


def received(client: socket.socket, size: int) -> bytes:
    """`size` bytes from the client's end (what the kernel already took arrives; waits for it)."""
    chunks, got = [], 0
    while got < size:
        select.select([client], [], [], 10)
        chunk = client.recv(size - got)
        assert chunk, "the connection closed"
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)


def unsent(transport) -> bytes:
    return transport.dataBuffer[transport.offset :] + b"".join(transport._tempDataBuffer)


def frames(*texts: str) -> bytes:
    return b"".join(frame_bytes(text.encode()) for text in texts)


def test_a_frame_goes_to_the_socket_at_once_while_the_transport_holds_nothing(connected):
    protocol, transport, client = connected
    writer = FrameWriter(protocol, direct=True)
    assert writer.direct
    assert writer.write("hello") and writer.write("again")
    assert unsent(transport) == b""
    assert transport not in reactor.getWriters()  # nothing for the loop's next turn
    assert received(client, len(frames("hello", "again"))) == frames("hello", "again")


def test_behind_anything_unsent_a_frame_waits_in_the_transport_in_order(connected):
    protocol, transport, client = connected
    transport.write(b"earlier")  # Twisted buffers it until the reactor's next turn
    writer = FrameWriter(protocol, direct=True)
    assert writer.write("later")
    assert unsent(transport) == b"earlier" + frames("later")


def test_what_the_kernel_does_not_take_and_what_follows_go_through_the_transport(connected):
    protocol, transport, client = connected
    transport.socket.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
    client.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    big = "x" * 2_000_000  # more than both kernels' buffers hold
    writer = FrameWriter(protocol, direct=True)
    assert writer.write(big) and writer.write("next")
    left = unsent(transport)
    assert 0 < len(left) < len(frames(big))  # the kernel took a part at once
    assert received(client, len(frames(big, "next")) - len(left)) + left == frames(big, "next")


def test_without_the_setting_every_frame_goes_through_the_transport(connected):
    protocol, transport, client = connected
    assert DaphneSendBuffer(protocol, None, None, 1 << 20, lambda *_: None).writer.direct is False
    FrameWriter(protocol).write("a")
    assert unsent(transport) == frames("a")


@override_settings(MESSAGING={"DAPHNE_DIRECT_WRITES": True})
def test_the_setting_turns_it_on_for_plain_tcp_only(connected):
    protocol, transport, client = connected
    assert DaphneSendBuffer(protocol, None, None, 1 << 20, lambda *_: None).writer.direct is True
    _, other, _ = open_connection()  # a transport that is not Twisted's TCP (TLS, a test's)
    assert DaphneSendBuffer(other, None, None, 1 << 20, lambda *_: None).writer.direct is False
