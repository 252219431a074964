"""Faults in the middle of a burst: nothing is lost, nothing doubles.

Each scenario runs a fleet of outboxes (four users, two tabs each, two rooms)
over two daphne processes, injects the fault in the middle of a burst (some
acks in, the rest in flight), sends more, waits until every outbox is empty
and then checks the database (`verify`).
"""

from __future__ import annotations

import asyncio
import signal
import threading
import time
from dataclasses import dataclass

import pytest
from asgiref.sync import sync_to_async

from messaging.models import Message
from messaging.testing import SocketClient

from ..support.servers import Daphne, RedisServer
from .conftest import fault_redis_client, raw_db, sign_in_many
from .outbox import Outbox, settle, verify

pytestmark = [pytest.mark.e2e]

ROOMS = ["alpha", "beta"]


@dataclass
class Run:
    servers: list[Daphne]
    redis: RedisServer
    fleet: list[Outbox]


async def burst(fleet: list[Outbox], count: int, label: str) -> None:
    await asyncio.gather(*(o.post_many(count, label) for o in fleet))


async def strike_mid_burst(run: Run, fault, count: int = 20) -> None:
    """Send a burst and strike once some of it is acked: the rest is in flight."""
    sending = asyncio.create_task(burst(run.fleet, count, "during"))
    deadline = time.monotonic() + 30
    while sum(len(o.acks) for o in run.fleet) < count and time.monotonic() < deadline:
        await asyncio.sleep(0.005)
    await fault(run)
    await sending


async def drop_every_socket(run: Run) -> None:
    for outbox in run.fleet:
        outbox.drop()


async def kill_a_server(run: Run) -> None:
    run.servers[0].kill()


async def stop_a_server_past_the_lease(run: Run) -> None:
    run.servers[0].signal(signal.SIGSTOP)
    for outbox in run.fleet:
        outbox.ack_timeout = 1.0  # notice the silent server sooner and move on
    # Commands in flight on the stopped server, however much of the burst it had answered:
    # its outboxes hear nothing for 3 ack timeouts and move to the other server.
    await burst(run.fleet, 2, "stopped")
    await asyncio.sleep(6)  # three CLAIM_LEASEs: its claims run out, retries take new ones
    run.servers[0].signal(signal.SIGCONT)


async def flush_redis(run: Run) -> None:
    fault_redis_client(run.redis).flushall()  # the suite's own Redis: nobody else's data
    # Acks in flight are lost too, so the retries find no result in Redis:
    # the durable record must answer them.
    await drop_every_socket(run)


async def kill_and_restart_redis(run: Run) -> None:
    run.redis.stop()
    await drop_every_socket(run)  # reconnect and resend while Redis is gone
    await burst(run.fleet, 5, "redis-down")
    await asyncio.sleep(1)
    run.redis.start()  # empty: it keeps nothing on disk


def hold_rooms_then_terminate_waiters(locked: threading.Event) -> int:
    """Lock both rooms so posts queue inside their transactions, then
    terminate those backends (only this test database's) mid-command."""
    with raw_db() as db, db.cursor() as cur:
        # In the rooms' id order, as every transaction of the app locks them
        # (posts_and_records.sql): in another order a batch holding one room
        # while it waits for the other deadlocks with this.
        cur.execute("SELECT id FROM messaging_room WHERE slug = ANY(%s) ORDER BY id FOR UPDATE", [ROOMS])
        locked.set()
        waiting = 0
        deadline = time.monotonic() + 20
        while not waiting and time.monotonic() < deadline:
            time.sleep(0.05)
            cur.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'"
            )
            waiting = cur.fetchone()[0]
        cur.execute(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity"
            " WHERE datname = current_database() AND pid <> pg_backend_pid()"
            " AND (wait_event_type = 'Lock' OR state LIKE 'idle in transaction%')"
        )
        terminated = cur.fetchone()[0]
        db.rollback()
    return terminated


async def terminate_postgres_backends(run: Run) -> None:
    locked = threading.Event()
    holder = asyncio.create_task(sync_to_async(hold_rooms_then_terminate_waiters, thread_sensitive=False)(locked))
    await sync_to_async(locked.wait, thread_sensitive=False)(20)
    await burst(run.fleet, 5, "pg-fault")
    assert await holder >= 1, "no backend was mid-command"


FAULTS = {
    "socket-dropped-after-send": (drop_every_socket, lambda report: report["connects"] > 8),
    "kill-9-a-server": (kill_a_server, lambda report: report["connects"] > 8),
    "sigstop-a-server-past-the-lease": (stop_a_server_past_the_lease, lambda report: report["connects"] > 8),
    "redis-flushall": (flush_redis, lambda report: report["connects"] > 8),
    "redis-killed-and-restarted": (kill_and_restart_redis, lambda report: report["connects"] > 8),
    # Deterministic: the terminated backends were inside a command.
    "postgres-backends-terminated": (
        terminate_postgres_backends,
        lambda report: report["retryable"].get("unavailable", 0) >= 1,
    ),
}


@pytest.mark.parametrize("name", FAULTS)
async def test_a_fault_mid_burst_loses_nothing_and_doubles_nothing(name, cluster, fault_redis, outboxes):
    fault, exercised = FAULTS[name]
    servers = cluster(2)
    urls = [server.url for server in servers]
    sessions = await sign_in_many(urls[0], 4)
    fleet = [
        await outboxes(session, urls, ROOMS[n % 2], first=tab) for n, session in enumerate(sessions) for tab in range(2)
    ]
    run = Run(servers, fault_redis, fleet)

    await burst(fleet, 5, "before")
    await strike_mid_burst(run, fault)
    await burst(fleet, 5, "after")
    await settle(fleet)
    report = await sync_to_async(verify)(fleet)
    print(name, report)
    assert exercised(report), report


async def test_a_lost_ack_is_answered_from_the_first_attempt_on_the_other_process(cluster):
    a, b = cluster(2)
    (session,) = await sign_in_many(a.url, 1)
    first = await SocketClient(a.url, session).connect()
    assert (await first.call("room.join", {"room": "lobby"}))["ok"]
    ids = [await first.send("room.post", {"room": "lobby", "body": f"m{n}"}) for n in range(10)]

    # Applied, but the acks are never read: the socket drops first.
    deadline = time.monotonic() + 30
    while await Message.objects.acount() < len(ids) and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    first.ws.transport.abort()

    second = await SocketClient(b.url, session).connect()
    acks = []
    for n, id in enumerate(ids):
        ack = await second.call("room.post", {"room": "lobby", "body": f"m{n}"}, id=id)
        for _ in range(20):  # as an outbox would, should A still be storing the result
            if ack["ok"] or not ack["error"]["retry"]:
                break
            await asyncio.sleep(0.2)
            ack = await second.call("room.post", {"room": "lobby", "body": f"m{n}"}, id=id)
        acks.append(ack)
    await second.close()
    stored = {m.client_msg_id: m.seq async for m in Message.objects.all()}
    assert [a["ok"] and a["dup"] for a in acks] == [True] * 10
    assert [a["d"]["seq"] for a in acks] == [stored[id] for id in ids] == list(range(1, 11))
