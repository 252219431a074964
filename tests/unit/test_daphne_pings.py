"""The frames daphne_pings.py writes and reads by hand and the automatic ping it sends, checked against autobahn's own."""

from __future__ import annotations

import os
import struct
import time
from types import SimpleNamespace

import pytest
from autobahn.websocket.protocol import WebSocketProtocol
from autobahn.websocket.xormasker import create_xor_masker

from messaging.transport.daphne_pings import ping_frame, send_auto_ping, unmasked
from messaging.transport.daphne_sweeps import PongDeadline


@pytest.mark.parametrize("size", [0, 1, 3, 4, 5, 12, 125])
def test_a_payload_masked_by_autobahn_is_unmasked(size):
    payload, key = os.urandom(size), os.urandom(4)
    masked = create_xor_masker(key, size).process(payload) if size else b""
    assert unmasked(key, masked) == payload


def test_a_ping_frame_is_a_servers_unmasked_ping():
    assert ping_frame(b"") == b"\x89\x00"
    assert ping_frame(b"twelve bytes") == b"\x89\x0ctwelve bytes"


class Pinging:
    """What an automatic ping reads and sets of autobahn's protocol, and the pings it sent."""

    def __init__(self, size: int = 12, timeout: float = 30.0) -> None:
        self.autoPingSize, self.autoPingTimeout = size, timeout
        self.autoPingPendingSeq, self.autoPingPendingSent, self.autoPingPending = 0, None, None
        self.autoPingPendingCall: object = "a ping autobahn had scheduled"
        self.autoPingTimeoutCall: object = None
        self.sent: list[bytes] = []
        # Autobahn's own `_sendAutoPing` logs, and arms a txaio timer: its delays here.
        self.armed: list[float] = []
        self.log = SimpleNamespace(debug=lambda *args, **kwargs: None)
        self.factory = SimpleNamespace(_batched_timer=SimpleNamespace(call_later=self.arm))

    def sendPing(self, payload: bytes) -> None:
        self.sent.append(payload)

    def arm(self, delay: float, call: object) -> str:
        self.armed.append(delay)
        return "a txaio timer"

    def onAutoPingTimeout(self) -> None:
        raise AssertionError("a timer's, never called here")


@pytest.mark.parametrize("size", [12, 13, 125])
def test_an_automatic_ping_is_autobahns_payload_and_state(size):
    ours, autobahns = Pinging(size), Pinging(size)
    for _ in range(2):
        send_auto_ping(ours)
        WebSocketProtocol._sendAutoPing(autobahns)
    for pinging in (ours, autobahns):
        payload = pinging.autoPingPending
        assert pinging.sent[-1] == payload and len(payload) == size
        # The time it was sent, then its number.
        assert struct.unpack(">QL", payload[:12]) == (pinging.autoPingPendingSent, 2)
        assert pinging.autoPingPendingSeq == 2 and pinging.autoPingPendingCall is None
    assert ours.sent[0] != ours.sent[1]
    assert ours.armed == [] and autobahns.armed == [30.0, 30.0]


def test_an_unanswered_ping_keeps_its_pongs_deadline_through_the_pings_after_it():
    pinging = Pinging(timeout=3.0)
    before = time.time()
    send_auto_ping(pinging)
    first = pinging.autoPingTimeoutCall
    assert isinstance(first, PongDeadline)
    assert first.due is not None and before + 3.0 <= first.due <= time.time() + 3.0
    send_auto_ping(pinging)
    assert pinging.autoPingTimeoutCall is first and first.due <= time.time() + 3.0


def test_a_ping_after_the_wait_ended_has_a_deadline_of_its_own():
    pinging = Pinging(timeout=3.0)
    send_auto_ping(pinging)
    first = pinging.autoPingTimeoutCall
    assert isinstance(first, PongDeadline)
    first.cancel()  # autobahn ends a wait so, and forgets it: here, a wait ended but not forgotten
    send_auto_ping(pinging)
    assert isinstance(pinging.autoPingTimeoutCall, PongDeadline) and pinging.autoPingTimeoutCall is not first
    pinging.autoPingTimeoutCall = "a txaio timer autobahn armed"
    send_auto_ping(pinging)
    assert isinstance(pinging.autoPingTimeoutCall, PongDeadline)


def test_without_a_ping_timeout_a_ping_has_no_deadline():
    pinging = Pinging(timeout=0)
    send_auto_ping(pinging)
    assert pinging.sent and pinging.autoPingTimeoutCall is None
