"""One load-generator process of the sockets curve: it opens its share of
signed-in idle WebSockets at a bounded rate, holds them, and answers the
bench's questions on stdin/stdout, one JSON line each.

    python -m bench.crowd '{"generator": 0, "generators": 2, "addresses": ["127.0.0.2"],
                            "urls": ["http://127.0.0.1:8000"], "sessions": "sessions.txt", "rate": 500}'

stdin: `open N` (hold N sockets in all: open the missing ones), `status`,
`close` (or end of input: close them all and exit). Each command gets one
line with `"reply": true`; while it opens, lines of progress come first.

Its k-th socket is socket `generator + k * generators` of the curve
(bench/spread.py's `Layout`): that index's session, server and the source
address `addresses[k % len(addresses)]`. It imports picows and nothing of the
app or the bench's other modules, and keeps each socket's read buffer small,
so that its memory and CPU are its sockets' and little else.
"""

from __future__ import annotations

import asyncio
import gc
import json
import sys
import time

from picows import WSCloseCode, WSListener, WSMsgType, WSTransport, ws_connect

from .limits import raise_fd_limit

# Bytes of picows' read buffer per socket: its smallest (its default is 16 kB,
# 400 MB for 25,000 sockets that receive nothing). It grows if a larger frame comes.
READ_BUFFER = 2048
ERRORS_KEPT = 5


class Idle(WSListener):
    """A socket that sends nothing; it answers pings (picows does) and a close."""

    def __init__(self, crowd: Crowd) -> None:
        super().__init__()
        self.crowd = crowd
        self.connected = False

    def on_ws_connected(self, transport: WSTransport) -> None:
        self.connected = True

    def on_ws_frame(self, transport: WSTransport, frame) -> None:
        if frame.msg_type == WSMsgType.CLOSE:
            code = frame.get_close_code()
            self.crowd.closes[code] = self.crowd.closes.get(code, 0) + 1
            transport.send_close(WSCloseCode.OK if code == WSCloseCode.NO_INFO else code)
            transport.disconnect()

    def on_ws_disconnected(self, transport: WSTransport) -> None:
        if not self.connected:  # a handshake that failed: counted as a failure
            return
        self.crowd.open -= 1
        if not self.crowd.closing:
            self.crowd.dropped += 1


class Crowd:
    def __init__(self, spec: dict) -> None:
        self.generator = spec["generator"]
        self.generators = spec["generators"]
        self.addresses = spec["addresses"]
        self.urls = spec["urls"]
        self.rate = float(spec["rate"])
        self.gate = asyncio.Semaphore(spec.get("concurrency", 50))
        with open(spec["sessions"]) as f:
            # This generator's sessions only: socket k's is line generator + k x generators.
            self.sessions = f.read().split()[self.generator :: self.generators]
        self.transports: list[WSTransport] = []
        self.next = 0  # the next socket to open (k)
        self.open = 0
        self.failed = 0
        self.dropped = 0  # closed by the server or the network, not by us
        self.closes: dict[int, int] = {}
        self.errors: list[str] = []
        self.closing = False
        self.opening_seconds = 0.0

    def status(self, **extra) -> dict:
        return {
            "generator": self.generator,
            "open": self.open,
            "opened": len(self.transports),
            "failed": self.failed,
            "dropped": self.dropped,
            "closes": {str(k): v for k, v in self.closes.items()},
            "errors": self.errors,
            "opening_seconds": round(self.opening_seconds, 2),
            **extra,
        }

    async def open_one(self, k: int) -> None:
        index = self.generator + k * self.generators
        base = self.urls[index % len(self.urls)]
        try:
            transport, _ = await ws_connect(
                lambda: Idle(self),
                base.replace("http", "ws", 1) + "/ws/",
                extra_headers={"Cookie": f"sessionid={self.sessions[k]}", "Origin": base},
                local_addr=(self.addresses[k % len(self.addresses)], 0),
                websocket_handshake_timeout=60,
                read_buffer_init_size=READ_BUFFER,
            )
        except Exception as exc:  # counted and reported: the bench decides what a failure means
            self.failed += 1
            text = f"{type(exc).__name__}: {exc}"[:300]
            if len(self.errors) < ERRORS_KEPT and text not in self.errors:
                self.errors.append(text)
        else:
            self.open += 1
            self.transports.append(transport)
        finally:
            self.gate.release()

    async def open_to(self, target: int, report) -> None:
        """Open sockets until `target` have been tried, `rate` a second at most."""
        target = min(target, len(self.sessions))
        started = time.perf_counter()
        last_report = started
        pending: set[asyncio.Task] = set()
        for j, k in enumerate(range(self.next, target)):
            delay = started + j / self.rate - time.perf_counter()
            if delay > 0.001:
                await asyncio.sleep(delay)
            await self.gate.acquire()
            task = asyncio.create_task(self.open_one(k))
            pending.add(task)
            task.add_done_callback(pending.discard)
            self.next = k + 1
            if time.perf_counter() - last_report > 1:
                last_report = time.perf_counter()
                report(self.status())
        if pending:
            await asyncio.gather(*pending)
        self.opening_seconds = time.perf_counter() - started

    async def close(self) -> None:
        self.closing = True
        for transport in self.transports:
            if not transport.is_disconnected:
                transport.send_close(WSCloseCode.GOING_AWAY)
        await asyncio.sleep(1)  # the close frames go out; the server answers or not
        for transport in self.transports:
            if not transport.is_disconnected:
                transport.disconnect(graceful=False)


async def serve(spec: dict) -> None:
    crowd = Crowd(spec)
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)

    def report(status: dict) -> None:
        sys.stdout.write(json.dumps(status) + "\n")
        sys.stdout.flush()

    # What exists now lives as long as the process: out of the collector's passes.
    gc.collect()
    gc.freeze()
    try:
        while line := (await reader.readline()).decode().strip():
            command, _, argument = line.partition(" ")
            if command == "open":
                await crowd.open_to(int(argument), report)
            elif command == "close":
                break
            elif command != "status":
                report({"reply": True, "error": f"unknown command {line!r}"})
                continue
            report(crowd.status(reply=True))
    finally:
        await crowd.close()
        report(crowd.status(reply=True, closed=True))


if __name__ == "__main__":
    raise_fd_limit()
    asyncio.run(serve(json.loads(sys.argv[1])))
