"""Uvicorn's keepalive pings rung by one timer a second for all of a process's connections.

Uvicorn's Sans-I/O WebSocket protocol pings each connection
`--ws-ping-interval` (20 s) after its last pong, with a timer of its own
(`schedule_ping`, a `loop.call_later` per connection). With 10,000 idle
sockets that is 500 timers a second, each firing in a turn of the loop of its
own: the loop wakes for every ping.

`ping_on_a_wheel()` puts a connection's next ping in the slot of the first
whole second of the loop's clock at or after the moment uvicorn would ping
it, and one timer per slot pings all of that slot's connections in one turn:
never early, at most `SLOT_SECONDS` late, which a keepalive does not notice.
A connection is in one slot at most (a ping scheduled again takes it out of
the one it was in), and stopping the keepalive (uvicorn's `stop_keepalive`,
at a close or a lost connection) takes it out as it cancelled the timer.
The pong's deadline stays uvicorn's own timer: armed by the ping and
cancelled by its pong, it fires only on a connection that did not answer.

`ring_uvicorn_pings_on_a_wheel()`, called as the ASGI module is imported
(project/asgi.py), applies it to uvicorn's Sans-I/O protocol before any
connection opens, so every ping is the wheel's, the first (armed by the
handshake) included. The uvicorn adapter (servers/uvicorn.py) applies it
too, as it adapts a connection, for a host project that does not call it:
there a connection's first ping, scheduled before the adapter ran, is
uvicorn's own timer. Only on the uvicorn it was checked on
(`CHECKED_UVICORN`); under another server, nothing.
"""

from __future__ import annotations

import asyncio
import importlib
import logging
import math
import sys
import weakref
from typing import Any

from ...ops import metrics
from ..versions import checked

log = logging.getLogger(__name__)

# Uvicorn's `schedule_ping`, `send_keepalive_ping` and `stop_keepalive` as this module reads them.
CHECKED_UVICORN = "0.54."
# The module of uvicorn's Sans-I/O WebSocket protocol (`--ws websockets-sansio`, or `auto` with websockets).
SANS_IO = "uvicorn.protocols.websockets.websockets_sansio_impl"
SLOT_SECONDS = 1
PINGS_COUNTED = metrics.KEEPALIVE_PINGS.labels("uvicorn")


class PingWheel:
    """One loop's connections due a ping, by the whole second of the loop's clock they are due at."""

    __slots__ = ("slots",)

    def __init__(self) -> None:
        # A dict per slot: connections in the order they were scheduled, taken out in O(1).
        self.slots: dict[int, dict[Any, None]] = {}

    def schedule(self, loop: asyncio.AbstractEventLoop, protocol: Any, delay: float) -> WheelEntry:
        at = math.ceil((loop.time() + delay) / SLOT_SECONDS) * SLOT_SECONDS
        slot = self.slots.get(at)
        if slot is None:
            slot = self.slots[at] = {}
            loop.call_at(at, self.ring, at)
        slot[protocol] = None
        return WheelEntry(self, at, protocol)

    def ring(self, at: int) -> None:
        """Ping every connection of slot `at`, each alone: one that fails does not keep the others waiting."""
        due = self.slots.pop(at, None)
        if not due:
            return
        for protocol in due:
            try:
                protocol.send_keepalive_ping()
            except Exception:
                log.exception("a keepalive ping failed")
        PINGS_COUNTED.inc(len(due))


class WheelEntry:
    """A connection's place in the wheel, cancelled as uvicorn cancels the timer it stands for."""

    __slots__ = ("wheel", "at", "protocol")

    def __init__(self, wheel: PingWheel, at: int, protocol: Any) -> None:
        self.wheel = wheel
        self.at = at
        self.protocol = protocol

    def cancel(self) -> None:
        slot = self.wheel.slots.get(self.at)
        if slot is not None:
            slot.pop(self.protocol, None)


# A wheel per event loop, gone with it.
_wheels: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, PingWheel] = weakref.WeakKeyDictionary()


def wheel_of(loop: asyncio.AbstractEventLoop) -> PingWheel:
    wheel = _wheels.get(loop)
    if wheel is None:
        wheel = _wheels[loop] = PingWheel()
    return wheel


def ping_on_a_wheel(protocol_class: type) -> None:
    """Make `protocol_class` (uvicorn's Sans-I/O protocol) schedule its pings on its loop's wheel; once."""
    schedule_ping = getattr(protocol_class, "schedule_ping", None)
    if schedule_ping is None or getattr(schedule_ping, "on_a_wheel", False):
        return
    if not checked("uvicorn", CHECKED_UVICORN) or not hasattr(protocol_class, "send_keepalive_ping"):
        return

    def on_a_wheel(self: Any) -> None:
        previous = self.ping_timer
        if previous is not None:
            previous.cancel()
        delay = max(0.0, (self.ping_interval or 0.0) - self.last_ping_rtt)
        self.ping_timer = wheel_of(self.loop).schedule(self.loop, self, delay)

    on_a_wheel.on_a_wheel = True  # type: ignore[attr-defined]
    protocol_class.schedule_ping = on_a_wheel  # type: ignore[attr-defined]


def ring_uvicorn_pings_on_a_wheel() -> None:
    """Under uvicorn, every connection's pings on its loop's wheel; under another server, nothing.

    Uvicorn's `run()` imports the app before its protocol classes (a worker of
    `--workers`, or of gunicorn, the other way round): so the Sans-I/O
    protocol's module is imported here, once uvicorn is, to be the class uvicorn
    then finds loaded, with its pings on the wheel before any handshake.
    """
    if "uvicorn.config" not in sys.modules:
        return
    try:
        module = importlib.import_module(SANS_IO)
    except ImportError:  # no websockets: uvicorn serves WebSockets with wsproto, or not at all
        return
    ping_on_a_wheel(module.WebSocketsSansIOProtocol)
