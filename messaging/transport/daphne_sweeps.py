"""Daphne's periodic sweeps, visiting only the connections that have something due.

Daphne keeps every connection in `Server.connections` and walks all of them
twice over: each second (`application_checker`: reap a finished application,
cancel one that outlives its closed connection by `application_close_timeout`,
forget a connection that is closed and reaped) and every two seconds
(`timeout_checker`: each protocol's `check_timeouts`, which for a WebSocket
rejects a handshake older than `websocket_connect_timeout`, closes a socket
older than `websocket_timeout` and sends a ping once `ping_interval` has
passed since the last). With 10,000 idle sockets the two walks were a third
of the process's CPU (docs/PERFORMANCE.md, "Idle sockets"), all of it on
connections with nothing to do.

`sweep_only_due_connections()` keeps both methods' work and their periods
and changes only whom they visit:

- the application checker runs daphne's own body over the connections that
  can have changed since the last pass: those whose application finished
  (a done callback), those that disconnected, and those whose
  `application_close_timeout` after disconnecting has run out;
- the timeout checker calls `check_timeouts` on a WebSocket when its next
  deadline (the handshake's, the ping's, `websocket_timeout`) has come, kept
  in a wheel of two-second slots, and on every other connection (HTTP
  requests, event streams) each pass, as daphne does;
- the wheel also keeps a pong's deadline where daphne_pings.py made it a
  `PongDeadline` rather than autobahn's timer (`keeps_pong_deadlines` says
  which servers it can): a socket whose deadline has passed is dropped as
  autobahn's timer drops it (`onAutoPingTimeout`), by the first pass after
  it, so within two seconds of `ping_timeout` and never before.

So an idle socket is visited once per `ping_interval`, to be pinged, not 30
times. Deadlines are met within the same two seconds as daphne's. It also
gives each connection daphne_queues.py's lighter queue, before it wraps
`create_application` (the wrapper hears when the application finishes).

Call it from the ASGI module daphne serves, beside
`allow_protocol_close_codes()` (messaging/transport/daphne_compat.py, whose
`adapt_to_daphne` calls it again once a socket opens). Under another server
it does nothing. Applied to a server already running, its first pass visits
every connection once and takes it from there.
"""

from __future__ import annotations

import math
import sys
import time
from collections import deque
from typing import Any

from .daphne_queues import queue_lightly
from .versions import checked_daphne

# Daphne's own period for `timeout_checker` (server.py: `callLater(2, ...)`).
SLOT_SECONDS = 2.0


class Sweeps:
    """What a daphne server's two sweeps are due to visit.

    `reap`: connections whose application finished or whose socket closed
    since the last application pass; `closing`: closed connections in the
    order they closed, with when their application must be done by.
    `slots`: the wheel, WebSocket connections by the two-second slot of their
    next deadline (`slot_of` says which, to take one out when it closes);
    `others`: every other connection, visited each timeout pass.
    """

    __slots__ = ("websocket", "reap", "closing", "slots", "slot_of", "others", "swept_to")

    def __init__(self, websocket: type, connections: dict[Any, Any], now: float) -> None:
        self.websocket = websocket
        self.reap: set[Any] = set(connections)
        self.closing: deque[tuple[float, Any]] = deque()
        self.slots: dict[int, dict[Any, None]] = {}
        self.slot_of: dict[Any, int] = {}
        self.others: dict[Any, None] = {}
        self.swept_to = slot(now) - 1
        # Applied to a running server: each connection is visited once, then when due.
        for protocol in connections:
            self.connected(protocol, now)

    def connected(self, protocol: Any, now: float) -> None:
        if isinstance(protocol, self.websocket):
            self.schedule(protocol, now)
        else:
            self.others[protocol] = None

    def disconnected(self, protocol: Any, close_timeout: float, now: float) -> None:
        self.reap.add(protocol)
        self.closing.append((now + close_timeout, protocol))
        self.others.pop(protocol, None)
        at = self.slot_of.pop(protocol, None)
        if at is not None:
            self.slots[at].pop(protocol, None)

    def finished(self, protocol: Any) -> None:
        self.reap.add(protocol)

    def to_reap(self, now: float) -> set[Any]:
        """The connections the application pass visits now; taken."""
        closing = self.closing
        while closing and closing[0][0] <= now:
            self.reap.add(closing.popleft()[1])
        reap, self.reap = self.reap, set()
        return reap

    def schedule(self, protocol: Any, deadline: float | None) -> None:
        """Visit `protocol` in the first timeout pass after `deadline` (None: not again)."""
        at = self.slot_of.pop(protocol, None)
        if at is not None:
            self.slots[at].pop(protocol, None)
        if deadline is None:
            return
        # Never the pass under way or one already made: the next at the earliest.
        at = max(slot(deadline), self.swept_to + 1)
        self.slots.setdefault(at, {})[protocol] = None
        self.slot_of[protocol] = at

    def due(self, now: float) -> list[Any]:
        """The connections the timeout pass visits now: every WebSocket whose slot has come, and the rest."""
        visit = list(self.others)
        upto = slot(now)
        for at in range(self.swept_to + 1, upto + 1):
            for protocol in self.slots.pop(at, ()):
                del self.slot_of[protocol]
                visit.append(protocol)
        self.swept_to = max(self.swept_to, upto)
        return visit


class Reaped:
    """The done callback of a connection's application: the next application pass reaps the connection.

    One a socket, for its life: two slots (48 bytes) where a closure took 288."""

    __slots__ = ("sweeps", "protocol")

    def __init__(self, sweeps: Sweeps, protocol: Any) -> None:
        self.sweeps = sweeps
        self.protocol = protocol

    def __call__(self, _application: Any) -> None:
        self.sweeps.finished(self.protocol)


class PongDeadline:
    """When the pong of a ping must have come, kept by the wheel rather than by a timer of its own.

    It stands where autobahn keeps its pong's timer (`autoPingTimeoutCall`),
    so each of autobahn's ways of ending the wait (the pong, a data frame
    when `autoPingRestartOnAnyTraffic`, the connection lost) ends it by
    `cancel()`, as they end the timer. The timeout pass drops the socket
    once a deadline still `due` has passed.
    """

    __slots__ = ("due",)

    def __init__(self, due: float) -> None:
        self.due: float | None = due

    def cancel(self) -> None:
        self.due = None


def slot(moment: float) -> int:
    return math.floor(moment / SLOT_SECONDS)


def pong_due(protocol: Any) -> float | None:
    """When the pong a WebSocket waits for must have come by, if the wheel keeps that deadline."""
    waiting: object = protocol.autoPingTimeoutCall
    return waiting.due if isinstance(waiting, PongDeadline) else None


def next_deadline(server: Any, protocol: Any) -> float | None:
    """When the timeout pass next has something to do for a WebSocket connection.

    `check_timeouts` (daphne's ws_protocol.py) for the handshake, the ping and
    `websocket_timeout`; the drop for a pong that has not come. The pong's
    deadline holds in any state: one can be waiting still while the socket closes.
    """
    # Optional floats, not a list: this runs on every visit, once per ping of every socket.
    due = pong_due(protocol)
    if protocol.state == protocol.STATE_CONNECTING:
        due = earliest(due, protocol.socket_opened + server.websocket_connect_timeout)
    elif protocol.state == protocol.STATE_OPEN:
        due = earliest(due, protocol.last_ping + server.ping_interval)
    if server.websocket_timeout >= 0:
        due = earliest(due, protocol.socket_opened + server.websocket_timeout)
    return due


def earliest(due: float | None, other: float) -> float:
    return other if due is None or other < due else due


def keeps_pong_deadlines(server: Any) -> bool:
    """Whether `server`'s timeout pass is this module's, the one that drops a socket whose `PongDeadline` has passed."""
    return getattr(type(server).timeout_checker, "keeps_pong_deadlines", False) is True


def sweeps_of(server: Any) -> Sweeps:
    sweeps: Sweeps | None = server.__dict__.get("_due_sweeps")
    if sweeps is None:
        websocket = sys.modules["daphne.ws_protocol"].WebSocketProtocol
        sweeps = server._due_sweeps = Sweeps(websocket, server.connections, time.time())
    return sweeps


def sweep_only_due_connections() -> None:
    """Make daphne's two sweeps visit only the connections with something due; once, under daphne 4 only."""
    server_module = sys.modules.get("daphne.server")
    ws_module = sys.modules.get("daphne.ws_protocol")
    if server_module is None or ws_module is None:  # another server, or daphne not loaded yet
        return
    if not checked_daphne():
        return  # a daphne this was not checked on: its sweeps may not be what this replaces
    Server = server_module.Server
    if getattr(Server.application_checker, "due_only", False):
        return
    # The lighter queue first (daphne_queues.py), so that what is wrapped below is it.
    queue_lightly()
    reactor = server_module.reactor
    every_connection = Server.application_checker
    connected, disconnected, created = (
        Server.protocol_connected,
        Server.protocol_disconnected,
        Server.create_application,
    )

    def protocol_connected(self: Any, protocol: Any) -> None:
        connected(self, protocol)
        sweeps_of(self).connected(protocol, time.time())

    def protocol_disconnected(self: Any, protocol: Any) -> None:
        disconnected(self, protocol)
        sweeps_of(self).disconnected(protocol, self.application_close_timeout, time.time())

    def create_application(self: Any, protocol: Any, scope: dict[str, Any]) -> Any:
        queue = created(self, protocol, scope)
        instance = self.connections[protocol].get("application_instance")
        if instance is not None:
            instance.add_done_callback(Reaped(sweeps_of(self), protocol))
        return queue

    def application_checker(self: Any) -> None:
        # Daphne's own pass over the connections that may have something to
        # reap, cancel or forget. It deletes from the dict it is given, and
        # schedules the next pass itself.
        everyone = self.connections
        visit = {p: everyone[p] for p in sweeps_of(self).to_reap(time.time()) if p in everyone}
        visited = list(visit)
        self.connections = visit
        try:
            every_connection(self)
        finally:
            self.connections = everyone
            for protocol in visited:
                if protocol not in visit:  # forgotten by daphne's pass
                    del everyone[protocol]

    def timeout_checker(self: Any) -> None:
        sweeps, now = sweeps_of(self), time.time()
        for protocol in sweeps.due(now):
            if protocol not in self.connections:
                continue
            websocket = isinstance(protocol, sweeps.websocket)
            pong = pong_due(protocol) if websocket else None
            if pong is not None and pong <= now:
                # As autobahn's timer would: dropped, unclean, the wait ended. It
                # has no deadline left but `websocket_timeout`'s, and its
                # disconnect, a turn of the reactor later, takes it off the wheel.
                protocol.onAutoPingTimeout()
            else:
                protocol.check_timeouts()
            if websocket:
                sweeps.schedule(protocol, next_deadline(self, protocol))
        reactor.callLater(SLOT_SECONDS, self.timeout_checker)

    application_checker.due_only = True  # type: ignore[attr-defined]
    timeout_checker.keeps_pong_deadlines = True  # type: ignore[attr-defined]
    Server.protocol_connected = protocol_connected
    Server.protocol_disconnected = protocol_disconnected
    Server.create_application = create_application
    Server.application_checker = application_checker
    Server.timeout_checker = timeout_checker
