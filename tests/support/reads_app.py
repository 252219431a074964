"""An ASGI app for daphne's reads under test (tests/e2e/test_daphne_reads.py), served by a real daphne.

It applies `read_plainly()` at import, as the consumer's first socket does
(not with `TWISTEDS_OWN_READS` in its environment), and counts the reads
Twisted's reactor wraps in its legacy log context (`callWithLogger`, looked
up by the reactor as it registers a reader; its writes are not counted) and those daphne's WebSocket
protocol is given (`dataReceived`). A read beginning with `RAISE` makes
`dataReceived` raise before any parsing, as a bug in a protocol would.
A read beginning with `RAISE AND LOSE` makes the
protocol's `connectionLost` raise too, after daphne's own: an error that
escapes the reactor's read. `/ws/echo` echoes each text frame; `GET /state` answers with the counts.
"""

from __future__ import annotations

import os
import sys

from messaging.transport.daphne_reads import read_plainly
from tests.support.daphne_apps import answer_frames, answer_http, count_calls

if not os.environ.get("TWISTEDS_OWN_READS"):
    read_plainly()
    read_plainly()  # twice is harmless: the reactor's registration is replaced once

counts = {"with_log_context": 0, "reads": 0}


def reads_a_socket(logger, method, selectable, read) -> bool:
    # Only a connection's reads: the reactor's writes keep their context, and so
    # do the listening port's reads (its accepts).
    return read and isinstance(selectable, sys.modules["twisted.internet.tcp"].Connection)


count_calls(
    sys.modules["twisted.internet.asyncioreactor"], "callWithLogger", counts, "with_log_context", when=reads_a_socket
)
WebSocketProtocol = sys.modules["daphne.ws_protocol"].WebSocketProtocol
count_calls(WebSocketProtocol, "dataReceived", counts, "reads")
received = WebSocketProtocol.dataReceived


lost = WebSocketProtocol.connectionLost


def dataReceived(self, data: bytes) -> None:
    if data.startswith(b"RAISE"):
        self.raise_when_lost = data.startswith(b"RAISE AND LOSE")
        raise RuntimeError("a read the protocol could not take")
    received(self, data)


def connectionLost(self, reason) -> None:
    lost(self, reason)
    if getattr(self, "raise_when_lost", False):
        raise RuntimeError("a loss the protocol could not take")


WebSocketProtocol.dataReceived = dataReceived
WebSocketProtocol.connectionLost = connectionLost


async def application(scope, receive, send):
    if scope["type"] == "http":
        await answer_http(scope, send, counts)
    elif scope["type"] == "websocket":
        await answer_frames(receive, send, lambda text: send({"type": "websocket.send", "text": text}))
