"""A fault proxy for HTTP between two servers: real sockets, one request at a time, faults by a seeded draw.

    proxy = FaultProxy(upstream_port=b.port, seed=7).start()   # listens on proxy.port
    proxy.plan = {"drop": 0.05, "cut": 0.05, "reset": 0.05, "delay": 0.1}
    proxy.refuse(5)                                            # connections refused for 5 s
    proxy.counts                                               # what it did, per kind

Every request is read whole (h11) before it is decided; then, per the plan's
probabilities, it is

- `pass`ed: sent upstream, its answer sent back;
- `delay`ed: the same, after `delay` seconds (uniform within the range);
- `drop`ped: never sent upstream; the client's connection is held open, silent, until it gives up;
- `cut`: sent upstream and answered there, the answer thrown away and the
  client's connection closed: the request took effect, its answer is lost;
- `reset`: the client's connection reset (TCP RST), before the request is
  sent upstream or, as often, after it was answered there.

`refuse(seconds)` closes the listening socket (and every open connection)
for that long: a connect is refused, as to a server that is down. The
proxy runs on a thread of its own with its own event loop, so sync and
async tests alike drive it; a fresh upstream connection serves each
request.
"""

from __future__ import annotations

import asyncio
import random
import socket
import struct
import threading
import time
from collections import Counter

import h11

from messaging.testing.servers import free_port

KINDS = ("pass", "delay", "drop", "cut", "reset")
# Longest a dropped request's connection is held (the client gives up first).
HOLD = 60.0


class FaultProxy:
    def __init__(self, upstream_port: int, *, seed: int = 0, port: int | None = None) -> None:
        self.upstream_port = upstream_port
        self.port = port or free_port()
        self.rng = random.Random(seed)
        # Per kind of fault, its probability for each request; the rest pass.
        self.plan: dict[str, float] = {}
        self.delay = (0.05, 0.5)
        self.counts: Counter[str] = Counter()
        self.loop: asyncio.AbstractEventLoop | None = None
        self.server: asyncio.AbstractServer | None = None
        self.writers: set[asyncio.StreamWriter] = set()
        self.refusing_until = 0.0
        self.thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    # -- control, from any thread -------------------------------------------------------

    def start(self) -> FaultProxy:
        ready = threading.Event()
        self.thread = threading.Thread(target=self._serve, args=(ready,), daemon=True, name=f"proxy-{self.port}")
        self.thread.start()
        ready.wait(10)
        return self

    def stop(self) -> None:
        if self.loop is not None:
            asyncio.run_coroutine_threadsafe(self._end(), self.loop).result(10)
            self.loop.call_soon_threadsafe(self.loop.stop)
        if self.thread is not None:
            self.thread.join(10)

    def refuse(self, seconds: float) -> None:
        """Refuse connections for `seconds` from now (and end those open)."""
        self.counts["refuse"] += 1
        self.refusing_until = time.monotonic() + seconds
        assert self.loop is not None
        asyncio.run_coroutine_threadsafe(self._refuse(seconds), self.loop).result(10)

    def heal(self) -> None:
        """No faults from now on: every request passes, connections are taken."""
        self.plan = {}
        if self.loop is not None and time.monotonic() < self.refusing_until:
            self.refusing_until = 0.0
            asyncio.run_coroutine_threadsafe(self._listen(), self.loop).result(10)

    # -- the proxy's loop -----------------------------------------------------------------

    def _serve(self, ready: threading.Event) -> None:
        self.loop = asyncio.new_event_loop()
        self.loop.run_until_complete(self._listen())
        ready.set()
        self.loop.run_forever()
        self.loop.close()

    async def _listen(self) -> None:
        if self.server is None:
            self.server = await asyncio.start_server(self._client, "127.0.0.1", self.port, reuse_address=True)

    async def _close_all(self) -> None:
        if self.server is not None:
            self.server.close()
            self.server = None
        for writer in list(self.writers):
            writer.transport.abort()

    async def _end(self) -> None:
        """Everything closed, and every connection's task ended, before the loop stops."""
        await self._close_all()
        tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    async def _refuse(self, seconds: float) -> None:
        await self._close_all()
        self.loop.call_later(seconds, lambda: asyncio.ensure_future(self._reopen()))  # type: ignore[union-attr]

    async def _reopen(self) -> None:
        if time.monotonic() >= self.refusing_until - 0.01:
            await self._listen()

    def _draw(self) -> str:
        roll = self.rng.random()
        for kind, probability in self.plan.items():
            if roll < probability:
                return kind
            roll -= probability
        return "pass"

    async def _client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.writers.add(writer)
        conn = h11.Connection(h11.SERVER)
        try:
            while True:
                request = await _read_message(conn, reader)
                if request is None:
                    return
                head, body = request
                kind = self._draw()
                self.counts[kind] += 1
                if kind == "drop":
                    await asyncio.sleep(HOLD)
                    return
                if kind == "reset" and self.rng.random() < 0.5:
                    _reset(writer)
                    return
                if kind == "delay":
                    await asyncio.sleep(self.rng.uniform(*self.delay))
                answer = await self._forward(head, body)
                if answer is None or kind in ("cut", "reset"):
                    if kind == "reset":
                        _reset(writer)
                    return
                response, content = answer
                writer.write(conn.send(h11.Response(status_code=response.status_code, headers=response.headers)))
                if content:
                    writer.write(conn.send(h11.Data(data=content)))
                writer.write(conn.send(h11.EndOfMessage()))
                await writer.drain()
                if conn.our_state is h11.MUST_CLOSE or conn.their_state is h11.MUST_CLOSE:
                    return
                conn.start_next_cycle()
        except (ConnectionError, h11.ProtocolError, asyncio.IncompleteReadError):
            return
        except asyncio.CancelledError:
            return  # the proxy stops (asyncio's streams would log the cancellation as an error)
        finally:
            self.writers.discard(writer)
            writer.transport.abort()

    async def _forward(self, head: h11.Request, body: bytes) -> tuple[h11.Response, bytes] | None:
        """The request sent upstream on a connection of its own; its answer, or None if there was none."""
        try:
            reader, writer = await asyncio.open_connection("127.0.0.1", self.upstream_port)
        except OSError:
            return None
        conn = h11.Connection(h11.CLIENT)
        headers = [(k, v) for k, v in head.headers if k.lower() not in (b"connection", b"keep-alive")]
        try:
            writer.write(
                conn.send(
                    h11.Request(method=head.method, target=head.target, headers=[*headers, (b"connection", b"close")])
                )
            )
            if body:
                writer.write(conn.send(h11.Data(data=body)))
            writer.write(conn.send(h11.EndOfMessage()))
            await writer.drain()
            answer = await _read_message(conn, reader)
        except (ConnectionError, h11.ProtocolError):
            answer = None
        finally:
            writer.transport.abort()
        if answer is None:
            return None
        response, content = answer
        # Sent back with its length: the client's connection may stay open for the next request.
        headers = [
            (k, v)
            for k, v in response.headers
            if k.lower() not in (b"connection", b"transfer-encoding", b"content-length")
        ]
        return h11.Response(
            status_code=response.status_code, headers=[*headers, (b"content-length", str(len(content)).encode())]
        ), content


async def _read_message(conn: h11.Connection, reader: asyncio.StreamReader):
    """The next request or response on `conn` and its whole body; None at the end of the connection."""
    head = None
    chunks: list[bytes] = []
    while True:
        event = conn.next_event()
        if event is h11.NEED_DATA:
            data = await reader.read(65536)
            conn.receive_data(data)
            if not data and head is None:
                return None
            continue
        if isinstance(event, (h11.Request, h11.Response)):
            head = event
        elif isinstance(event, h11.Data):
            chunks.append(event.data)
        elif isinstance(event, h11.EndOfMessage):
            return head, b"".join(chunks)
        elif isinstance(event, h11.ConnectionClosed):
            return None


def _reset(writer: asyncio.StreamWriter) -> None:
    """Close with a TCP RST, not a FIN: linger on, for no time."""
    sock = writer.get_extra_info("socket")
    if sock is not None:
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        except OSError:
            pass
    writer.transport.abort()
