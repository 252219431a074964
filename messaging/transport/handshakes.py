"""The handshake throttle: WebSocket handshakes per client address, over every process.

`HandshakeThrottle` is ASGI middleware for the websocket stack. Past
`CONNECT_RATE` handshakes from one address (`client_of_scope`: the peer, or
the client a trusted proxy names) per `CONNECT_RATE_WINDOW`
(messaging/transport/addresses.py counts them), the handshake is refused before it is
accepted, which the server answers with HTTP 403, and counted as
`messaging_address_throttled_total{limit="connect"}`. Outermost on the
stack, a refused handshake costs its one Redis round trip and nothing else:
no session read, no database, no consumer.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from channels.security.websocket import WebsocketDenier

from ..conf import get_settings
from ..ops import metrics
from .addresses import address_window, client_of_scope

ASGIApp = Callable[
    [dict[str, Any], Callable[[], Awaitable[dict[str, Any]]], Callable[[dict[str, Any]], Awaitable[None]]],
    Awaitable[Any],
]


class HandshakeThrottle:
    """Refuses a WebSocket handshake from an address over its window; passes everything else to `app`."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(
        self,
        scope: dict[str, Any],
        receive: Callable[[], Awaitable[dict[str, Any]]],
        send: Callable[[dict[str, Any]], Awaitable[None]],
    ) -> Any:
        if scope["type"] == "websocket" and await handshake_over_limit(scope):
            metrics.ADDRESS_THROTTLED.labels("connect").inc()
            return await WebsocketDenier()(scope, receive, send)
        return await self.app(scope, receive, send)


async def handshake_over_limit(scope: dict[str, Any]) -> bool:
    """Count the handshake against its address's window; whether it is over `CONNECT_RATE`."""
    conf = get_settings()
    window = address_window("connect", conf.CONNECT_RATE, conf.CONNECT_RATE_WINDOW)
    client = client_of_scope(scope)
    if window is None or client is None:
        return False
    return await window.ahit_now(client) > 0
