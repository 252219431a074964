"""Let daphne send the close codes PROTOCOL.md gives the server.

Autobahn, daphne's WebSocket layer, lets an application close a socket only
with 1000 or 3000-4999: the rule browsers apply to *clients* (django/daphne#374).
Any other code raises inside daphne, the application instance dies, and the
client sees 1011 instead. RFC 6455 (7.4.1) defines 1003, 1008 and 1009 for an
endpoint to send, and the protocol closes with them; so daphne's close is
widened to the codes a server may send, and stays as it was for the rest.

Daphne's own size limit (`--websocket-max-frame-size`, set to
`MAX_FRAME_BYTES` in deployment) refuses an oversized frame from its header,
before buffering it, but autobahn then drops the TCP connection without a
close frame: the client sees 1006, not the protocol's 1009. It is made to
close with 1009, as the consumer does for the frames that reach it.

Autobahn also formats the arguments of a debug line on every frame it sends
or receives (`hltype`, `hlval`: colours through click), whether or not debug
logging is on: about 5 % of a busy server's CPU. `defer_autobahn_log_formatting()`
makes those arguments format only when a line is written.

Call `allow_protocol_close_codes()` and `defer_autobahn_log_formatting()`
from the ASGI module daphne serves. Each changes daphne or autobahn only if
it is loaded: daphne imports them before it loads the application. Under
another server they import nothing, since importing daphne would load
Twisted, autobahn and OpenSSL into the process for nothing (25 MB under
uvicorn). The consumer calls both again as its first socket opens
(`adapt_to_daphne`), for an application imported before its daphne server.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

from .daphne_pings import ping_plainly
from .daphne_reads import read_plainly
from .daphne_sweeps import sweep_only_due_connections

# RFC 6455 7.4.1 codes a server may put in a close frame; 1000 and 3000-4999
# daphne already lets through.
SERVER_CLOSE_CODES = frozenset({1001, 1002, 1003, 1007, 1008, 1009, 1011})


def allow_protocol_close_codes() -> None:
    module = sys.modules.get("daphne.ws_protocol")
    if module is None:  # another ASGI server, or daphne not loaded yet: nothing to widen
        return
    WebSocketProtocol = module.WebSocketProtocol
    original = WebSocketProtocol.serverClose
    if getattr(original, "widened", False):
        return

    def serverClose(self: Any, code: int | None = None) -> None:
        if code in SERVER_CLOSE_CODES:
            # sendCloseFrame is what autobahn itself uses for protocol codes
            # (1009 on an oversized frame); it skips only the client-side check.
            self.sendCloseFrame(code=code, isReply=False)
        else:
            original(self, code)

    def _max_message_size_exceeded(self: Any, size: int, limit: int, reason: str) -> None:
        # As autobahn's failByDrop=False would, for this failure only: the rest
        # of the frame is read and discarded (failedByMe), the close frame sent.
        self.failedByMe = True
        self.sendCloseFrame(code=1009, isReply=False)

    serverClose.widened = True  # type: ignore[attr-defined]
    WebSocketProtocol.serverClose = serverClose
    WebSocketProtocol._max_message_size_exceeded = _max_message_size_exceeded


class Deferred:
    """A log line's argument, formatted only when the line is."""

    __slots__ = ("render", "args", "kwargs")

    def __init__(self, render: Callable[..., str], args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        self.render = render
        self.args = args
        self.kwargs = kwargs

    def __str__(self) -> str:
        return self.render(*self.args, **self.kwargs)

    def __format__(self, spec: str) -> str:
        return format(str(self), spec)


def defer_autobahn_log_formatting() -> None:
    modules = [sys.modules.get(name) for name in ("autobahn.websocket.protocol", "autobahn.twisted.websocket")]
    for module in modules:
        if module is None:  # no daphne serving, or not loaded yet: nothing to defer
            continue
        for name in ("hltype", "hlval"):
            render = getattr(module, name, None)
            # Absent in another autobahn version; already deferred on a second call.
            if render is not None and not isinstance(render, Deferring):
                setattr(module, name, Deferring(render))


class Deferring:
    """`render` in place of itself, deferred: calls return a `Deferred`."""

    __slots__ = ("render",)

    def __init__(self, render: Callable[..., str]) -> None:
        self.render = render

    def __call__(self, *args: Any, **kwargs: Any) -> Deferred:
        return Deferred(self.render, args, kwargs)


_adapted = False


def adapt_to_daphne() -> None:
    """The changes, and daphne_sweeps.py's, daphne_pings.py's and daphne_reads.py's, once daphne is loaded:
    from a socket's connect, where it is if it serves."""
    global _adapted
    if _adapted or "daphne.ws_protocol" not in sys.modules:
        return
    allow_protocol_close_codes()
    defer_autobahn_log_formatting()
    sweep_only_due_connections()
    ping_plainly()
    read_plainly()
    _adapted = True
