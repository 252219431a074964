"""The frames daphne_pings.py writes and reads by hand, checked against autobahn's own."""

from __future__ import annotations

import os

import pytest
from autobahn.websocket.xormasker import create_xor_masker

from messaging.transport.daphne_pings import ping_frame, unmasked


@pytest.mark.parametrize("size", [0, 1, 3, 4, 5, 12, 125])
def test_a_payload_masked_by_autobahn_is_unmasked(size):
    payload, key = os.urandom(size), os.urandom(4)
    masked = create_xor_masker(key, size).process(payload) if size else b""
    assert unmasked(key, masked) == payload


def test_a_ping_frame_is_a_servers_unmasked_ping():
    assert ping_frame(b"") == b"\x89\x00"
    assert ping_frame(b"twelve bytes") == b"\x89\x0ctwelve bytes"
