"""`python -m tests.federation.measure`: the figures of docs/FEDERATION.md, on two real deployments.

- the ack time of a post by a user of the home and by a user of the replica (carried over the link);
- the replication lag on a healthy link: from a post's ack at the home to its `msg` on a replica's socket;
- the catch-up after the link is cut for `CUT` seconds while the home's user posts `RATE` a second:
  from the link's return until the replica's socket has every message posted before it.

Each deployment has one daphne process; the link crosses the fault proxies (passing everything
but the cut). Figures in seconds; `DATABASE_URL` names the base of the databases, as for the suite.
"""

from __future__ import annotations

import asyncio
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from messaging.testing import SocketClient
from messaging_client import sign_in

from ..support import databases
from ..support.deployments import Pair, template
from ..support.servers import collected_static

POSTS = int(os.environ.get("MEASURE_POSTS") or 200)
CUT = float(os.environ.get("MEASURE_CUT") or 60)
RATE = float(os.environ.get("MEASURE_RATE") or 20)


def summary(name: str, values: list[float]) -> str:
    ordered = sorted(values)
    p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
    return f"{name}: p50 {statistics.median(ordered) * 1000:.1f} ms, p99 {p99 * 1000:.1f} ms, n {len(ordered)}"


async def socket(url: str, name: str) -> SocketClient:
    return await SocketClient(url, await asyncio.to_thread(sign_in, url, name)).connect()


async def timed_posts(ws: SocketClient, room: str, n: int) -> list[float]:
    times = []
    for i in range(n):
        started = time.perf_counter()
        ack = await ws.call("room.post", {"room": room, "body": f"timed {i}"})
        assert ack["ok"], ack
        times.append(time.perf_counter() - started)
    return times


async def lags(home: SocketClient, replica: SocketClient, n: int) -> list[float]:
    """Post at the home, paced, while the replica's socket reads: per post, its msg's time there after its ack."""
    acked: dict[int, float] = {}
    seen: dict[int, float] = {}

    async def read() -> None:
        while len(seen) < n:
            frame = await replica.receive(timeout=30)
            if frame.get("t") == "msg" and frame["d"]["room"] == "lag@a":
                seen[frame["d"]["seq"]] = time.perf_counter()

    reader = asyncio.create_task(read())
    for i in range(n):
        ack = await home.call("room.post", {"room": "lag", "body": f"lag {i}"})
        acked[ack["d"]["seq"]] = time.perf_counter()
        await asyncio.sleep(1 / RATE)
    await reader
    return [seen[seq] - acked[seq] for seq in acked]


async def catch_up(pair: Pair, home: SocketClient, replica: SocketClient) -> tuple[float, int]:
    """Seconds from the link's return until the replica's socket holds every message posted before it."""
    seen: set[int] = set()
    posted = [0]
    posting = True

    async def post() -> None:
        # Each post waits for its ack, so the home's socket is read all along.
        while posting:
            posted[0] = (await home.call("room.post", {"room": "cut", "body": "steady"}))["d"]["seq"]
            await asyncio.sleep(1 / RATE)

    async def read() -> None:
        while True:
            frame = await replica.receive(timeout=600)
            if frame.get("t") == "msg" and frame["d"]["room"] == "cut@a":
                seen.add(frame["d"]["seq"])

    reader = asyncio.create_task(read())
    poster = asyncio.create_task(post())
    await asyncio.to_thread(pair.b.inbound.refuse, CUT + 60)
    await asyncio.sleep(CUT)
    last = posted[0]
    healed = time.perf_counter()
    pair.b.inbound.heal()
    while not set(range(1, last + 1)) <= seen:
        await asyncio.sleep(0.01)
    took = time.perf_counter() - healed
    posting = False
    await poster
    reader.cancel()
    return took, last


async def measure(pair: Pair) -> None:
    ana, bo = await socket(pair.a.url, "ana"), await socket(pair.b.url, "bo")
    for room in ("timed", "lag", "cut"):
        await ana.join(room)
        await bo.join(f"{room}@a")
    await timed_posts(ana, "timed", 20)  # warm both paths
    await timed_posts(bo, "timed@a", 20)
    local = await timed_posts(ana, "timed", POSTS)
    remote = await timed_posts(bo, "timed@a", POSTS)
    print(summary("ack of a post by the home's user", local))
    print(summary("ack of a post by the replica's user", remote))
    extra = statistics.median(remote) - statistics.median(local)
    print(f"extra for the replica's user: {extra * 1000:.1f} ms at the median")
    bo.inbox.clear()
    print(summary("replication lag, home ack to the replica's msg", await lags(ana, bo, POSTS)))
    took, last = await catch_up(pair, ana, bo)
    print(f"catch-up after a {CUT:g} s cut at {RATE:g} posts/s: {took:.2f} s for {last} messages")
    await ana.close()
    await bo.close()


def main() -> int:
    base_url = os.environ.get("DATABASE_URL") or "postgres://postgres@127.0.0.1:5432/messaging"
    directory = Path(tempfile.mkdtemp(prefix="measure-"))
    name = template(base_url, "measure")
    # A measurement, not a test of the limits: one socket posts as fast as its acks come back.
    limits = {
        "MESSAGING_RATE_PER_SECOND": "10000",
        "MESSAGING_RATE_BURST": "10000",
        "MESSAGING_USER_RATE_LIMIT": "1000000",
    }
    pair = Pair(base_url, name, directory, collected_static(directory), env=limits, kind="measure").start()
    try:
        asyncio.run(measure(pair))
    finally:
        pair.stop()
        pair.drop()
        databases.drop(base_url, name)
    return 0


if __name__ == "__main__":
    sys.exit(main())
