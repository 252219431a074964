"""An ASGI app for daphne's pings under test (tests/e2e/test_daphne_pings.py), served by a real daphne.

It applies `sweep_only_due_connections()` and `ping_plainly()` as the
consumer's first socket does (with `DAPHNES_OWN_SWEEPS` set in its
environment, `ping_plainly()` alone, under daphne's own sweeps), counts the
pings daphne sends (autobahn's `_sendAutoPing`), the reactor's `addWriter`
calls (each a write Twisted left for the loop's next turn), the reads
autobahn's frame parser took (`processData`), the txaio timers armed for a
pong (`call_later` of `onAutoPingTimeout`) and the sockets dropped for a
pong that did not come (`onAutoPingTimeout`), and answers `GET /state` with
them and the server's connections. `/ws/echo` echoes each text frame; on
`/ws/burst` a frame `"<count> <size>"` is answered with `count` frames of
`size` bytes, each starting with its number.
"""

from __future__ import annotations

import os
import sys

from txaio._common import _BatchedTimer

from messaging.transport.daphne_pings import ping_plainly
from messaging.transport.daphne_sweeps import sweep_only_due_connections
from tests.support.daphne_apps import answer_frames, answer_http, count_calls

if not os.environ.get("DAPHNES_OWN_SWEEPS"):
    sweep_only_due_connections()
ping_plainly()
ping_plainly()  # twice is harmless: autobahn's ways are replaced once

counts = {"add_writer": 0, "pings": 0, "parsed": 0, "pong_timers": 0, "pong_timeouts": 0}
WebSocketProtocol = sys.modules["daphne.ws_protocol"].WebSocketProtocol
count_calls(WebSocketProtocol, "_sendAutoPing", counts, "pings")
count_calls(WebSocketProtocol, "processData", counts, "parsed")
count_calls(WebSocketProtocol, "onAutoPingTimeout", counts, "pong_timeouts")
count_calls(sys.modules["twisted.internet.reactor"], "addWriter", counts, "add_writer")


def arms_a_pong_timer(timer, delay, call, *args, **kwargs) -> bool:
    return getattr(call, "__name__", "") == "onAutoPingTimeout"


count_calls(_BatchedTimer, "call_later", counts, "pong_timers", when=arms_a_pong_timer)


async def http(scope, receive, send):
    await answer_http(scope, send, counts)


async def websocket(scope, receive, send):
    async def answer(text: str) -> None:
        if scope["path"] != "/ws/burst":
            await send({"type": "websocket.send", "text": text})
            return
        count, size = (int(n) for n in text.split())
        for n in range(count):
            await send({"type": "websocket.send", "text": f"{n:08d}".ljust(size, "x")})

    await answer_frames(receive, send, answer)


async def application(scope, receive, send):
    if scope["type"] == "http":
        await http(scope, receive, send)
    elif scope["type"] == "websocket":
        await websocket(scope, receive, send)
