"""A connection's common request headers become the process's one copy (messaging/transport/header_pairs.py):
equal pairs are one object, per-connection ones never kept, the table bounded by `SHARED_HEADER_PAIRS`."""

from __future__ import annotations

import pytest

from messaging.transport import header_pairs
from messaging.transport.header_pairs import LONGEST_VALUE, share_header_pairs, shared_pairs

BROWSER = (
    ("host", "chat.example.com"),
    ("connection", "Upgrade"),
    ("upgrade", "websocket"),
    ("origin", "https://chat.example.com"),
    ("sec-websocket-version", "13"),
    ("user-agent", "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0 Safari/537.36"),
    ("accept-language", "en-GB,en;q=0.9"),
)


def handshake(cookie: str, key: str) -> list[tuple[bytes, bytes]]:
    """Headers as a server builds them for one connection: new bytes objects for every name and value."""
    pairs = [*BROWSER, ("cookie", cookie), ("sec-websocket-key", key)]
    return [(name.encode(), value.encode()) for name, value in pairs]


@pytest.fixture(autouse=True)
def empty_table(monkeypatch):
    monkeypatch.setattr(header_pairs, "_pairs", {})


def limit(settings, pairs: int) -> None:
    settings.MESSAGING = {**getattr(settings, "MESSAGING", {}), "SHARED_HEADER_PAIRS": pairs}


def test_equal_common_pairs_become_one_object_and_per_connection_ones_stay_their_own():
    first, second = handshake("sessionid=a", "key-a"), handshake("sessionid=b", "key-b")
    before = list(second)
    share_header_pairs(first)
    share_header_pairs(second)
    assert second == before  # the same values: nothing that reads them can tell
    for mine, theirs in zip(first[: len(BROWSER)], second[: len(BROWSER)], strict=True):
        assert mine is theirs
    # The cookie and the handshake's key are this connection's: not kept, not shared.
    assert first[-2] == (b"cookie", b"sessionid=a") and second[-2] is before[-2]
    assert second[-1] is before[-1]
    assert shared_pairs() == len(BROWSER)
    assert all(name not in {b"cookie", b"sec-websocket-key"} for name, _ in header_pairs._pairs)


def test_the_table_holds_at_most_its_limit_the_oldest_leaving_first(settings):
    limit(settings, 3)
    connections = [[(b"host", f"host{n}.example".encode())] for n in range(10)]
    for headers in connections:
        share_header_pairs(headers)
    assert shared_pairs() == 3
    # The newest three are kept: a later equal pair is theirs; the oldest left.
    later = [[(b"host", f"host{n}.example".encode())] for n in (0, 9)]
    share_header_pairs(later[1])
    assert later[1][0] is connections[9][0]
    share_header_pairs(later[0])
    assert later[0][0] is not connections[0][0]
    assert shared_pairs() == 3


def test_zero_turns_it_off(settings):
    limit(settings, 0)
    first, second = handshake("a", "a"), handshake("b", "b")
    share_header_pairs(first)
    share_header_pairs(second)
    assert shared_pairs() == 0
    assert first[0] is not second[0]


def test_what_it_cannot_share_is_left_as_it_came():
    odd = [
        (b"host", b"x" * (LONGEST_VALUE + 1)),  # too long to be common
        (b"host", bytearray(b"mutable")),  # not a key: not kept
        ("host", "text"),  # not bytes: not a name it knows
        (b"host", b"a", b"third"),  # not a pair
        [b"host", b"a list"],
    ]
    given = list(odd)
    share_header_pairs(given)
    assert all(mine is theirs for mine, theirs in zip(given, odd, strict=True))
    assert shared_pairs() == 0
    # Headers the server gave as another iterable are not changed in place.
    as_tuple = tuple(handshake("a", "a"))
    share_header_pairs(as_tuple)
    share_header_pairs(None)
    assert shared_pairs() == 0
