"""An ASGI app for daphne's sweeps under test (tests/e2e/test_daphne_sweeps.py), served by a real daphne.

It applies `sweep_only_due_connections()` as project/asgi.py does, counts
the WebSocket visits of daphne's timeout pass (`check_timeouts` calls), and
answers `GET /state` with them, the server's connections and the
applications daphne cancelled. Each WebSocket path is one way an
application ends: `/ws/echo` echoes until the client leaves, `/ws/raise`
raises once accepted, `/ws/linger` ignores its disconnect until cancelled,
(each echoing socket answers `queue?` with the type of the queue daphne
hands it its events through),
`/ws/never-accept` never answers the handshake.
"""

from __future__ import annotations

import asyncio
import sys

from messaging.transport.daphne_sweeps import sweep_only_due_connections
from tests.support.daphne_apps import answer_http, count_calls

sweep_only_due_connections()

counts = {"ws_visits": 0, "cancelled": 0}
count_calls(sys.modules["daphne.ws_protocol"].WebSocketProtocol, "check_timeouts", counts, "ws_visits")


async def http(scope, receive, send):
    await answer_http(scope, send, counts)


async def websocket(scope, receive, send):
    await receive()  # websocket.connect
    path = scope["path"]
    if path == "/ws/never-accept":
        await asyncio.Event().wait()
    await send({"type": "websocket.accept"})
    if path == "/ws/raise":
        raise RuntimeError("the application fails once accepted")
    while True:
        event = await receive()
        if event["type"] == "websocket.disconnect":
            break
        text = event.get("text") or ""
        if text == "queue?":  # the queue daphne handed this connection's events through
            text = type(receive.__self__).__name__
        await send({"type": "websocket.send", "text": text})
    if path == "/ws/linger":
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            counts["cancelled"] += 1
            raise


async def application(scope, receive, send):
    if scope["type"] == "http":
        await http(scope, receive, send)
    elif scope["type"] == "websocket":
        await websocket(scope, receive, send)
