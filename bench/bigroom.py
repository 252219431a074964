"""The big room: one room of N sockets (half on each of two server processes,
from as many loopback source addresses as N needs: bench/spread.py), S
senders posting R per second each, then every member sending a receipt.
Its members are users signed in in bulk (bench/signins.py).

Measured, per post: how many of the N sockets got its `msg` frame, and the
time from its ack (on the sender's socket) to its arrival on the last socket
that got it; over the receipts: the frames every socket received meanwhile,
per receipt (O(members) means a constant number per receipt, not one per
member per receipt), and the receipts' ack latency.

The clock is the load generator's (one process, one loop): an arrival before
the ack counts as 0 ms. The load generator shares the machine's cores with
both servers, PostgreSQL and Redis, and reads all N sockets' frames itself.
"""

from __future__ import annotations

import asyncio
import gc
import sys
import time
import uuid
from dataclasses import dataclass

import orjson
from picows import WSMsgType, ws_connect

from . import loopstats
from .limits import system_limits
from .load import Socket, Target
from .spread import layout

MSG = b'{"t":"msg",'


@dataclass
class BigRoom:
    sockets: int = 1000
    senders: int = 10
    per_second: float = 2.0  # posts per sender per second
    seconds: float = 10.0  # of posting
    settle: float = 3.0  # after the last ack, for the last frames
    per_address: int = 20000  # most sockets from one loopback source address
    timeout: float = 30.0  # seconds a post's ack may take before it counts as timed out


class Member(Socket):
    """A socket of the room: each `msg` frame's seq and arrival are recorded in `arrivals`."""

    def __init__(self, room: str, arrivals: dict[int, list]) -> None:
        super().__init__(room)
        self.arrivals = arrivals
        self.frames = 0  # every frame but acks, from the moment counting starts

    def on_ws_frame(self, transport, frame) -> None:
        if frame.msg_type == WSMsgType.TEXT and frame.fin:
            text = frame.get_payload_as_bytes()
            if text.startswith(MSG):
                self.frames += 1
                seq = orjson.loads(text)["d"]["seq"]
                now = time.perf_counter()
                seen = self.arrivals.get(seq)
                if seen is None:
                    self.arrivals[seq] = [1, now]
                else:
                    seen[0] += 1
                    seen[1] = now
                return
            if not text.startswith(b'{"t":"ack"'):
                self.frames += 1
        super().on_ws_frame(transport, frame)


async def open_members(
    target: Target,
    sessions: list[str],
    room: str,
    arrivals: dict,
    progress,
    addresses: tuple[str, ...] = ("127.0.0.1",),
) -> list[Member]:
    gate = asyncio.Semaphore(20)
    done = 0

    async def one(n: int) -> Member:
        nonlocal done
        async with gate:
            _, socket = await ws_connect(
                lambda: Member(room, arrivals),
                target.socket_url(n, room),
                extra_headers={"Cookie": f"sessionid={sessions[n]}", "Origin": target.origin(n)},
                max_frame_size=sys.maxsize,
                websocket_handshake_timeout=30,
                local_addr=(addresses[n % len(addresses)], 0),
            )
            ack = await asyncio.wait_for(socket.call(uuid.uuid4().hex, "room.join", {"room": room}), 60)
            assert ack["ok"], ack
            done += 1
            progress(done, len(sessions))
            return socket

    return list(await asyncio.gather(*(one(n) for n in range(len(sessions)))))


def pct(values: list[float], p: float) -> float | None:
    values = sorted(values)
    return round(values[min(len(values) - 1, int(p / 100 * len(values)))], 1) if values else None


async def run(urls: list[str], sessions: list[str], shape: BigRoom, progress) -> dict:
    room = f"big-{uuid.uuid4().hex[:8]}"
    arrivals: dict[int, list] = {}
    target = Target("full", urls)
    addresses = layout(
        len(sessions), per_address=shape.per_address, ports=system_limits()["ports_per_source_address"]
    ).addresses
    members = await open_members(target, sessions, room, arrivals, progress, addresses)
    try:
        await asyncio.sleep(1)
        arrivals.clear()
        gc.collect()
        gc.freeze()
        # Senders alternate between the processes (socket n is on urls[n % 2]).
        senders = members[: shape.senders]
        acked: dict[int, float] = {}
        # Each post's ack latency from when it was due (a late ack delays the
        # sender's next post: counted), and from when it was sent (the round trip alone).
        post_latencies: list[float] = []
        round_trips: list[float] = []
        errors = timeouts = 0
        started = time.perf_counter()
        cpu_started = time.process_time()
        count = int(shape.per_second * shape.seconds)
        # The servers' own collections and loop lag over the posting (messaging/ops/loopwatch.py).
        watched = await asyncio.to_thread(loopstats.loop_watch, urls)

        async def send(n: int, socket: Member) -> None:
            nonlocal errors, timeouts
            interval = 1 / shape.per_second
            due = started + n * interval / len(senders)
            for i in range(count):
                await asyncio.sleep(max(0.0, due - time.perf_counter()))
                origin, due = due, due + interval
                sent = time.perf_counter()
                try:
                    ack = await asyncio.wait_for(
                        socket.call(uuid.uuid4().hex, "room.post", {"room": room, "body": f"post {i} from {n}"}),
                        shape.timeout,
                    )
                except TimeoutError:
                    # A room the servers cannot keep up with is a result too: counted, not a crash.
                    timeouts += 1
                    continue
                if ack.get("ok"):
                    acked[ack["d"]["seq"]] = now = time.perf_counter()
                    post_latencies.append((now - origin) * 1000)
                    round_trips.append((now - sent) * 1000)
                else:
                    errors += 1

        await asyncio.gather(*(send(n, s) for n, s in enumerate(senders)))
        posting = time.perf_counter() - started
        client_cpu = (time.process_time() - cpu_started) / posting
        stalls = [
            loopstats.window(before, after)
            for before, after in zip(watched, await asyncio.to_thread(loopstats.loop_watch, urls))
        ]
        await asyncio.sleep(shape.settle)
        reached = [arrivals.get(seq, [0])[0] for seq in acked]
        lags = [max(0.0, arrivals[seq][1] - at) * 1000 for seq, at in acked.items() if seq in arrivals]
        frames = sum(reached)
        posts = {
            "posts": len(acked),
            "post_errors": errors,
            "post_timeouts": timeouts,
            "posting_seconds": round(posting, 2),
            "posts_reaching_all": sum(n == len(members) for n in reached),
            "fewest_sockets_reached": min(reached) if reached else 0,
            "msg_frames_per_s": round(frames / posting, 1),
            "post_ack_p50_ms": pct(post_latencies, 50),
            "post_ack_p99_ms": pct(post_latencies, 99),
            "post_round_trip_p50_ms": pct(round_trips, 50),
            "post_round_trip_p99_ms": pct(round_trips, 99),
            "ack_to_last_delivery_p50_ms": pct(lags, 50),
            "ack_to_last_delivery_p99_ms": pct(lags, 99),
            "ack_to_last_delivery_max_ms": pct(lags, 100),
            # The load generator reads all the sockets' frames on the same cores as the servers.
            "client_cpu_cores": round(client_cpu, 2),
            # Per server process: its garbage collections and event-loop lag while the posts went out.
            "servers_loop": stalls,
        }

        # Every member reads up to the last post, all at once.
        last = max(acked) if acked else 0
        for socket in members:
            socket.frames = 0
        receipt_started = time.perf_counter()
        latencies: list[float] = []
        receipt_timeouts = 0

        async def receipt(socket: Member) -> None:
            nonlocal receipt_timeouts
            begin = time.perf_counter()
            try:
                ack = await asyncio.wait_for(
                    socket.call(uuid.uuid4().hex, "receipt", {"room": room, "delivered": last, "read": last}), 180
                )
            except TimeoutError:
                receipt_timeouts += 1
                return
            if ack.get("ok"):
                latencies.append((time.perf_counter() - begin) * 1000)

        await asyncio.gather(*(receipt(s) for s in members))
        receipts_seconds = time.perf_counter() - receipt_started
        await asyncio.sleep(shape.settle)
        receipt_frames = sum(s.frames for s in members)
        receipts = {
            "receipts": len(latencies),
            "receipt_timeouts": receipt_timeouts,
            "receipts_seconds": round(receipts_seconds, 2),
            "receipts_per_s": round(len(latencies) / receipts_seconds, 1),
            "receipt_ack_p50_ms": pct(latencies, 50),
            "receipt_ack_p99_ms": pct(latencies, 99),
            "frames_during_receipts": receipt_frames,
            "frames_per_receipt": round(receipt_frames / max(1, len(latencies)), 2),
        }
        return {
            "sockets": len(members),
            "source_addresses": len(addresses),
            "senders": shape.senders,
            "per_second": shape.per_second,
            "planned_seconds": shape.seconds,
            **posts,
            **receipts,
        }
    finally:
        gc.unfreeze()
        await asyncio.gather(*(s.close() for s in members), return_exceptions=True)


def measure(start, shape: BigRoom, sessions: list[str], progress) -> dict:
    """Two fresh processes of the full path, one run; a member per session."""
    servers = start("full", 2)
    try:
        return asyncio.run(run([s.url for s in servers], sessions[: shape.sockets], shape, progress))
    finally:
        for s in servers:
            s.stop()
