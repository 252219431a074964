"""A long-lived connection's common request headers, one copy for the process.

An open WebSocket (and an event stream) keeps its ASGI scope for its whole
life, and with it the handshake's headers: a list of `(name, value)` pairs
of bytes the server built for this connection alone (daphne lowercases each
name into a new bytes object; uvicorn encodes each pair). Most of them are
the same on every connection of a deployment: `host`, `upgrade`,
`connection`, `origin`, `sec-websocket-version`, and a browser's
`user-agent`, `accept-language`, `accept-encoding`, `cache-control`, `pragma`.
With 10,000 idle sockets that is 10,000 copies of each.

`share_header_pairs(headers)` replaces, in the list itself, each such pair
with the equal one kept in a table of the process, so that the connection's
own copy is freed: the scope's copies made by middleware share that list,
and so does daphne's protocol. The values are equal, so nothing that reads
them can tell. Only the names in `SHAREABLE` are kept, each value at most
`LONGEST_VALUE` bytes: a per-connection value (the cookie, the handshake's
key, a token, a forwarded address) is never held past its connection's
life, and a client that sends odd values of those names only replaces
entries. The table holds at most `SHARED_HEADER_PAIRS` pairs (0 turns it
off); when full, the oldest entry leaves for the new one.
"""

from __future__ import annotations

from typing import Any

from ..conf import get_settings

# Headers whose values a deployment's connections mostly have in common, as servers lowercase them.
SHAREABLE = frozenset(
    {
        b"host",
        b"upgrade",
        b"connection",
        b"origin",
        b"sec-websocket-version",
        b"sec-websocket-extensions",
        b"user-agent",
        b"accept",
        b"accept-encoding",
        b"accept-language",
        b"cache-control",
        b"pragma",
        b"x-forwarded-proto",
        b"x-forwarded-host",
        b"x-forwarded-port",
    }
)
# A longer value is this connection's own more likely than not.
LONGEST_VALUE = 512

# The pairs kept, each its own key: the dict keeps them in the order they came, the oldest first.
_pairs: dict[tuple[bytes, bytes], tuple[bytes, bytes]] = {}


def share_header_pairs(headers: Any) -> None:
    """Put the process's copy of each common pair in place of the connection's own, in `headers` (a list)."""
    limit = get_settings().SHARED_HEADER_PAIRS
    if not limit or type(headers) is not list:
        return  # off, or a server's iterable this cannot change in place
    for index, pair in enumerate(headers):
        if type(pair) is not tuple or len(pair) != 2 or pair[0] not in SHAREABLE:
            continue
        if type(pair[1]) is not bytes or len(pair[1]) > LONGEST_VALUE:
            continue
        kept = _pairs.get(pair)
        if kept is None:
            while len(_pairs) >= limit:
                _pairs.pop(next(iter(_pairs)), None)
            _pairs[pair] = kept = pair
        headers[index] = kept


def shared_pairs() -> int:
    """How many pairs the table holds now."""
    return len(_pairs)
