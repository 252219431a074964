"""Daphne's keepalive pings written to the socket at once, and their pongs read at once.

Daphne pings every open WebSocket once per `--ping-interval` (autobahn's
`_sendAutoPing`, which keeps the payload to match the pong against and arms
`--ping-timeout`). For an idle socket that ping and its pong are all it
costs, and most of that was machinery around a few bytes. py-spy on a daphne
process pinging 5,000 idle sockets every 2 s put 600 of its 1,306 samples in
Twisted's write path (the ping's bytes buffered, the socket's writer
registered with epoll, a turn of the loop, the writer unregistered), 34 in
building the frames; and the pong went through autobahn's whole frame
parser (a frame header object, an unmasking object, the control frame's
dispatch) to find 12 bytes it already knew (docs/PERFORMANCE.md, "Idle
sockets").

`ping_plainly()` changes both ends and nothing of what they mean:

- a ping frame is written with `write_now` (messaging/transport/servers/daphne.py),
  as `DAPHNE_DIRECT_WRITES` writes text frames: to the socket at once while
  the transport holds nothing unsent, through the transport otherwise (after
  what waits, so frames keep their order). Unlike a text frame, a ping has
  nothing to share a packet with (it goes once per interval, whatever else
  the socket sends), so this is not a setting;
- a read that is exactly the pong of the ping in flight (one masked pong
  frame whose payload is autobahn's pending one, nothing else buffered) is
  taken as autobahn takes it: the ping's timeout cancelled, nothing pending.
  Any other read, a pong split over two reads or with another frame behind
  it included, goes to autobahn's parser as before;
- where daphne's sweeps are daphne_sweeps.py's too, the ping is made with
  less (`send_auto_ping`: autobahn's payload, packed at once, and no debug
  line) and its pong's deadline is a `PongDeadline` their wheel keeps, not a
  txaio timer armed for each ping and cancelled by its pong: with 5,000
  sockets pinged every 2 s that timer was 11 % of the process's busy
  samples, the rest of autobahn's `_sendAutoPing` 5 %. The wheel drops a
  socket at the first pass after its deadline: within two seconds of
  `--ping-timeout`, never before (autobahn's timer, quantized to whole
  seconds, fired up to one early). A ping unanswered keeps its deadline
  through the pings after it, as autobahn's first timer runs on when the
  next is armed; a pong to the latest, or a data frame, ends the wait
  (autobahn's first timer, once the next was armed, could not be ended).

Autobahn still chooses the payload and the ways a pong's wait ends. A
connection whose frames autobahn writes or reads otherwise (TLS, masking,
frame or octet logging, its own queue of chopped data, `autoPingInterval`)
keeps autobahn's own ways, and a daphne whose timeout pass is not the
wheel's keeps autobahn's `_sendAutoPing` and its timers. Each ping counts in
`messaging_keepalive_pings_total{server="daphne"}`. The consumer
applies it as its first socket opens (`adapt_to_daphne`): pings only go to
open sockets. Under another server, or a daphne this was not checked on, it
does nothing.
"""

from __future__ import annotations

import os
import struct
import sys
import time
from typing import Any

from ..ops import metrics
from .daphne_sweeps import PongDeadline, keeps_pong_deadlines
from .servers.daphne import plain_tcp, write_now, writes_plainly
from .versions import checked_daphne

# RFC 6455 5.5: a control frame's payload is at most 125 bytes, so its length is one byte.
LARGEST_PING = 125
# FIN and opcode 9 (ping); a server's frames are not masked.
PING_HEADER = b"\x89"
# FIN and opcode 10 (pong); a client's frames are masked: the mask bit, then a four-byte key.
PONG_HEADER = 0x8A
MASKED = 0x80
PONG_OVERHEAD = 2 + 4
# An automatic ping's payload begins as autobahn's does: the time it was sent
# (nanoseconds) and its number; random bytes fill it to `autoPingSize`.
PING_STAMP = struct.Struct(">QL")
PINGS_COUNTED = metrics.KEEPALIVE_PINGS.labels("daphne")


def ping_frame(payload: bytes) -> bytes:
    return PING_HEADER + bytes((len(payload),)) + payload


def ping_plainly() -> None:
    """Make daphne write its WebSocket pings at once and read their pongs at once where it can, and leave their
    pongs' deadlines to daphne_sweeps.py's wheel where that runs; once, under daphne 4."""
    module = sys.modules.get("daphne.ws_protocol")
    if module is None:  # another server, or daphne not loaded yet
        return
    if not checked_daphne():
        return  # a daphne this was not checked on: its pings may not be autobahn's auto-pings
    WebSocketProtocol = module.WebSocketProtocol
    buffered_ping, parsed_read = WebSocketProtocol.sendPing, WebSocketProtocol.dataReceived
    if getattr(buffered_ping, "plainly", False):
        return
    timed_auto_ping = WebSocketProtocol._sendAutoPing

    def _sendAutoPing(self: Any) -> None:
        if pings_plainly(self) and keeps_pong_deadlines(self.server):
            send_auto_ping(self)
        else:
            timed_auto_ping(self)
        PINGS_COUNTED.inc()

    def sendPing(self: Any, payload: bytes | None = None) -> None:
        payload = payload or b""
        if self.state != self.STATE_OPEN or len(payload) > LARGEST_PING or self.send_queue or not pings_plainly(self):
            buffered_ping(self, payload or None)
            return
        transport = self.transport
        rest = write_now(transport, ping_frame(payload))
        if rest:
            transport.write(rest)

    def dataReceived(self: Any, data: bytes) -> None:
        if not took_pong(self, data):
            parsed_read(self, data)

    sendPing.plainly = True  # type: ignore[attr-defined]
    WebSocketProtocol.sendPing = sendPing
    WebSocketProtocol.dataReceived = dataReceived
    WebSocketProtocol._sendAutoPing = _sendAutoPing


def pings_plainly(protocol: Any) -> bool:
    """Whether autobahn writes and reads this connection's control frames as this module does, on plain TCP.

    Asked once per connection (none of it changes while it lives), not once a ping."""
    plainly: bool | None = protocol.__dict__.get("_pings_plainly")
    if plainly is None:
        plainly = protocol._pings_plainly = (
            writes_plainly(protocol) and plain_tcp(protocol.transport) and not protocol.autoPingInterval
        )
    return plainly


def send_auto_ping(protocol: Any) -> None:
    """Autobahn's automatic ping (`_sendAutoPing`), its pong's deadline a `PongDeadline` for daphne's sweeps to keep."""
    protocol.autoPingPendingCall = None
    sent = protocol.autoPingPendingSent = time.time_ns()
    number = protocol.autoPingPendingSeq = protocol.autoPingPendingSeq + 1
    payload = PING_STAMP.pack(sent, number)
    if protocol.autoPingSize > PING_STAMP.size:
        payload += os.urandom(protocol.autoPingSize - PING_STAMP.size)
    protocol.autoPingPending = payload
    protocol.sendPing(payload)
    if not protocol.autoPingTimeout:
        return
    waiting: object = protocol.autoPingTimeoutCall
    # Autobahn arms a timer each ping and leaves the earlier ones running: a
    # peer that answers nothing is dropped `autoPingTimeout` after the first
    # ping it left unanswered, not after the latest.
    if not (isinstance(waiting, PongDeadline) and waiting.due is not None):
        protocol.autoPingTimeoutCall = PongDeadline(sent / 1e9 + protocol.autoPingTimeout)


def took_pong(protocol: Any, data: bytes) -> bool:
    """Whether `data` was exactly the pong of the ping in flight, taken as autobahn would take it."""
    pending: bytes | None = protocol.autoPingPending
    if (
        pending is None
        or len(data) != PONG_OVERHEAD + len(pending)
        or data[0] != PONG_HEADER
        or data[1] != MASKED | len(pending)
        or protocol.data
        or protocol.current_frame is not None
        or protocol.state != protocol.STATE_OPEN
        or not pings_plainly(protocol)
        or unmasked(data[2:6], data[6:]) != pending
    ):
        return False
    # What autobahn's processControlFrame does with its pending pong (daphne
    # has no `onAutoPong` or `onPong` of its own, nor an `autoPingInterval`).
    protocol.trafficStats.incomingOctetsWireLevel += len(data)
    if protocol.autoPingTimeoutCall:
        protocol.autoPingTimeoutCall.cancel()
    protocol.autoPingPending = None
    protocol.autoPingPendingSent = None
    protocol.autoPingTimeoutCall = None
    return True


def unmasked(key: bytes, payload: bytes) -> bytes:
    """A client frame's `payload` unmasked with its four-byte `key` (RFC 6455 5.3)."""
    size = len(payload)
    mask = (key * (size // 4 + 1))[:size]
    return (int.from_bytes(payload, "big") ^ int.from_bytes(mask, "big")).to_bytes(size, "big")
