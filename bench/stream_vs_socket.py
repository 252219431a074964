"""`python -m bench.stream_vs_socket`: a room's frames over the event stream (`GET /api/stream`) beside the socket.

One server process (daphne or uvicorn) of the demo project (DEBUG off), a
PostgreSQL database and Redis db of the bench's own. `--listeners` users
listen to one room, all over sockets or all over streams, in rounds that
alternate the transports; one more user's socket posts `--messages` into
it, 4 in flight. Reported per transport, the median of the rounds:
deliveries per second (listeners x posts, from the first post to the last
frame heard) and the server's CPU per delivered frame; then the server's
resident memory per idle connection, `--idle` of each kind opened on one
room (docs/PERFORMANCE.md, "Event streams").

Traffic goes to 127.0.0.1 only; every run is bounded in count.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import websockets
from websockets.typing import Origin

from .cpu import process_cpu_seconds
from .http_vs_socket import UNLIMITED, USERS_AND_TOKENS, Socket, manage, server_env
from .servers import ROOT, Server


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m bench.stream_vs_socket", description=__doc__.splitlines()[0])
    p.add_argument("--server", choices=("daphne", "uvicorn"), default="daphne")
    p.add_argument("--database", default="postgres://postgres@127.0.0.1:5432/messaging_bench_stream")
    p.add_argument("--redis", default="redis://127.0.0.1:6379/13", help="a db of the bench's own: it is flushed")
    p.add_argument("--listeners", type=int, default=50)
    p.add_argument("--messages", type=int, default=200)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--idle", type=int, default=300, help="idle connections of each kind for the memory figure")
    p.add_argument("--out", type=Path, default=ROOT / "artifacts" / "stream_vs_socket.json")
    return p.parse_args()


def rss_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise RuntimeError("no VmRSS")


class Listener:
    """One user hearing the room: `heard` counts its `msg` frames."""

    def __init__(self, port: int, token: str, room: str) -> None:
        self.port, self.token, self.room = port, token, room
        self.heard = 0
        self.ready = asyncio.Event()

    async def open_socket(self) -> Listener:
        self.ws = await websockets.connect(
            f"ws://127.0.0.1:{self.port}/ws/",
            max_size=None,
            origin=Origin(f"http://127.0.0.1:{self.port}"),
            additional_headers={"Authorization": f"Bearer {self.token}"},
        )
        await self.ws.send(json.dumps({"id": uuid.uuid4().hex, "t": "room.join", "d": {"room": self.room}}))
        self.task = asyncio.create_task(self.read_socket())
        await self.ready.wait()
        return self

    async def read_socket(self) -> None:
        async for message in self.ws:
            text = message if isinstance(message, str) else message.decode()
            if text.startswith('{"t":"msg"'):
                self.heard += 1
            elif '"t":"ack"' in text:
                self.ready.set()

    async def open_stream(self) -> Listener:
        self.reader, self.writer = await asyncio.open_connection("127.0.0.1", self.port)
        self.writer.write(
            f"GET /api/stream?rooms={self.room} HTTP/1.1\r\nHost: 127.0.0.1:{self.port}\r\n"
            f"Authorization: Bearer {self.token}\r\n\r\n".encode()
        )
        self.task = asyncio.create_task(self.read_stream())
        await self.ready.wait()
        return self

    async def read_stream(self) -> None:
        await self.reader.readuntil(b"\r\n\r\n")
        while data := await self.reader.read(65536):
            if b"event: ready\n" in data:
                self.ready.set()
            self.heard += data.count(b"event: msg\n")

    async def close(self) -> None:
        self.task.cancel()
        if hasattr(self, "ws"):
            await self.ws.close()
        else:
            self.writer.close()


async def open_listeners(kind: str, port: int, tokens: list[str], room: str) -> list[Listener]:
    listeners = [Listener(port, token, room) for token in tokens]
    for listener in listeners:
        await (listener.open_socket() if kind == "socket" else listener.open_stream())
    return listeners


async def deliveries(
    kind: str, port: int, pid: int, poster: Socket, tokens: list[str], messages: int
) -> dict[str, float]:
    room = f"r-{uuid.uuid4().hex[:8]}"
    assert (await poster.call(uuid.uuid4().hex, "room.join", {"room": room}))["ok"]
    listeners = await open_listeners(kind, port, tokens, room)
    base = [listener.heard for listener in listeners]
    cpu, started = process_cpu_seconds(pid), time.perf_counter()

    async def lane(k: int) -> None:
        for i in range(k, messages, 4):
            assert (await poster.call(uuid.uuid4().hex, "room.post", {"room": room, "body": f"m{i}"}))["ok"]

    await asyncio.gather(*(lane(k) for k in range(4)))
    while any(listener.heard - b < messages for listener, b in zip(listeners, base)):
        await asyncio.sleep(0.005)
    elapsed, cpu = time.perf_counter() - started, process_cpu_seconds(pid) - cpu
    for listener in listeners:
        await listener.close()
    delivered = len(listeners) * messages
    return {"deliveries_per_s": delivered / elapsed, "cpu_us_per_delivery": cpu * 1e6 / delivered}


async def idle_memory(kind: str, port: int, pid: int, tokens: list[str], count: int) -> float:
    room = f"idle-{uuid.uuid4().hex[:8]}"
    await asyncio.sleep(1)
    before = rss_kib(pid)
    listeners = await open_listeners(kind, port, [tokens[n % len(tokens)] for n in range(count)], room)
    await asyncio.sleep(2)
    per = (rss_kib(pid) - before) * 1024 / count
    for listener in listeners:
        await listener.close()
    return per


async def measure(args: argparse.Namespace, port: int, pid: int, tokens: list[str]) -> dict[str, Any]:
    poster = await Socket(port, tokens[0]).open()
    listeners = tokens[1 : args.listeners + 1]
    runs: dict[str, list[dict[str, float]]] = {"socket": [], "stream": []}
    for round in range(args.rounds):
        for kind in ("socket", "stream"):
            runs[kind].append(await deliveries(kind, port, pid, poster, listeners, args.messages))
        print(f"round {round + 1}: {json.dumps(runs)}", flush=True)
    await poster.close()
    idle = {kind: await idle_memory(kind, port, pid, tokens, args.idle) for kind in ("socket", "stream")}
    return {"runs": runs, "idle_bytes_per_connection": idle}


def main() -> None:
    args = parse_args()
    env = server_env(args.database, args.redis, **UNLIMITED)
    users = args.listeners + 1
    tokens = json.loads(manage(env, "shell", "-c", USERS_AND_TOKENS.format(users=users)).strip().splitlines()[-1])
    server = Server(args.server, env, Path(tempfile.mkdtemp()), app="project.asgi:application").start()
    try:
        report = asyncio.run(measure(args, server.port, server.pid, tokens))
    finally:
        server.stop()
    medians = {
        kind: {key: statistics.median(run[key] for run in runs) for key in runs[0]}
        for kind, runs in report["runs"].items()
    }
    report.update(server=args.server, listeners=args.listeners, messages=args.messages, median=medians)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2))
    print(f"| {args.server} | deliveries/s | CPU per delivery | RSS per idle connection |\n| --- | --- | --- | --- |")
    for kind, m in medians.items():
        idle = report["idle_bytes_per_connection"][kind] / 1024
        print(f"| {kind} | {m['deliveries_per_s']:.0f} | {m['cpu_us_per_delivery']:.1f} us | {idle:.1f} kB |")


if __name__ == "__main__":
    main()
