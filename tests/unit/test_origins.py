"""The WebSocket Origin check: scheme, host and port, from CSRF_TRUSTED_ORIGINS or the handshake itself."""

from __future__ import annotations

import pytest

from messaging.transport.origins import OriginValidator, origin_allowed

LOCAL = ("127.0.0.1", "localhost")


def own(origin, *, scheme="http", host="127.0.0.1:8000", allowed=LOCAL) -> bool:
    return origin_allowed(origin, scheme=scheme, host=host, trusted_origins=(), allowed_hosts=allowed)


@pytest.mark.parametrize("origin", ["http://127.0.0.1:8000", "HTTP://127.0.0.1:8000", "http://127.0.0.1:8000/"])
def test_the_handshakes_own_origin_is_accepted(origin):
    assert own(origin)


@pytest.mark.parametrize(
    "origin, why",
    [
        ("http://127.0.0.1:8001", "another port"),
        ("http://127.0.0.1", "the default port is another port"),
        ("https://127.0.0.1:8000", "another scheme"),
        ("ws://127.0.0.1:8000", "no page has a ws: origin"),
        ("http://evil.example:8000", "another host"),
        ("http://127.0.0.1.evil.example:8000", "another host that starts alike"),
        ("null", "an opaque origin (sandboxed frame, file:)"),
        ("", "empty"),
        (None, "missing"),
        ("http://127.0.0.1:8000/chat", "a path is no origin"),
        ("http://user@127.0.0.1:8000", "credentials are no origin"),
        ("http://127.0.0.1:99999", "no such port"),
    ],
)
def test_anything_else_is_refused(origin, why):
    assert not own(origin), why


def test_default_ports_are_the_same_origin_written_or_not():
    assert own("http://chat.example.com", host="chat.example.com:80", allowed=["chat.example.com"])
    assert own("https://chat.example.com:443", scheme="https", host="chat.example.com", allowed=["chat.example.com"])


def test_the_host_must_be_allowed_even_when_origin_and_host_agree():
    # DNS rebinding: a foreign name that resolves to this server sends matching Origin and Host.
    assert not own("http://rebound.example:8000", host="rebound.example:8000")
    assert own("http://chat.example.com:8000", host="chat.example.com:8000", allowed=[".example.com"])


def trusted(origin, patterns, *, scheme="http", host="10.0.0.5:8000") -> bool:
    return origin_allowed(origin, scheme=scheme, host=host, trusted_origins=patterns, allowed_hosts=["*"])


def test_trusted_origins_where_set_are_the_whole_list():
    patterns = ["https://chat.example.com"]
    # Behind a TLS-terminating proxy: the process sees plain ws on its own address.
    assert trusted("https://chat.example.com", patterns)
    assert not trusted("http://chat.example.com", patterns)
    assert not trusted("https://chat.example.com:8443", patterns)
    # The handshake's own origin is not added to a list that was given.
    assert not trusted("http://10.0.0.5:8000", patterns)


def test_trusted_origins_name_subdomains_as_djangos_csrf_check_does():
    patterns = ["https://*.example.com"]
    assert trusted("https://chat.example.com", patterns) and trusted("https://a.b.example.com", patterns)
    assert trusted("https://example.com", patterns)
    assert not trusted("https://evilexample.com", patterns)
    assert not trusted("http://chat.example.com", patterns)
    assert not trusted("https://chat.example.com:8443", patterns)


def scheme_of(scope_scheme="ws", header=None, *, proxy=("HTTP_X_FORWARDED_PROTO", "https")) -> str:
    validator = OriginValidator(None, proxy_ssl_header=proxy)
    headers = {} if header is None else {b"x-forwarded-proto": header}
    return validator.page_scheme({"scheme": scope_scheme}, headers)


def test_the_pages_scheme_is_the_sockets_or_the_proxys_as_django_reads_it():
    assert scheme_of("ws") == "http" and scheme_of("wss") == "https"
    assert scheme_of("ws", "https") == "https" and scheme_of("ws", "https, http") == "https"
    # The proxy's word wins both ways once it is given.
    assert scheme_of("wss", "http") == "http"
    assert scheme_of("ws", "https", proxy=None) == "http"
