"""An ASGI app for daphne's pings under test (tests/e2e/test_daphne_pings.py), served by a real daphne.

It applies `ping_plainly()` as the consumer's first socket does, counts the
pings daphne sends (autobahn's `_sendAutoPing`), the reactor's `addWriter`
calls (each a write Twisted left for the loop's next turn) and the reads
autobahn's frame parser took (`processData`), and answers `GET /state` with
them and the server's connections. `/ws/echo`
echoes each text frame; on `/ws/burst` a frame `"<count> <size>"` is answered
with `count` frames of `size` bytes, each starting with its number.
"""

from __future__ import annotations

import gc
import json
import sys

from messaging.transport.daphne_pings import ping_plainly

ping_plainly()
ping_plainly()  # twice is harmless: autobahn's ways are replaced once

counts = {"add_writer": 0, "pings": 0, "parsed": 0}
WebSocketProtocol = sys.modules["daphne.ws_protocol"].WebSocketProtocol
send_auto_ping, process_data = WebSocketProtocol._sendAutoPing, WebSocketProtocol.processData


def counted_send_auto_ping(self):
    counts["pings"] += 1
    return send_auto_ping(self)


def counted_process_data(self):
    counts["parsed"] += 1
    return process_data(self)


WebSocketProtocol._sendAutoPing = counted_send_auto_ping
WebSocketProtocol.processData = counted_process_data
reactor = sys.modules["twisted.internet.reactor"]
add_writer = reactor.addWriter


def counted_add_writer(writer):
    counts["add_writer"] += 1
    return add_writer(writer)


reactor.addWriter = counted_add_writer


def daphne_server():
    Server = sys.modules["daphne.server"].Server
    return next(thing for thing in gc.get_objects() if isinstance(thing, Server))


async def http(scope, receive, send):
    body = b"ok"
    if scope["path"] == "/state":
        body = json.dumps({**counts, "connections": len(daphne_server().connections)}).encode()
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"application/json")]})
    await send({"type": "http.response.body", "body": body})


async def websocket(scope, receive, send):
    await receive()  # websocket.connect
    await send({"type": "websocket.accept"})
    while True:
        event = await receive()
        if event["type"] == "websocket.disconnect":
            return
        text = event.get("text") or ""
        if scope["path"] != "/ws/burst":
            await send({"type": "websocket.send", "text": text})
            continue
        count, size = (int(n) for n in text.split())
        for n in range(count):
            await send({"type": "websocket.send", "text": f"{n:08d}".ljust(size, "x")})


async def application(scope, receive, send):
    if scope["type"] == "http":
        await http(scope, receive, send)
    elif scope["type"] == "websocket":
        await websocket(scope, receive, send)
