"""The WebSocket handshake's guards and sign-in, as one ASGI layer.

The stack `project/asgi.py` used to build, `HandshakeThrottle(SameOriginValidator(
AuthMiddlewareStack(URLRouter(...))))`, is six layers: the throttle, the origin
check, and channels' cookie, session and auth middleware. An ASGI layer awaits
the one inside it for the socket's whole life, so each keeps its coroutine
frame, and channels' three each keep their own copy of the scope (with
`InstanceSessionWrapper` around `send`): about 4 kB per open socket, 40 MB for
10,000 idle ones (docs/PERFORMANCE.md, "Idle sockets").

`SocketGate` decides the same things in the same order, each in a call that
returns before the socket's life begins, and hands the socket one scope:

1. the handshake throttle (`CONNECT_RATE`, messaging/transport/handshakes.py),
2. the `Origin` check (messaging/transport/origins.py),
3. the cookies (`scope["cookies"]`), the session of the session cookie
   (`scope["session"]`, a `SessionStore` that loads on first use) and the
   signed-in user (`scope["user"]`: the API token's, else the session's, read
   once more on a fresh connection after a failover: messaging/transport/auth.py).

A refused handshake is answered HTTP 403 before anything reads the session.
The separate layers stay, for a host that composes its own stack.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from importlib import import_module
from typing import Any

from channels.db import database_sync_to_async
from channels.security.websocket import WebsocketDenier
from django.conf import settings
from django.http.cookie import parse_cookie

from ..ops import metrics
from .auth import signed_in_user
from .handshakes import handshake_over_limit
from .header_pairs import share_header_pairs
from .origins import OriginValidator, SameOriginValidator

Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]


def cookies_of(scope: dict[str, Any]) -> dict[str, str]:
    """The handshake's cookies, parsed as channels' `CookieMiddleware` does (the first `Cookie` header)."""
    for name, value in scope.get("headers", ()):
        if name == b"cookie":
            return parse_cookie(value.decode("latin1"))
    return {}


class SocketGate:
    """The throttle, the origin check and the sign-in of a WebSocket handshake, then `inner` with one scope."""

    def __init__(self, inner: Any, origins: OriginValidator | None = None) -> None:
        self.inner = inner
        # The origin check's settings, read once, as `SameOriginValidator` does.
        self.origins = origins if origins is not None else SameOriginValidator(None)
        self.store = import_module(settings.SESSION_ENGINE).SessionStore

    async def __call__(self, scope: dict[str, Any], receive: Receive, send: Send) -> Any:
        if scope["type"] != "websocket":
            raise ValueError("SocketGate guards WebSocket connections only")
        if await self.refused(scope):
            return await WebsocketDenier()(scope, receive, send)
        socket = self.inner(await self.signed_in(scope), receive, send)
        # The socket lives on the gate's copy from here: this frame, waiting
        # out the socket's life, lets the server's scope go (with `PathRouter`
        # under a `ProtocolRouter`, nothing else holds it).
        del scope
        return await socket

    async def refused(self, scope: dict[str, Any]) -> bool:
        """Whether the handshake goes no further: over its address's rate, or from another origin."""
        if await handshake_over_limit(scope):
            metrics.ADDRESS_THROTTLED.labels("connect").inc()
            return True
        return not self.origins.allows(scope)

    async def signed_in(self, scope: dict[str, Any]) -> dict[str, Any]:
        """A copy of `scope` with the cookies, the session and the signed-in user, as channels' stack adds them."""
        # The connection keeps its headers as long as it lives: its common ones become the process's one copy.
        share_header_pairs(scope.get("headers"))
        cookies = cookies_of(scope)
        given = dict(scope, cookies=cookies, session=self.store(cookies.get(settings.SESSION_COOKIE_NAME)))
        given["user"] = await database_sync_to_async(signed_in_user)(given)
        # The same session, not yet loaded: what the sign-in decoded (about
        # 0.5 kB) is not kept for the socket's life; a consumer that reads the
        # session loads it then, as it would have the first time.
        given["session"] = self.store(given["session"].session_key)
        return given
