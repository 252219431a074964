"""PostgreSQL from the event loop itself, for the statements that batches run.

A batch of posts is one statement (`commands.POSTS_AND_RECORDS`). On a
database thread it cost a hop there and back, and on a busy event loop each
of its replies waited for the GIL behind the loop: a batch of 16 posts took
4.8-5.1 ms to apply from the loop's side, 3.5-3.6 ms here (docs/PERFORMANCE.md).
With psycopg's async connection the statement is one more event on the loop.

Receipts are one statement too (a call of `messaging_move_watermarks`), so
they run here as well.

Each event loop keeps its own connections, opened with the parameters Django
uses for the database (so a test run's database, and `OPTIONS` such as
`prepare_threshold`), in autocommit mode: one per statement running at once,
at most `connection_limit()` (more statements wait for one, in turn), kept
between statements like Django's persistent connections, and dropped when
broken or interrupted, so that the next statement opens a fresh one.

Errors are Django's: a unique violation raises `django.db.IntegrityError`,
any other database error `django.db.DatabaseError`, as the ORM would.
"""
from __future__ import annotations

import asyncio
import time
import weakref
from typing import Any

from django.db import DEFAULT_DB_ALIAS, DatabaseError, IntegrityError, connections

from ..conf import get_settings

try:
    import psycopg
except ImportError:  # psycopg2 only: every statement stays on a database thread
    psycopg = None


def connection_limit() -> int:
    """How many connections an event loop keeps at most: `DB_THREADS`, and at
    least 2, so that a batch of posts (at most `DB_THREADS // 2` run at once)
    finds one beside a receipt. Before receipts ran here, the threads bounded
    them; a thousand sockets sending receipts at once must not open a
    thousand connections."""
    return max(2, get_settings().DB_THREADS)


class LoopDatabase:
    """One event loop's connections to one database."""

    def __init__(self, alias: str = DEFAULT_DB_ALIAS) -> None:
        # Django's connection object of the loop's thread, looked up once (a
        # thread-local): its parameters, and whether it logs queries.
        self.django = connections[alias]
        self.idle: list[Any] = []
        # Every open connection, idle or running a statement, for `close`.
        self.open: set[Any] = set()
        # A slot per connection that may be open; a statement holds one while it runs.
        self.slots = asyncio.Semaphore(connection_limit())

    async def fetch(self, sql: str, params: dict[str, Any]) -> list[tuple]:
        """Run one statement (its own transaction) and return its rows."""
        async with self.slots:
            return await self.fetch_on_a_connection(sql, params)

    async def fetch_on_a_connection(self, sql: str, params: dict[str, Any]) -> list[tuple]:
        started = time.perf_counter()
        try:
            conn = self.idle.pop() if self.idle else await self.connect()
        except psycopg.Error as exc:
            raise DatabaseError(*exc.args) from exc
        keep = False
        try:
            cursor = await conn.execute(sql, params)
            rows = await cursor.fetchall()
            keep = True
            return rows
        except psycopg.IntegrityError as exc:
            # Undone by PostgreSQL, as every failed statement in autocommit mode.
            keep = True
            raise IntegrityError(*exc.args) from exc
        except psycopg.Error as exc:
            keep = not (conn.closed or conn.broken)
            raise DatabaseError(*exc.args) from exc
        finally:
            # Cancelled mid-statement, the connection is in an unknown state: dropped.
            if keep:
                self.idle.append(conn)
            else:
                self.discard(conn)
            self.logged(sql, params, started)

    async def connect(self) -> Any:
        db = self.django
        params = db.get_connection_params()
        # Django's cursor classes are sync ones; the async connection brings its own.
        params.pop("cursor_factory", None)
        conn = await psycopg.AsyncConnection.connect(**params, autocommit=True)
        role = db.settings_dict["OPTIONS"].get("assume_role")
        if role:
            await conn.execute(psycopg.sql.SQL("SET ROLE {}").format(psycopg.sql.Identifier(role)))
        self.open.add(conn)
        return conn

    def discard(self, conn: Any) -> None:
        self.open.discard(conn)
        if not conn.closed:
            # Closed at once, from any thread or loop: the socket goes, no goodbye.
            conn.pgconn.finish()

    def close(self) -> None:
        """Close every connection (tests; a loop that is gone)."""
        for conn in list(self.open):
            self.discard(conn)
        self.idle.clear()

    def logged(self, sql: str, params: dict[str, Any], started: float) -> None:
        # Where Django logs the ORM's queries (DEBUG, a test counting them),
        # the statements run here are logged alongside.
        db = self.django
        if db.queries_logged:
            db.queries_log.append({"sql": f"{sql} -- {params!r}", "time": f"{time.perf_counter() - started:.3f}"})


_databases: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, LoopDatabase | None] = weakref.WeakKeyDictionary()


def loop_database() -> LoopDatabase | None:
    """This event loop's database connections, or None where statements run on a
    database thread instead: not PostgreSQL with psycopg 3, or `LOOP_DATABASE` off."""
    if psycopg is None or not get_settings().LOOP_DATABASE:
        return None
    loop = asyncio.get_running_loop()
    if loop not in _databases:
        # Once per loop; None for a database other than PostgreSQL.
        database = LoopDatabase()
        _databases[loop] = database if database.django.vendor == "postgresql" else None
    return _databases[loop]


def close_loop_databases() -> None:
    """Close the connections of every event loop (tests, shutdown)."""
    for database in list(_databases.values()):
        if database is not None:
            database.close()
