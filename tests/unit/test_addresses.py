"""What a per-address window counts a client as: the peer, or the client a trusted proxy names (PROTOCOL.md 1.2)."""

from __future__ import annotations

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.test import RequestFactory

from messaging.conf import MessagingSettings, trusted_proxies
from messaging.transport.addresses import (
    client_address,
    client_ip_of_request,
    client_key,
    client_of_request,
    client_of_scope,
)


@pytest.mark.parametrize(
    "host, key",
    [
        ("203.0.113.7", "203.0.113.7"),
        # One host is usually given a /64: its addresses count as one.
        ("2001:db8:1:2:3:4:5:6", "2001:db8:1:2::/64"),
        ("2001:db8:1:2:ffff::1", "2001:db8:1:2::/64"),
        ("::ffff:203.0.113.7", "203.0.113.7"),
        # What proxies write: spaces, ports, brackets, zones.
        (" 203.0.113.7 ", "203.0.113.7"),
        ("203.0.113.7:5678", "203.0.113.7"),
        ("[2001:db8::1]", "2001:db8::/64"),
        ("[2001:db8::1]:443", "2001:db8::/64"),
        ("fe80::1%eth0", "fe80::/64"),
        # Never a key: anything that is not an IP address.
        ("unix-socket-peer", None),
        ("unknown", None),
        ("203.0.113.7:http", None),
        ("[2001:db8::1]x", None),
        ("[2001:db8::1", None),
        ("203.0.113.7/24", None),
        ("messaging:signin:*", None),
        ("", None),
        (None, None),
        (2130706433, None),
    ],
)
def test_client_keys(host, key):
    assert client_key(host) == key


PROXIES = trusted_proxies("10.0.0.0/8, 192.0.2.1, fd00::/8")


@pytest.mark.parametrize(
    "peer, forwarded_for, client",
    [
        # An untrusted peer is the client, whatever it writes.
        ("198.51.100.1", ["203.0.113.7"], "198.51.100.1"),
        ("198.51.100.1", [], "198.51.100.1"),
        # A trusted peer: the right-most address that is not a trusted proxy.
        ("10.0.0.5", ["203.0.113.7"], "203.0.113.7"),
        ("10.0.0.5", ["1.1.1.1, 203.0.113.7"], "203.0.113.7"),
        ("10.0.0.5", ["1.1.1.1, 203.0.113.7, 10.1.2.3, 192.0.2.1"], "203.0.113.7"),
        ("10.0.0.5", ["1.1.1.1,203.0.113.7,10.1.2.3"], "203.0.113.7"),
        ("10.0.0.5", ["  1.1.1.1 ,   203.0.113.7  "], "203.0.113.7"),
        # Several headers: one list, in their order.
        ("10.0.0.5", ["1.1.1.1", "203.0.113.7"], "203.0.113.7"),
        ("10.0.0.5", ["1.1.1.1, 203.0.113.7", "10.9.9.9"], "203.0.113.7"),
        ("10.0.0.5", ["203.0.113.7", ""], "203.0.113.7"),
        # Ports and brackets, as some proxies write them.
        ("10.0.0.5", ["203.0.113.7:4711"], "203.0.113.7"),
        ("10.0.0.5", ["[2001:db8:1:2::9]:4711"], "2001:db8:1:2::/64"),
        ("10.0.0.5", ["2001:db8:1:2::9, [fd00::1]"], "2001:db8:1:2::/64"),
        ("fd00::1", ["203.0.113.7"], "203.0.113.7"),
        # An IPv4-mapped peer is its IPv4 address, trusted as such.
        ("::ffff:10.0.0.5", ["203.0.113.7"], "203.0.113.7"),
        # Empty entries carry nothing and are skipped.
        ("10.0.0.5", ["203.0.113.7,, ,10.1.1.1,"], "203.0.113.7"),
        ("10.0.0.5", [","], "10.0.0.5"),
        # Not an IP address: the trusted hop that passed it on is the client.
        ("10.0.0.5", ["evil, 203.0.113.7"], "203.0.113.7"),
        ("10.0.0.5", ["203.0.113.7, unknown"], "10.0.0.5"),
        ("10.0.0.5", ["203.0.113.7, unknown, 10.1.1.1"], "10.1.1.1"),
        ("10.0.0.5", ["messaging:signin:x"], "10.0.0.5"),
        # Every entry trusted (or none at all): the farthest trusted hop.
        ("10.0.0.5", [], "10.0.0.5"),
        ("10.0.0.5", ["10.1.1.1, 192.0.2.1"], "10.1.1.1"),
        # A peer that is not an IP address (a Unix socket) gives no key.
        (None, ["203.0.113.7"], None),
        ("unix:/run/app.sock", ["203.0.113.7"], None),
    ],
)
def test_the_client_is_the_right_most_untrusted_address(peer, forwarded_for, client):
    assert client_address(peer, forwarded_for, PROXIES) == client


def test_without_trusted_proxies_the_peer_is_the_client():
    assert client_address("10.0.0.5", ["203.0.113.7"], ()) == "10.0.0.5"


def scope(peer, *headers):
    return {"type": "websocket", "client": None if peer is None else [peer, 5000], "headers": list(headers)}


def test_a_scope_reads_every_x_forwarded_for_header_in_order(settings):
    settings.MESSAGING = {**settings.MESSAGING, "TRUSTED_PROXIES": "127.0.0.1"}
    given = scope(
        "127.0.0.1",
        (b"x-forwarded-for", b"1.1.1.1, 203.0.113.7"),
        (b"host", b"x"),
        (b"x-forwarded-for", b"198.51.100.9"),
    )
    assert client_of_scope(given) == "198.51.100.9"
    # A header spelled otherwise is another header, never read.
    assert client_of_scope(scope("127.0.0.1", (b"x_forwarded_for", b"203.0.113.7"))) == "127.0.0.1"
    assert client_of_scope({"type": "websocket"}) is None
    assert client_of_scope(scope(None)) is None


def test_a_scope_from_an_untrusted_peer_is_its_peer(settings):
    settings.MESSAGING = {**settings.MESSAGING, "TRUSTED_PROXIES": ""}
    assert client_of_scope(scope("198.51.100.1", (b"x-forwarded-for", b"203.0.113.7"))) == "198.51.100.1"


def test_a_request_reads_remote_addr_and_its_header(settings):
    settings.MESSAGING = {**settings.MESSAGING, "TRUSTED_PROXIES": ["127.0.0.0/8"]}
    request = RequestFactory().get("/", REMOTE_ADDR="127.0.0.1", HTTP_X_FORWARDED_FOR="1.1.1.1, 2001:db8:5:6::7")
    assert client_of_request(request) == "2001:db8:5:6::/64"
    # For a library that wants an IP address (django-axes): the /64's first one.
    assert client_ip_of_request(request) == "2001:db8:5:6::"
    untrusted = RequestFactory().get("/", REMOTE_ADDR="198.51.100.1", HTTP_X_FORWARDED_FOR="203.0.113.7")
    assert client_of_request(untrusted) == client_ip_of_request(untrusted) == "198.51.100.1"


@pytest.mark.parametrize("given", ["nginx", "10.0.0.1/8", "10.0.0.0/33", "10.0.0.1 10.0.0.2", ["10.0.0.1", 7]])
def test_a_malformed_trusted_proxy_stops_the_start(given):
    with pytest.raises(ImproperlyConfigured, match="TRUSTED_PROXIES"):
        MessagingSettings(TRUSTED_PROXIES=given)


def test_trusted_proxies_are_read_from_a_string_or_a_list():
    assert MessagingSettings(TRUSTED_PROXIES=" 10.0.0.0/8,,192.0.2.1 ").TRUSTED_PROXIES == (
        "10.0.0.0/8",
        "192.0.2.1/32",
    )
    assert MessagingSettings(TRUSTED_PROXIES=["fd00::/8"]) == MessagingSettings(TRUSTED_PROXIES="fd00::/8")
    assert MessagingSettings().trusted_networks == ()
