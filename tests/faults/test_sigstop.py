"""A server process stopped (SIGSTOP) for longer than CLAIM_LEASE, then resumed.

Its claim runs out while it is stopped, so a retry on the other process takes
a new claim and runs the command again. Two things must hold when the slow
first attempt wakes up: the command is applied once, and the slow attempt does
not delete the newer claim.

The test holds the room's row lock itself, so the first attempt is stopped
at a known point: its statement waiting for the seq increment.
"""

from __future__ import annotations

import asyncio
import signal
import time

import pytest

from messaging.core.claims import claim_key
from messaging.models import Message, Room
from messaging.testing import SocketClient

from .conftest import fault_redis_client, raw_db, sign_in_many

pytestmark = [pytest.mark.e2e]

POST = {"room": "lobby", "body": "slow"}


async def until(check, what: str, timeout: float = 20):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        await asyncio.sleep(0.02)
    raise AssertionError(f"timed out waiting for {what}")


def backends(db, condition: str, what: str = "*") -> int:
    """Count (or act on) this test database's backends matching `condition`."""
    with db.cursor() as cur:
        cur.execute(f"SELECT count({what}) FROM pg_stat_activity WHERE datname = current_database() AND {condition}")
        return cur.fetchone()[0]


@pytest.fixture
async def stage(cluster, fault_redis):
    """Two processes, one user with a socket on each, joined to `lobby`; Redis and a watcher connection."""
    # A's claim must run out while it is stopped; B's must not while the test inspects it.
    (a,), (b,) = cluster(1, MESSAGING_CLAIM_LEASE="2"), cluster(1, MESSAGING_CLAIM_LEASE="30")
    (session,) = await sign_in_many(a.url, 1)
    on_a, on_b = await SocketClient(a.url, session).connect(), await SocketClient(b.url, session).connect()
    joins = [await ws.call("room.join", {"room": "lobby"}) for ws in (on_a, on_b)]
    (member,) = joins[0]["d"]["members"]
    user = member["user"]
    redis = fault_redis_client(fault_redis)
    watcher = raw_db()
    watcher.autocommit = True
    yield a, on_a, on_b, redis, user, watcher
    watcher.close()
    for ws in (on_a, on_b):
        await ws.close()


async def stop_a_inside_its_attempt(a, on_a, redis, key: str, watcher, lock) -> bytes:
    """Take the room's row lock, send the post to A, and stop A once it waits on that lock."""
    lock.execute("SELECT id FROM messaging_room WHERE slug = 'lobby' FOR UPDATE")
    await on_a.send("room.post", POST, id=key.rsplit(":", 1)[1])
    owner = await until(lambda: redis.get(key), "A's claim")
    assert owner.startswith(b"c:")
    await until(lambda: backends(watcher, "wait_event_type = 'Lock'"), "A waiting on the room lock")
    a.signal(signal.SIGSTOP)
    return owner


async def retry_on_b_once_the_claim_runs_out(on_b, redis, key: str, owner_a: bytes, watcher) -> bytes:
    """The outbox retries on the other process after A's lease: B claims anew and waits on the room lock."""
    await until(lambda: redis.get(key) is None, "A's claim to run out", timeout=10)
    await on_b.send("room.post", POST, id=key.rsplit(":", 1)[1])
    owner_b = await until(lambda: redis.get(key), "B's claim")
    assert owner_b.startswith(b"c:") and owner_b != owner_a
    # B's process is stalled meanwhile: one database thread (see RELIABILITY.md).
    await until(lambda: backends(watcher, "wait_event_type = 'Lock'"), "B waiting on the room lock")
    return owner_b


def stored(db, command_id: str) -> bool:
    with db.cursor() as cur:
        cur.execute("SELECT 1 FROM messaging_message WHERE client_msg_id = %s", [command_id])
        return cur.fetchone() is not None


async def test_stopped_attempt_finishing_while_stopped_applies_once(stage):
    a, on_a, on_b, redis, user, watcher = stage
    key = claim_key(user, "stopped-1")
    with raw_db() as lock:
        await stop_a_inside_its_attempt(a, on_a, redis, key, watcher, lock)
        lock.rollback()
    # On PostgreSQL a post is one statement, so one transaction: A's backend
    # finishes it alone while A's process is stopped, and holds no lock after.
    await until(lambda: stored(watcher, "stopped-1"), "A's post to commit")
    await until(lambda: redis.get(key) is None, "A's claim to run out", timeout=10)
    # The outbox retries on the other process: B claims anew, and the durable
    # record answers it with the original ack.
    second = await on_b.call("room.post", POST, id="stopped-1")

    a.signal(signal.SIGCONT)
    first = await on_a.ack("stopped-1")
    assert first["ok"] and first["dup"] is False
    assert second["ok"] and second["dup"] is True and second["d"] == first["d"]
    assert [(m.seq, m.client_msg_id) async for m in Message.objects.all()] == [(1, "stopped-1")]
    assert (await Room.objects.aget(slug="lobby")).last_seq == 1, "B's rolled-back increment left no gap"
    assert redis.get(key).startswith(b"r:")
    assert (await on_b.call("room.post", {"room": "lobby", "body": "next"}))["d"]["seq"] == 2


async def test_stopped_attempt_failing_on_resume_leaves_the_newer_claim_alone(stage):
    a, on_a, on_b, redis, user, watcher = stage
    key = claim_key(user, "stopped-2")
    with raw_db() as lock:
        owner_a = await stop_a_inside_its_attempt(a, on_a, redis, key, watcher, lock)
        # A's connection dies while A is stopped: A will fail when it wakes.
        assert backends(watcher, "wait_event_type = 'Lock'", what="pg_terminate_backend(pid)") == 1
        owner_b = await retry_on_b_once_the_claim_runs_out(on_b, redis, key, owner_a, watcher)  # waits on ours

        a.signal(signal.SIGCONT)
        failed = await on_a.ack("stopped-2")
        assert failed["ok"] is False and failed["error"]["code"] == "unavailable" and failed["error"]["retry"]
        # A released its claim on the way out, after the ack's cause: B's must still be there.
        assert redis.get(key) == owner_b
        lock.rollback()

    applied = await on_b.ack("stopped-2")
    assert applied["ok"] and applied["dup"] is False and applied["d"]["seq"] == 1
    retried = await on_a.call("room.post", POST, id="stopped-2")  # the outbox retries the unavailable
    assert retried["ok"] and retried["dup"] is True and retried["d"] == applied["d"]
    assert [(m.seq, m.client_msg_id) async for m in Message.objects.all()] == [(1, "stopped-2")]
