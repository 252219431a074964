"""What waits to be sent to one socket, and its limit (PROTOCOL.md 1.1, "Safety limits"), behind one interface per server.

A client that does not read makes the server hold what it is sent: in
Twisted's transport under daphne, in the ASGI server's buffers elsewhere. One
socket asking for backlogs it never read grew a server by 200 MB in seconds
(docs/RELIABILITY.md). Every frame of a socket passes through its send buffer:
frames go out as fast as the connection takes them and queue while it pushes
back; once more than `limit` bytes wait, the queue is dropped and the owner is
told (`on_overflow`), which closes the socket with 1008.

`send_buffer` picks the buffer by what is behind the ASGI `send`:

* `daphne.DaphneSendBuffer`: a daphne connection, written to directly and
  paused by Twisted's producer API;
* `uvicorn.UvicornSendBuffer`: a uvicorn connection of websockets' Sans-I/O
  implementation, written to directly and paused by asyncio's flow control;
* `asgi.SendBuffer`: anything else, through the ASGI `send`, by a task.

They share the frame encoding (messaging/transport/frames.py: a room's frame
encoded once for all members) and these semantics. Sending never waits, so a
slow socket holds back no other: a room's fan-out hands its frame to each
member in turn (messaging/transport/fanout.py). Frames keep their order, and a
close goes after the frames queued before it, except after an overflow, when
they are dropped. What a socket's own command sends (a join's backlog, which
may be larger than the limit) is paced instead: between its replies the
consumer awaits `room`, so it goes as fast as the client reads and only
others' frames can overflow the buffer.

A frame larger than `largest` (the limit, `MAX_SEND_BUFFER`: under every
server, daphne's own message size limit included, which applies to what
clients send) can never be sent within the limit: `send` refuses it, and the
owner sends a small error frame in its place. The app's answers that hold
lists are sized to fit it (`largest_frame`, messaging/chat/sizes.py).
"""

from __future__ import annotations

from ...ops import metrics
from .asgi import TRANSPORT_BUFFER, OnOverflow, Send, SendBuffer, payload_length
from .daphne import daphne_connection, daphne_send_buffer
from .uvicorn import UvicornSendBuffer, uvicorn_connection

__all__ = ["TRANSPORT_BUFFER", "SendBuffer", "payload_length", "send_buffer"]


def send_buffer(send: Send, limit: int, on_overflow: OnOverflow, *, adapters: bool = True) -> SendBuffer:
    """The send buffer of the connection behind an ASGI `send`, right after `websocket.accept`.

    `adapters` False (`SERVER_ADAPTERS`): the generic one, whatever the server.
    """
    buffer: SendBuffer
    if not adapters:
        buffer = SendBuffer(send, limit, on_overflow)
    elif (protocol := daphne_connection(send)) is not None:
        buffer = daphne_send_buffer(protocol, send, limit, on_overflow)
    elif (protocol := uvicorn_connection(send)) is not None:
        buffer = UvicornSendBuffer(protocol, send, limit, on_overflow)
    else:
        buffer = SendBuffer(send, limit, on_overflow)
    metrics.send_buffer_made(buffer.adapter, buffer.framing)
    return buffer
