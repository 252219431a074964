"""`python -m bench.http_vs_socket`: posts per second over `POST /api/commands` against the WebSocket, one run.

One daphne process of the demo project (DEBUG off, its defaults), one
PostgreSQL database and Redis db of the bench's own. The same users post
into the same rooms, in rounds that alternate the transports, so a
neighbour's noise hits both alike; the median of the rounds is reported
(docs/PERFORMANCE.md, "Commands over HTTP").

- `socket, 1 in flight`: each user's socket sends its next post when the
  last one is acked: the HTTP client's pattern, on a socket.
- `socket, 4 in flight`: the page's and the bench's pattern (pipelined).
- `http, 1 in flight`: each user's keep-alive connection POSTs its next post
  when the last one is answered (HTTP/1.1 has no pipelining to speak of).

Traffic goes to 127.0.0.1 only; every run is bounded in count.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import psycopg
import redis
import websockets

from .servers import ROOT, Server


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m bench.http_vs_socket", description=__doc__.splitlines()[0])
    p.add_argument("--database", default="postgres://postgres@127.0.0.1:5432/messaging_bench_http")
    p.add_argument("--redis", default="redis://127.0.0.1:6379/13", help="a db of the bench's own: it is flushed")
    p.add_argument("--users", type=int, default=16)
    p.add_argument("--room-size", type=int, default=4)
    p.add_argument("--messages", type=int, default=200, help="posts per user and run")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--out", type=Path, default=ROOT / "artifacts" / "http_vs_socket.json")
    return p.parse_args()


def fresh_database(url: str) -> None:
    base, name = url.rsplit("/", 1)
    with psycopg.connect(base + "/postgres", autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}"')
        conn.execute(f'CREATE DATABASE "{name}"')


def manage(env: dict[str, str], *argv: str) -> str:
    return subprocess.run(
        [sys.executable, "manage.py", *argv], cwd=ROOT, env=env, check=True, capture_output=True, text=True
    ).stdout


# What a bench that measures throughput, not the limits, sets beside `server_env`'s.
UNLIMITED = {
    "SIGNIN_RATE": "0",
    "MESSAGING_RATE_BURST": "1000000",
    "MESSAGING_RATE_PER_SECOND": "1000000",
    "MESSAGING_USER_RATE_LIMIT": "1000000",
    "MESSAGING_ROOMS_CREATED_PER_HOUR": "0",
    "MESSAGING_ROOMS_CREATED_PER_ADDRESS_PER_HOUR": "0",
}


def server_env(database: str, redis_url: str, **settings: str) -> dict[str, str]:
    """The environment of a bench's server (DEBUG off, no handshake limit, `settings` beside),
    on a new database, migrated, and an emptied Redis db."""
    fresh_database(database)
    redis.Redis.from_url(redis_url).flushdb()
    env = {
        **os.environ,
        "DATABASE_URL": database,
        "REDIS_URL": redis_url,
        "DEBUG": "0",
        "SECRET_KEY": "bench-secret-not-for-production",
        "ALLOWED_HOSTS": "127.0.0.1,localhost",
        "LOG_LEVEL": "WARNING",
        "CONNECT_RATE": "0",
        **settings,
    }
    manage(env, "migrate", "--noinput", "-v0")
    return env


USERS_AND_TOKENS = """
import json
from django.contrib.auth import get_user_model
from messaging.transport.tokens import create_token
out = []
for n in range({users}):
    user = get_user_model().objects.create_user(username=f"bench-{{n}}", first_name=f"bench {{n}}")
    out.append(create_token(user, "bench")[1])
print(json.dumps(out))
"""


class Http:
    """One keep-alive HTTP/1.1 connection, one request at a time."""

    def __init__(self, port: int, token: str) -> None:
        self.port, self.token = port, token

    async def open(self) -> Http:
        self.reader, self.writer = await asyncio.open_connection("127.0.0.1", self.port)
        return self

    async def post(self, key: str, t: str, d: dict) -> tuple[int, dict]:
        body = json.dumps({"t": t, "d": d}).encode()
        head = (
            f"POST /api/commands HTTP/1.1\r\nHost: 127.0.0.1:{self.port}\r\nAuthorization: Bearer {self.token}\r\n"
            f"Idempotency-Key: {key}\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
        )
        self.writer.write(head.encode() + body)
        status_line = await self.reader.readline()
        length, chunked = 0, False
        while (line := await self.reader.readline()) not in (b"\r\n", b""):
            name, _, value = line.decode().partition(":")
            if name.lower() == "content-length":
                length = int(value)
            elif name.lower() == "transfer-encoding":
                chunked = "chunked" in value.lower()
        if not chunked:
            return int(status_line.split()[1]), json.loads(await self.reader.readexactly(length))
        body = b""
        while size := int((await self.reader.readline()).strip(), 16):
            body += await self.reader.readexactly(size + 2)
        await self.reader.readline()
        return int(status_line.split()[1]), json.loads(body)

    async def close(self) -> None:
        self.writer.close()


class Socket:
    """One WebSocket signed in with a token, with `window` posts in flight."""

    def __init__(self, port: int, token: str) -> None:
        self.port, self.token = port, token
        self.waiting: dict[str, asyncio.Future] = {}

    async def open(self) -> Socket:
        self.ws = await websockets.connect(
            f"ws://127.0.0.1:{self.port}/ws/",
            max_size=None,
            origin=f"http://127.0.0.1:{self.port}",
            additional_headers={"Authorization": f"Bearer {self.token}"},
        )
        self.reader = asyncio.create_task(self.read())
        return self

    async def read(self) -> None:
        async for text in self.ws:
            frame = json.loads(text)
            if frame.get("t") == "ack":
                future = self.waiting.pop(frame["id"], None)
                if future is not None and not future.done():
                    future.set_result(frame)

    async def call(self, id: str, t: str, d: dict) -> dict:
        future = self.waiting[id] = asyncio.get_running_loop().create_future()
        await self.ws.send(json.dumps({"id": id, "t": t, "d": d}))
        return await future

    async def close(self) -> None:
        self.reader.cancel()
        await self.ws.close()


async def run_sockets(port: int, tokens: list[str], rooms: list[str], messages: int, window: int) -> float:
    sockets = [await Socket(port, token).open() for token in tokens]
    for socket, room in zip(sockets, rooms):
        assert (await socket.call(uuid.uuid4().hex, "room.join", {"room": room}))["ok"]
    tag = uuid.uuid4().hex[:8]

    async def one(n: int, socket: Socket) -> None:
        async def lane(k: int) -> None:
            for i in range(k, messages, window):
                ack = await socket.call(f"s{tag}-{n}-{i}", "room.post", {"room": rooms[n], "body": f"m{i}"})
                assert ack["ok"], ack

        await asyncio.gather(*(lane(k) for k in range(window)))

    started = time.perf_counter()
    await asyncio.gather(*(one(n, s) for n, s in enumerate(sockets)))
    elapsed = time.perf_counter() - started
    for socket in sockets:
        await socket.close()
    return len(tokens) * messages / elapsed


async def run_http(port: int, tokens: list[str], rooms: list[str], messages: int) -> float:
    connections = [await Http(port, token).open() for token in tokens]
    for connection, room in zip(connections, rooms):
        assert (await connection.post(uuid.uuid4().hex, "room.join", {"room": room}))[0] == 200
    tag = uuid.uuid4().hex[:8]

    async def one(n: int, connection: Http) -> None:
        for i in range(messages):
            status, ack = await connection.post(f"h{tag}-{n}-{i}", "room.post", {"room": rooms[n], "body": f"m{i}"})
            assert status == 200 and ack["ok"], ack

    started = time.perf_counter()
    await asyncio.gather(*(one(n, c) for n, c in enumerate(connections)))
    elapsed = time.perf_counter() - started
    for connection in connections:
        await connection.close()
    return len(tokens) * messages / elapsed


async def measure(args: argparse.Namespace, port: int, tokens: list[str]) -> dict[str, list[float]]:
    rooms = [f"room-{n // args.room_size}" for n in range(len(tokens))]
    runs: dict[str, list[float]] = {"socket, 1 in flight": [], "socket, 4 in flight": [], "http, 1 in flight": []}
    for round in range(args.rounds):
        runs["socket, 1 in flight"].append(await run_sockets(port, tokens, rooms, args.messages, 1))
        runs["http, 1 in flight"].append(await run_http(port, tokens, rooms, args.messages))
        runs["socket, 4 in flight"].append(await run_sockets(port, tokens, rooms, args.messages, 4))
        print(f"round {round + 1}: " + ", ".join(f"{k} {v[-1]:.0f}/s" for k, v in runs.items()), flush=True)
    return runs


def main() -> None:
    args = parse_args()
    env = server_env(args.database, args.redis, **UNLIMITED)
    # The last line: `shell` may say first what it imported.
    tokens = json.loads(manage(env, "shell", "-c", USERS_AND_TOKENS.format(users=args.users)).strip().splitlines()[-1])
    server = Server("daphne", env, Path(tempfile.mkdtemp()), app="project.asgi:application").start()
    try:
        runs = asyncio.run(measure(args, server.port, tokens))
    finally:
        server.stop()
    medians = {name: statistics.median(values) for name, values in runs.items()}
    report = {
        "users": args.users,
        "room_size": args.room_size,
        "messages": args.messages,
        "rounds": runs,
        "median": medians,
        "http_over_socket_1": medians["http, 1 in flight"] / medians["socket, 1 in flight"],
        "http_over_socket_4": medians["http, 1 in flight"] / medians["socket, 4 in flight"],
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2))
    print("| transport | posts/s (median of %d rounds) |\n| --- | --- |" % args.rounds)
    for name, value in medians.items():
        print(f"| {name} | {value:.0f} |")
    print(
        f"http / socket (1 in flight): {report['http_over_socket_1']:.2f}; "
        f"http / socket (4 in flight): {report['http_over_socket_4']:.2f}"
    )


if __name__ == "__main__":
    main()
