"""The load generator: C sockets, M commands each, W in flight, a share of duplicates.

Every socket keeps at most W commands unacked. A duplicate re-sends an id this
socket already had acked, with the same payload, which is what a client's
outbox does after a lost ack. With a target rate the sends are paced (open
loop, capped by W) and latency is measured from the moment a command was due,
so a server that falls behind cannot hide its queue (no coordinated omission).

The client transport is picows (a Cython WebSocket client with a callback per
frame, no reader task): the load generator runs on the same cores as the
server it measures, so its CPU per frame is kept as low as a Python client's
can be. Fan-out frames are only counted, so they are classified by their first
bytes (see `FANOUT`); acks are parsed in full.
"""

from __future__ import annotations

import asyncio
import functools
import gc
import random
import sys
import time
import uuid
from dataclasses import dataclass, field

import orjson
import websockets
from picows import WSCloseCode, WSListener, WSMsgType, WSTransport, ws_connect

# Command ids as the project's clients mint them: time-ordered (messaging/ids.py).
from messaging.ids import time_ordered_id

TEXT = WSMsgType.TEXT
CLOSE = WSMsgType.CLOSE
CONTINUATION = WSMsgType.CONTINUATION

# The first bytes of the frames counted as fan-out. The project's server
# encodes every frame with orjson (`messaging.core.protocol.encode`: compact, keys
# in insertion order) from dicts that put "t" first (`msg_frame`, the receipt
# `status` frame); the tutorial consumer uses `json.dumps` (", " and ": "). A
# frame that starts with one of these is that kind, exactly; any other frame
# (acks, errors, ...) is parsed in full.
FANOUT = (b'{"t":"msg",', b'{"t":"status",', b'{"t": "msg",', b'{"t": "status",')


@dataclass
class Target:
    """One endpoint: `kind` is "full", "echo", "tutorial" or "floor" (bench/floor.py); `urls` the servers, used round-robin."""

    kind: str
    urls: list[str]

    def socket_url(self, n: int, room: str) -> str:
        base = self.urls[n % len(self.urls)].replace("http", "ws", 1)
        path = {"full": "/ws/", "echo": "/echo/", "tutorial": f"/tutorial/{room}/", "floor": "/ws/"}[self.kind]
        return base + path

    def origin(self, n: int) -> str:
        return self.urls[n % len(self.urls)]


@dataclass
class Load:
    sockets: int = 16
    messages: int = 200  # commands per socket, duplicates included
    window: int = 4
    duplicates: float = 0.1
    room_size: int = 4  # sockets per room: each post fans out to this many
    rate: float | None = None  # commands per second over all sockets; None: as fast as acks come
    seed_only_duplicates: bool = False  # post `messages` ids untimed first, then time only their duplicates
    # Receipts instead of posts: each room gets at least `messages` posts untimed
    # first, then a socket's receipt i moves its delivered and read to i + 1
    # (every one a move: message states advance, a `status` frame fans out).
    receipts: bool = False
    # Command ids as uuid4 (random) instead of time-ordered: a lever, to measure
    # what random ids cost the database's indexes (docs/PERFORMANCE.md).
    random_ids: bool = False
    timeout: float = 60.0

    def new_id(self) -> str:
        return uuid.uuid4().hex if self.random_ids else time_ordered_id()


@dataclass
class Result:
    commands: int = 0  # finished: acked, refused or timed out
    acks: int = 0
    errors: int = 0
    dup_acks: int = 0
    fanout_frames: int = 0
    seconds: float = 0.0
    # The load generator's own cost over the timed part: its CPU seconds, and the frames it received
    # meanwhile (an ack per command, the fan-out so far).
    client_cpu_s: float = 0.0
    frames: int = 0
    latencies_ms: list[float] = field(default_factory=list)

    def summary(self) -> dict:
        lat = sorted(self.latencies_ms)

        def pct(p: float) -> float | None:
            return round(lat[min(len(lat) - 1, int(p / 100 * len(lat)))], 2) if lat else None

        return {
            "commands": self.commands,
            "acks": self.acks,
            "errors": self.errors,
            "dup_acks": self.dup_acks,
            "seconds": round(self.seconds, 3),
            "acks_per_s": round(self.acks / self.seconds, 1) if self.seconds else 0.0,
            "fanout_frames_per_s": round(self.fanout_frames / self.seconds, 1) if self.seconds else 0.0,
            # The load generator shares the cores with the server it measures: its own cost.
            "client_cpu_cores": round(self.client_cpu_s / self.seconds, 2) if self.seconds else None,
            "client_cpu_us_per_frame": round(self.client_cpu_s / self.frames * 1e6, 1) if self.frames else None,
            "p50_ms": pct(50),
            "p95_ms": pct(95),
            "p99_ms": pct(99),
        }


class Socket(WSListener):
    """One WebSocket, as picows' listener: acks resolve `call`'s futures, fan-out frames are counted."""

    def __init__(self, room: str) -> None:
        super().__init__()
        self.room = room
        self.transport: WSTransport | None = None
        self.pending: dict[str, asyncio.Future] = {}
        self.fanout = 0
        self.parts: list[bytes] | None = None  # a fragmented message's frames so far

    def on_ws_connected(self, transport: WSTransport) -> None:
        self.transport = transport

    def on_ws_frame(self, transport: WSTransport, frame) -> None:
        kind = frame.msg_type
        if kind == TEXT:
            text = frame.get_payload_as_bytes()
            if not frame.fin:
                self.parts = [text]
                return
        elif kind == CONTINUATION and self.parts is not None:
            self.parts.append(frame.get_payload_as_bytes())
            if not frame.fin:
                return
            text = b"".join(self.parts)
            self.parts = None
        elif kind == CLOSE:
            # The close handshake: answer the peer's CLOSE (if we did not start it), then drop TCP.
            code = frame.get_close_code()
            transport.send_close(WSCloseCode.OK if code == WSCloseCode.NO_INFO else code)
            transport.disconnect()
            return
        else:
            return
        if text.startswith(FANOUT):
            self.fanout += 1
            return
        parsed = orjson.loads(text)
        t = parsed.get("t")
        if t == "ack":
            future = self.pending.pop(parsed["id"], None)
            if future is not None and not future.done():
                future.set_result(parsed)
        elif t in ("msg", "status"):
            self.fanout += 1

    def request(self, id: str, t: str, d: dict) -> asyncio.Future:
        """Send a command; the future gets its ack (the parsed frame)."""
        if self.transport.is_close_frame_sent or self.transport.is_disconnected:
            raise ConnectionError("the socket is closed")
        future = asyncio.get_running_loop().create_future()
        self.pending[id] = future
        self.transport.send(TEXT, orjson.dumps({"id": id, "t": t, "d": d}))
        return future

    async def call(self, id: str, t: str, d: dict) -> dict:
        return await self.request(id, t, d)

    async def close(self) -> None:
        transport = self.transport
        if not transport.is_disconnected:
            transport.send_close(WSCloseCode.OK)
            try:
                await asyncio.wait_for(transport.wait_disconnected(), 10)
            except TimeoutError:
                transport.disconnect(graceful=False)
                await transport.wait_disconnected()


async def open_sockets(target: Target, sessions: list[str], load: Load, run_tag: str) -> list[Socket]:
    sockets = []
    for n in range(load.sockets):
        room = f"b{run_tag}-{n // load.room_size}"
        # No extension offered: no compression. No frame size limit. No auto-ping (websockets' default
        # pinged every 20 s; a run is shorter than that and the server does not need it).
        _, socket = await ws_connect(
            lambda room=room: Socket(room),
            target.socket_url(n, room),
            extra_headers={"Cookie": f"sessionid={sessions[n % len(sessions)]}", "Origin": target.origin(n)},
            max_frame_size=sys.maxsize,
            websocket_handshake_timeout=10,  # websockets' open_timeout
        )
        if target.kind == "full":
            ack = await asyncio.wait_for(socket.call(uuid.uuid4().hex, "room.join", {"room": room}), 30)
            assert ack["ok"], ack
        sockets.append(socket)
    return sockets


async def drive(target: Target, sessions: list[str], load: Load, progress=None, timed=None) -> Result:
    """Run one load against `target`; `progress(done, total)` is called as acks arrive,
    `timed("start")` and `timed("end")` around the timed part (after the sockets
    opened and any seeding, until the last ack)."""
    run_tag = uuid.uuid4().hex[:8]
    sockets = await open_sockets(target, sessions, load, run_tag)
    result = Result()
    total = load.sockets * load.messages
    rng = random.Random(run_tag)
    try:
        if load.seed_only_duplicates:
            seeded = await asyncio.gather(*(_seed(s, load.messages, load) for s in sockets))
        elif load.receipts:
            per_socket = -(-load.messages // load.room_size)  # a room's sockets post `messages` or more
            await asyncio.gather(*(_seed(s, per_socket, load) for s in sockets))
            seeded = [_receipts(s, load.messages) for s in sockets]
        else:
            seeded = [[] for _ in sockets]
        for s in sockets:
            s.fanout = 0
        # A full collection of this process (18-35 ms with the bench's imports)
        # stalls every socket's timing at once and would count as the
        # server's latency: what exists before the clock starts is frozen out
        # of the collector's passes.
        gc.collect()
        gc.freeze()
        if timed is not None:
            timed("start")
        started = time.perf_counter()
        cpu_started = time.process_time()
        per_socket_interval = load.sockets / load.rate if load.rate else None
        loop = asyncio.get_running_loop()

        async def run_socket(n: int, socket: Socket) -> None:
            sent: list[tuple[str, dict]] = []
            inflight: set[str] = set()
            slots = asyncio.Semaphore(load.window)
            # A command is a future and a callback, not a task: the generator's CPU goes to the load.
            outstanding = 0
            idle = loop.create_future()  # set when the last command has finished
            issued_all = False

            def finished(id: str, d: dict, begin: float, timer: asyncio.TimerHandle, future: asyncio.Future) -> None:
                nonlocal outstanding
                timer.cancel()
                slots.release()
                inflight.discard(id)
                outstanding -= 1
                try:
                    frame = {"ok": False} if future.cancelled() else future.result()  # cancelled: timed out
                    result.commands += 1
                    if frame.get("ok"):
                        result.acks += 1
                        result.dup_acks += bool(frame.get("dup"))
                        result.latencies_ms.append((time.perf_counter() - begin) * 1000)
                        if not frame.get("dup"):
                            sent.append((id, d))
                    else:
                        result.errors += 1
                    if progress is not None:
                        progress(result.commands, total)
                except Exception as exc:  # a callback's exception would only be logged: fail the run with it
                    if not idle.done():
                        idle.set_exception(exc)
                    return
                if issued_all and not outstanding and not idle.done():
                    idle.set_result(None)

            due = started + rng.random() * (per_socket_interval or 0)
            for i in range(load.messages):
                t = "room.post"
                if load.receipts:
                    id, d = seeded[n][i]
                    t = "receipt"
                elif seeded[n]:
                    id, d = seeded[n][i]
                elif sent and rng.random() < load.duplicates and (pick := rng.choice(sent))[0] not in inflight:
                    # One copy of an id in flight per socket: the client matches acks by id.
                    id, d = pick
                else:
                    id, d = load.new_id(), {"room": socket.room, "body": f"message {i} from socket {n}"}
                if per_socket_interval:
                    delay = due - time.perf_counter()
                    if delay > 0:
                        await asyncio.sleep(delay)
                    origin = due
                    due += per_socket_interval
                else:
                    origin = None
                await slots.acquire()
                inflight.add(id)
                begin = origin if origin is not None else time.perf_counter()
                future = socket.request(id, t, d)
                timer = loop.call_at(loop.time() + load.timeout, future.cancel)
                future.add_done_callback(functools.partial(finished, id, d, begin, timer))
                outstanding += 1
                if time.perf_counter() - started > load.timeout:
                    break
            issued_all = True
            if outstanding or idle.done():
                await idle

        await asyncio.wait_for(asyncio.gather(*(run_socket(n, s) for n, s in enumerate(sockets))), load.timeout + 30)
        result.seconds = time.perf_counter() - started
        result.client_cpu_s = time.process_time() - cpu_started
        if timed is not None:
            timed("end")
        result.frames = result.commands + sum(s.fanout for s in sockets)
        await asyncio.sleep(0.2)  # let the last fan-out frames land
        result.fanout_frames = sum(s.fanout for s in sockets)
    finally:
        gc.unfreeze()
        await asyncio.gather(*(s.close() for s in sockets), return_exceptions=True)
    return result


async def _seed(socket: Socket, count: int, load: Load) -> list[tuple[str, dict]]:
    ids = []
    for i in range(count):
        id, d = load.new_id(), {"room": socket.room, "body": f"seed {i}"}
        ack = await asyncio.wait_for(socket.call(id, "room.post", d), 30)
        assert ack["ok"], ack
        ids.append((id, d))
    return ids


def _receipts(socket: Socket, count: int) -> list[tuple[str, dict]]:
    return [(uuid.uuid4().hex, {"room": socket.room, "delivered": i + 1, "read": i + 1}) for i in range(count)]


async def hold_idle(target: Target, sessions: list[str], count: int, connect_concurrency: int = 10) -> list:
    """Open `count` idle sockets (signed in, nothing sent), the n-th with the n-th of `sessions` (round
    again if there are fewer), and return them, still open."""
    gate = asyncio.Semaphore(connect_concurrency)

    async def open_one(n: int):
        async with gate:
            return await websockets.connect(
                target.socket_url(n, "idle"),
                additional_headers={"Cookie": f"sessionid={sessions[n % len(sessions)]}", "Origin": target.origin(n)},
                open_timeout=60,
                compression=None,
                ping_interval=None,
            )

    return await asyncio.gather(*(open_one(n) for n in range(count)))
