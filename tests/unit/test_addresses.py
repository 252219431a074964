"""What a per-address window counts a client as."""
from __future__ import annotations

import pytest

from messaging.transport.addresses import client_key, scope_client


@pytest.mark.parametrize(
    "host, key",
    [
        ("203.0.113.7", "203.0.113.7"),
        # One host is usually given a /64: its addresses count as one.
        ("2001:db8:1:2:3:4:5:6", "2001:db8:1:2::/64"),
        ("2001:db8:1:2:ffff::1", "2001:db8:1:2::/64"),
        ("::ffff:203.0.113.7", "203.0.113.7"),
        ("unix-socket-peer", "unix-socket-peer"),
        ("", None),
        (None, None),
    ],
)
def test_client_keys(host, key):
    assert client_key(host) == key


def test_a_scope_without_a_client_is_not_counted():
    assert scope_client({"type": "websocket"}) is None
    assert scope_client({"type": "websocket", "client": None}) is None
    assert scope_client({"type": "websocket", "client": ["198.51.100.1", 5000]}) == "198.51.100.1"
