"""Per-client-address windows: how often one address may do something rare, over every process.

The handshake throttle (messaging/transport/handshakes.py) and the guest sign-in
throttle (`limit_posts_per_address` on the demo's `project/guests.py`) count
here, each in a window of its own: `limit` hits per address per `window`
seconds. Room creation (`ROOMS_CREATED_PER_ADDRESS_PER_HOUR`, counted in the
database: messaging/chat/rooms.py) and the demo's admin login throttle
(django-axes, through `client_ip_of_request`) key on the same client.

Why it counts where it does: in the app's Redis (`MESSAGING["REDIS_URL"]`),
where the per-user window of messaging/transport/ratelimit.py counts too, because a
client behind a load balancer reaches every process, and a limit per process
would let it in once per process. Unlike the per-user window, each hit is one
round trip (`RedisWindow.ahit_now`: `INCR` and `EXPIRE`), not a
batch: handshakes and sign-ins are rare next to commands, and their limit
must hold exactly at its edge (the 31st sign-in of a burst is refused
whichever process takes it), which batches a quarter second late would not.
Without Redis, or while it fails, each process counts on its own (its own
window holds at most `RATE_WINDOW_KEYS` addresses), and the limit then holds
per process.

Who a request comes from (PROTOCOL.md 1.2, "Who a request comes from") is
decided here, once, for every per-address limit: `client_of_scope` for an
ASGI connection, `client_of_request` for a Django request. The client is the
connection's peer, unless the peer is one of `MESSAGING["TRUSTED_PROXIES"]`:
then `X-Forwarded-For` (all of the request's such headers, in order) is read
from its right end, past the addresses that are trusted proxies themselves,
and the first other one is the client. Only what a trusted proxy appended
is read: the entries to the left of the client's were written by the client
and are never looked at. The servers' own proxy-header modes (daphne
`--proxy-headers`, which takes the leftmost entry, the client's) must stay
off: the app reads the header itself (docs/OPERATIONS.md).

What a limit counts is a key: an IPv4 address, or an IPv6 client's /64
network, the block one host is usually given, so it cannot walk through a
window one address at a time (an IPv4-mapped IPv6 address counts as its
IPv4 address). A value that is not an IP address is never a key: where the
walk meets one (`unknown`, a name, a client's garbage behind a proxy that
passes the header on untouched), the request counts as the trusted hop that
handed it over, the nearest proxy that vouched for nothing further; a peer
that is not an IP address (a Unix socket) gives no key, and the
per-address limits do not count it.
"""

from __future__ import annotations

import functools
import ipaddress
import math
from collections.abc import Callable
from typing import Any

from asgiref.sync import async_to_sync
from django.http import HttpRequest, HttpResponse

from ..conf import IPNetwork, get_settings
from ..ops import metrics
from .ratelimit import LocalWindow, RedisWindow

_windows: dict[str, tuple[tuple[Any, ...], LocalWindow]] = {}


def address_window(name: str, limit: int, window: float) -> LocalWindow | None:
    """This process's window `name` of `limit` hits per address per `window`
    seconds (None when `limit` is 0: off), built anew when it or the app's
    settings change."""
    if limit <= 0:
        return None
    conf = get_settings()
    key = (limit, window, conf.REDIS_URL, conf.REDIS_TIMEOUT, conf.RATE_WINDOW_KEYS)
    cached = _windows.get(name)
    if cached is None or cached[0] != key:
        counter: LocalWindow
        if conf.REDIS_URL:
            counter = RedisWindow(
                conf.REDIS_URL,
                limit,
                window,
                prefix=f"messaging:{name}:",
                timeout=conf.REDIS_TIMEOUT,
                max_keys=conf.RATE_WINDOW_KEYS,
            )
        else:
            counter = LocalWindow(limit, window, max_keys=conf.RATE_WINDOW_KEYS)
        cached = _windows[name] = (key, counter)
    return cached[1]


IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
# The header, as ASGI servers name it (lowercased).
FORWARDED_FOR = b"x-forwarded-for"


def ip_of(text: Any) -> IPAddress | None:
    """The IP address `text` names, or None. Accepts what proxies write into
    `X-Forwarded-For`: spaces around it, an IPv4 address with a port
    (`203.0.113.7:5678`), an IPv6 address in brackets with or without a port
    (`[2001:db8::1]:443`), a zone (`fe80::1%eth0`, dropped). An IPv4-mapped
    IPv6 address is its IPv4 address."""
    if not isinstance(text, str):
        return None
    text = text.strip()
    if text.startswith("["):
        close = text.find("]")
        rest = text[close + 1 :] if close > 0 else "?"
        if rest and not (rest[0] == ":" and rest[1:].isdigit()):
            return None
        text = text[1:close]
    elif text.count(":") == 1:
        text, port = text.split(":")
        if not port.isdigit():
            return None
    text = text.split("%", 1)[0]
    try:
        address = ipaddress.ip_address(text)
    except ValueError:
        return None
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address


def key_of(address: IPAddress) -> str:
    """What a window counts for `address`: the IPv4 address, an IPv6 address's /64 network."""
    if isinstance(address, ipaddress.IPv6Address):
        return str(ipaddress.IPv6Network((address, 64), strict=False))
    return str(address)


def client_key(host: Any) -> str | None:
    """The key of the IP address `host` (`ip_of`'s forms), None for anything else."""
    address = ip_of(host)
    return None if address is None else key_of(address)


def is_trusted(address: IPAddress, trusted: tuple[IPNetwork, ...]) -> bool:
    return any(address in network for network in trusted)


def client_address(peer: Any, forwarded_for: list[str], trusted: tuple[IPNetwork, ...]) -> str | None:
    """The key of a request's client: `peer`, the connection's peer address,
    unless it is in `trusted`; then the right-most address of `forwarded_for`
    (the values of the request's `X-Forwarded-For` headers, in order) that is
    not in `trusted`. Empty entries are skipped; where an entry is not an IP
    address, or every entry is trusted, the last trusted hop is the client.
    None when `peer` is not an IP address."""
    hop = ip_of(peer)
    if hop is None:
        return None
    if not is_trusted(hop, trusted):
        return key_of(hop)
    for value in reversed(forwarded_for):
        for entry in reversed(value.split(",")):
            if not entry.strip():
                continue
            address = ip_of(entry)
            if address is None:
                # Not an address: the hop that passed it on vouches for nothing further.
                return key_of(hop)
            hop = address
            if not is_trusted(hop, trusted):
                return key_of(hop)
    return key_of(hop)


def client_of_scope(scope: dict[str, Any]) -> str | None:
    """The key of an ASGI connection's client (`scope["client"]`, its
    `X-Forwarded-For` headers where the peer is a trusted proxy); None
    where the server gives no IP address."""
    client = scope.get("client")
    if not client:
        return None
    trusted = get_settings().trusted_networks
    if not trusted:
        return client_key(client[0])
    # Only headers named exactly so: an ASGI server hands over names lowercased,
    # and `x_forwarded_for` is another header (Django's META would merge it).
    values = [value.decode("latin-1") for name, value in scope.get("headers", ()) if name == FORWARDED_FOR]
    return client_address(client[0], values, trusted)


def client_of_request(request: HttpRequest) -> str | None:
    """The key of a Django request's client, as `client_of_scope` says: from
    the ASGI scope under an ASGI server, else from `REMOTE_ADDR` and
    `HTTP_X_FORWARDED_FOR` (a WSGI server joins repeated headers with commas)."""
    scope = getattr(request, "scope", None)
    if scope is not None:
        return client_of_scope(scope)
    forwarded = request.META.get("HTTP_X_FORWARDED_FOR")
    return client_address(
        request.META.get("REMOTE_ADDR"), [forwarded] if forwarded else [], get_settings().trusted_networks
    )


def client_ip_of_request(request: HttpRequest) -> str | None:
    """`client_of_request` as an IP address, for a library that wants one
    (django-axes' `AXES_CLIENT_IP_CALLABLE`): an IPv6 client's /64 as the
    network's first address (`2001:db8:1:2::`)."""
    key = client_of_request(request)
    return None if key is None else key.split("/", 1)[0]


def limit_posts_per_address(name: str, rate: Callable[[], tuple[int, float]], what: str) -> Callable[..., Any]:
    """Decorate a view so that its POSTs are counted in the address window
    `name`, of `rate()` = (limit, window seconds; limit 0: off), read at each
    request. Past the limit a POST gets 429, a plain page saying when to try
    again and `Retry-After`, and the view does not run; other methods are
    not counted. `what` names the action on that page ("sign-ins")."""

    def decorate(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
        @functools.wraps(view)
        def limited(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
            if request.method == "POST":
                counter = address_window(name, *rate())
                client = client_of_request(request)
                # From a sync view: on the server's event loop (a new one where there is none).
                wait = async_to_sync(counter.ahit_now)(client) if counter is not None and client is not None else 0.0
                if wait > 0:
                    metrics.ADDRESS_THROTTLED.labels(name).inc()
                    return too_many(what, wait)
            return view(request, *args, **kwargs)

        return limited

    return decorate


def too_many(what: str, wait: float) -> HttpResponse:
    seconds = max(1, math.ceil(wait))
    response = HttpResponse(
        f"Too many {what} from your address. Try again in {seconds} seconds.\n",
        status=429,
        content_type="text/plain; charset=utf-8",
    )
    response["Retry-After"] = str(seconds)
    return response
