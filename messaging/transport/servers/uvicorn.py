"""The uvicorn adapter: text frames written straight to uvicorn's connection, and asyncio's pushback.

Under uvicorn with websockets' Sans-I/O implementation (`--ws auto`, its
default when websockets is installed, or `--ws websockets-sansio`), an ASGI
`websocket.send` passes channels' consumer `send` and session middleware,
then uvicorn's `send`: an await of the protocol's `writable` event, the
checks of the handshake's and the close's state, websockets' `send_text`
(a `Frame`, its serialisation into a list of chunks) and the join of those
chunks before its bytes reach the asyncio transport. The generic buffer adds
a task per busy socket to await it (servers/asgi.py).

`UvicornSendBuffer` writes to the transport itself. On a connection with no
extension negotiated, a frame is what websockets' `ServerProtocol` would
write (`frames.frame_bytes`: a server's frames are unmasked, and uvicorn
never fragments). With permessage-deflate negotiated (uvicorn offers it
unless `--ws-per-message-deflate false`, and browsers accept it), websockets
compresses and frames each message: the buffer calls its `send_text` as
uvicorn's `send` does, without the hop. Uvicorn's `--ws-max-size` limits
only what it receives. A frame for a connection past its close (uvicorn's
`close_sent`, a close received, the connection lost) is lost with the
socket, as one in flight would be.

The transport calls the protocol's `pause_writing` once it holds more than
its high-water mark (64 KiB) unsent, and `resume_writing` once it holds
less than its low-water mark; the buffer puts its own in the protocol's
place, which still set uvicorn's `writable` event, so uvicorn's own sends
(the close, pings) wait as they did. Frames are written while the transport
is not paused and queued here while it is. What waits is counted exactly:
the queue plus the transport's `get_write_buffer_size()`.
"""

from __future__ import annotations

import asyncio
import sys
from typing import Any

from ..frames import encoded
from .asgi import OnOverflow, Send, WritingSendBuffer, refit, server_send
from .queues import ApplicationQueue, Flag
from .uvicorn_pings import SANS_IO, ping_on_a_wheel

KNOWN_ATTRIBUTES = (
    "conn",
    "transport",
    "writable",
    "handshake_complete",
    "initial_response",
    "close_sent",
    "disconnected",
)


def uvicorn_connection(send: Send) -> Any | None:
    """The uvicorn Sans-I/O WebSocket protocol behind an ASGI `send` once its handshake is done, or None."""
    # Uvicorn has imported the module if it is the server that serves this socket.
    module = sys.modules.get(SANS_IO)
    if module is None:
        return None
    send = server_send(send)
    protocol = getattr(send, "__self__", None)
    cls = module.WebSocketsSansIOProtocol
    if not isinstance(protocol, cls) or send.__func__ is not cls.send:  # type: ignore[attr-defined]
        return None
    # What the adapter reads of the protocol, in the version it was written for (uvicorn 0.54): another
    # version without one of them gets the generic buffer rather than an error per frame.
    if not all(hasattr(protocol, name) for name in KNOWN_ATTRIBUTES) or not hasattr(protocol.conn, "extensions"):
        return None
    if not protocol.handshake_complete or protocol.initial_response is not None or protocol.transport is None:
        return None
    return protocol


def release_handshake(protocol: Any) -> None:
    """Let go of what uvicorn's connection keeps of its finished handshake.

    Uvicorn keeps the handshake's request and response (`request`,
    `response`) for the connection's life, and websockets' parser keeps the
    request too, as a local of the generator it parses frames with. Nothing
    reads them once the connection is open (the ASGI scope has its own copy
    of the headers): the response goes, and the request's headers are
    emptied, about 5 kB a socket. Its queue becomes a lighter one, its
    `writable` event a `Flag`, and its dict one that fits the 39 keys left on
    uvicorn 0.54 (`refit`).
    """
    request = getattr(protocol, "request", None)
    headers = getattr(request, "headers", None)
    if headers is not None and hasattr(headers, "clear"):
        headers.clear()
    if hasattr(protocol, "response"):
        protocol.response = None
    lighten_queue(protocol)
    lighten_writable(protocol)
    refit(protocol)


def lighten_queue(protocol: Any) -> None:
    """Give the connection an `ApplicationQueue` (queues.py) in place of uvicorn's `asyncio.Queue`, what waits in it kept.

    Uvicorn's `receive` reads the protocol's `queue` at each call, so the
    queue can change under it, but only while no `receive` waits on the old
    one: the adapter runs in the application's task, past the accept, and a
    queue with a getter (another task of the application's) is left as it is.
    """
    queue = getattr(protocol, "queue", None)
    if type(queue) is not asyncio.Queue or getattr(queue, "_getters", True):
        return
    lighter = ApplicationQueue()
    while not queue.empty():
        lighter.put_nowait(queue.get_nowait())
    protocol.queue = lighter


def lighten_writable(protocol: Any) -> None:
    """Give the connection a `Flag` (queues.py) in place of uvicorn's `writable` event, while it is set.

    Uvicorn's `send` awaits `writable` only while the transport pushes back
    (the event clear); a set event has no waiter to carry over, so it is
    replaced only then, and stays an `Event` on a uvicorn that has none.
    """
    writable = getattr(protocol, "writable", None)
    if type(writable) is asyncio.Event and writable.is_set() and not getattr(writable, "_waiters", True):
        protocol.writable = Flag(True)


class UvicornSendBuffer(WritingSendBuffer):
    """One uvicorn connection's frames: written while its transport takes them, queued while it pushes back."""

    adapter = "uvicorn"
    __slots__ = ("protocol", "transport", "conn", "open_state", "plain")

    def __init__(self, protocol: Any, send: Send, limit: int, on_overflow: OnOverflow) -> None:
        super().__init__(send, limit, on_overflow)
        self.protocol = protocol
        # An asyncio transport: uvicorn's `connection_made` sets it, and `uvicorn_connection` saw it set.
        self.transport: asyncio.Transport = protocol.transport
        self.conn = protocol.conn
        self.open_state = type(self.conn.state).OPEN
        # Extensions are negotiated in the handshake, which is done.
        self.plain = not self.conn.extensions
        self.paused = not protocol.writable.is_set()
        # The transport calls the protocol's; these call them in turn.
        protocol.pause_writing = self.pause_writing
        protocol.resume_writing = self.resume_writing
        release_handshake(protocol)
        ping_on_a_wheel(type(protocol))

    @property
    def framing(self) -> str:  # type: ignore[override]
        return "frames" if self.plain else "server"

    @property
    def waiting(self) -> int:
        return self.queued + self.transport.get_write_buffer_size()

    def write(self, text: str) -> None:
        protocol = self.protocol
        conn = self.conn
        # Past a close uvicorn sent or received, or the connection lost: lost with the socket.
        if protocol.close_sent or protocol.disconnected or conn.state is not self.open_state:
            return
        if self.plain:
            self.transport.write(encoded(text)[0])
        else:
            # What uvicorn's send does, without the ASGI hop.
            conn.send_text(text.encode())
            self.transport.write(b"".join(conn.data_to_send()))

    # asyncio's flow control, in the protocol's place.

    def pause_writing(self) -> None:
        self.paused = True
        type(self.protocol).pause_writing(self.protocol)

    def resume_writing(self) -> None:
        type(self.protocol).resume_writing(self.protocol)
        self.resumed()
