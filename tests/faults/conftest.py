"""Fault-suite fixtures: two daphne processes over the test database and a Redis of the suite's own.

The Redis is started on its own port, so a test may flush, kill and restart
it without touching the Redis other checkouts share.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from contextlib import contextmanager

import psycopg
import pytest
import redis
from asgiref.sync import sync_to_async
from django.db import connection
from psycopg import sql

from messaging_client import sign_in

from ..support.servers import Daphne, RedisServer
from .outbox import Outbox

# Short enough that a scenario waits out a dead process's claim in seconds.
FAULT_SETTINGS = {
    "MESSAGING_CLAIM_LEASE": "2",
    "MESSAGING_IN_PROGRESS_WAIT": "0.5",
    "MESSAGING_REDIS_TIMEOUT": "0.3",
}


@pytest.fixture
def fault_redis(tmp_path):
    server = RedisServer(tmp_path).start()
    yield server
    server.stop()


@pytest.fixture
def cluster(start_daphne, fault_redis):
    """Start daphne processes on the fault Redis; `cluster(2)` returns two."""

    def start(count: int = 2, args: tuple[str, ...] = (), **env: str) -> list[Daphne]:
        return [start_daphne(args, **{"REDIS_URL": fault_redis.url, **FAULT_SETTINGS, **env}) for _ in range(count)]

    return start


@pytest.fixture
async def outboxes():
    """Open outboxes: `await outboxes(session, urls, room, first=i)`; all closed at the end."""
    opened: list[Outbox] = []

    async def open_outbox(session: str, urls: list[str], room: str, first: int = 0) -> Outbox:
        outbox = Outbox(session, urls, room, first=first)
        opened.append(outbox)
        return await outbox.start()

    yield open_outbox
    await asyncio.gather(*(o.close() for o in opened))


async def sign_in_many(url: str, count: int, prefix: str = "user") -> list[str]:
    return [await sync_to_async(sign_in, thread_sensitive=False)(url, f"{prefix}{n}") for n in range(count)]


def fault_redis_client(server: RedisServer) -> redis.Redis:
    return redis.Redis(port=server.port, socket_timeout=2)


def raw_db(dbname: str | None = None, autocommit: bool = False) -> psycopg.Connection:
    """A connection of the test's own, outside Django, to hold locks and terminate backends
    (to the test database, or to `dbname`)."""
    db = connection.settings_dict
    return psycopg.connect(
        host=db["HOST"] or "127.0.0.1",
        port=db["PORT"] or 5432,
        user=db["USER"] or "postgres",
        dbname=dbname or db["NAME"],
        autocommit=autocommit,
    )


def database_time():
    with raw_db() as db, db.cursor() as cur:
        cur.execute("SELECT clock_timestamp()")
        return cur.fetchone()[0]


def terminate_backends(since) -> int:
    """End this test database's backends opened since `since` (the server's, not
    the test's own): what a failover does to a server's connections."""
    with raw_db() as db, db.cursor() as cur:
        cur.execute(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity"
            " WHERE datname = current_database() AND pid <> pg_backend_pid() AND backend_start > %s",
            [since],
        )
        return cur.fetchone()[0]


@contextmanager
def database_down(since) -> Iterator[int]:
    """The test database refuses every new connection and has ended those opened since `since`
    (the server's, not the test's own) for as long as the block runs: an outage, not a blip.
    Yields how many backends were ended."""
    name = sql.Identifier(connection.settings_dict["NAME"])
    # From another database: PostgreSQL will not refuse connections to the one a session is in.
    with raw_db("postgres", autocommit=True) as admin:
        admin.execute(sql.SQL("ALTER DATABASE {} ALLOW_CONNECTIONS false").format(name))
        try:
            ended = admin.execute(
                "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE datname = %s AND backend_start > %s",
                [connection.settings_dict["NAME"], since],
            ).fetchone()[0]
            yield ended
        finally:
            admin.execute(sql.SQL("ALTER DATABASE {} ALLOW_CONNECTIONS true").format(name))
