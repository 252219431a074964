"""Per-client-address windows: how often one address may do something rare, over every process.

The handshake throttle (messaging/transport/handshakes.py) and the guest sign-in
throttle (`limit_posts_per_address` on `messaging.views.guest_login`) count
here, each in a window of its own: `limit` hits per address per `window`
seconds.

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

An address is the client's IP as the ASGI server reports it (the scope's
`client`, a view's `REMOTE_ADDR`). Behind a reverse proxy that is the
proxy's, for every client: have the server take it from the proxy's header
(daphne `--proxy-headers`, uvicorn `--proxy-headers --forwarded-allow-ips`).
An IPv6 client counts as its /64 network, the block one host is usually
given, so it cannot walk through the window one address at a time.
"""
from __future__ import annotations

import functools
import ipaddress
import math
from typing import Any, Callable

from asgiref.sync import async_to_sync
from django.http import HttpRequest, HttpResponse

from ..conf import get_settings
from ..ops import metrics
from .ratelimit import LocalWindow, RedisWindow

_windows: dict[str, tuple[tuple, LocalWindow]] = {}


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
            counter = RedisWindow(conf.REDIS_URL, limit, window, prefix=f"messaging:{name}:",
                                  timeout=conf.REDIS_TIMEOUT, max_keys=conf.RATE_WINDOW_KEYS)
        else:
            counter = LocalWindow(limit, window, max_keys=conf.RATE_WINDOW_KEYS)
        cached = _windows[name] = (key, counter)
    return cached[1]


def client_key(host: Any) -> str | None:
    """What a window counts for a client's `host`: the IPv4 address, an IPv6
    address's /64 network, the text of anything else; None without one."""
    if not host or not isinstance(host, str):
        return None
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return host[:64]
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:
            return str(address.ipv4_mapped)
        return str(ipaddress.IPv6Network((address, 64), strict=False))
    return str(address)


def scope_client(scope: dict) -> str | None:
    """The window key of an ASGI connection's client (`scope["client"]`), None if the server gives none."""
    client = scope.get("client")
    return client_key(client[0]) if client else None


def limit_posts_per_address(name: str, rate: Callable[[], tuple[int, float]], what: str) -> Callable:
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
                client = client_key(request.META.get("REMOTE_ADDR"))
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
        status=429, content_type="text/plain; charset=utf-8",
    )
    response["Retry-After"] = str(seconds)
    return response
