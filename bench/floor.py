"""The floor of the idle check: the server alone, with an app that accepts a WebSocket and waits for its end.

No Django, no Channels and nothing of the app's: what an idle socket costs
daphne or uvicorn as installed, before any application keeps anything of its
own. The idle check (`python -m bench`) holds as many sockets here as on the
full path, so that the full path's kB a socket reads against what the server
itself keeps. Every HTTP request is answered 200 (the bench's readiness probe
asks `/healthz`).
"""

from __future__ import annotations

from typing import Any


async def application(scope: dict[str, Any], receive: Any, send: Any) -> None:
    if scope["type"] == "websocket":
        await receive()  # websocket.connect
        await send({"type": "websocket.accept"})
        while (await receive())["type"] != "websocket.disconnect":
            pass
    elif scope["type"] == "http":
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/plain")]})
        await send({"type": "http.response.body", "body": b"ok"})
    elif scope["type"] == "lifespan":
        while (await receive())["type"] == "lifespan.startup":
            await send({"type": "lifespan.startup.complete"})
        await send({"type": "lifespan.shutdown.complete"})
