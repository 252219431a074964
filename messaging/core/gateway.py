"""The database gateway: how the pipeline and the command types reach the database.

Two kinds of work reach it:

* `fetch(sql, params)`: one statement in its own transaction (a batch of
  posts, a receipt's move), returning its rows;
* `run(func, *args)`: ORM work (a portable `apply`, a record's lookup) on a
  database thread, in the transaction `func` opens.

Where a statement runs is chosen in one place, `Gateway.connections`: on PostgreSQL
with psycopg 3 (and `LOOP_DATABASE` on), on the event loop's own
connections (`LoopConnections`); elsewhere on a database thread through
Django's connection. Nothing else in the app asks which database it runs on:
a command type's batch form is picked by the gateway's `vendor`.

On a database thread a batch of 16 posts took 4.8-5.1 ms to apply from the
loop's side, since each reply waited for the GIL behind the busy loop; on the
loop's own connection 3.5-3.6 ms (docs/PERFORMANCE.md).

Errors are Django's: a unique violation raises `django.db.IntegrityError`,
any other database error `django.db.DatabaseError`, wherever it ran.
"""

from __future__ import annotations

import asyncio
import functools
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import nullcontext
from typing import Any

from asgiref.sync import SyncToAsync
from django.db import (
    DEFAULT_DB_ALIAS,
    DatabaseError,
    IntegrityError,
    close_old_connections,
    connection,
    connections,
    transaction,
)

from ..conf import get_settings

try:
    import psycopg
except ImportError:  # psycopg2 only: every statement goes to a database thread
    psycopg = None  # type: ignore[assignment]  # the module's name stands for its absence


class DatabaseSyncToAsync(SyncToAsync[..., Any]):
    """asgiref's thread hop with Django's connection upkeep (CONN_MAX_AGE,
    broken connections) around every call, as channels' own does."""

    def thread_handler(self, loop: Any, *args: Any, **kwargs: Any) -> Any:
        close_old_connections()
        try:
            return super().thread_handler(loop, *args, **kwargs)  # type: ignore[no-untyped-call]  # untyped in asgiref
        finally:
            close_old_connections()


class DatabaseThreads:
    """The process's threads for database work: asgiref's one thread, or a pool of `DB_THREADS`.

    With `DB_THREADS` = 0 every call of the process queues for one thread
    (asgiref's thread-sensitive mode), so the round trips of all commands are
    paid one after another. A pool of N threads, each with its own persistent
    connection, lets N commands wait on PostgreSQL and Redis at once.
    """

    def __init__(self, count: int) -> None:
        self.count = count
        self.pool = ThreadPoolExecutor(max_workers=count, thread_name_prefix="messaging-db") if count else None

    async def run(self, func: Callable[..., Any], *args: Any) -> Any:
        if self.pool is None:
            return await DatabaseSyncToAsync(func)(*args)
        return await DatabaseSyncToAsync(func, thread_sensitive=False, executor=self.pool)(*args)

    def close(self) -> None:
        """Close each pool thread's connection, then the pool."""
        if self.pool is None:
            return
        # One task per thread: the barrier keeps each task on a thread of its own.
        barrier = threading.Barrier(self.count)

        def close() -> None:
            barrier.wait(timeout=10)
            connections.close_all()

        for future in [self.pool.submit(close) for _ in range(self.count)]:
            future.result()
        self.pool.shutdown()


_threads: list[DatabaseThreads] = []


def database_threads() -> DatabaseThreads:
    """The process's database threads (every event loop shares them), for the current `DB_THREADS`."""
    count = get_settings().DB_THREADS
    if not _threads or _threads[-1].count != count:
        # A changed setting (tests) gets threads of its own; the old ones close with the rest.
        _threads.append(DatabaseThreads(count))
    return _threads[-1]


def close_database_threads() -> None:
    """Close the pool threads' connections and the pools (shutdown, tests)."""
    while _threads:
        _threads.pop().close()


class LoopConnections:
    """One event loop's psycopg connections to one database.

    Opened with the parameters Django uses (so a test run's database, and
    `OPTIONS` such as `prepare_threshold`), in autocommit mode: one per
    statement running at once, at most `max(2, DB_THREADS)` (a batch of posts
    finds one beside a receipt; a thousand sockets sending receipts at once
    do not open a thousand connections), kept between statements like
    Django's persistent connections, dropped when broken or interrupted.
    """

    def __init__(self, alias: str = DEFAULT_DB_ALIAS) -> None:
        # Django's connection object of the loop's thread, looked up once (a
        # thread-local): its parameters, and whether it logs queries.
        self.django = connections[alias]
        self.idle: list[Any] = []
        # Every open connection, idle or running a statement, for `close`.
        self.open: set[Any] = set()
        # A slot per connection that may be open; a statement holds one while it runs.
        self.slots = asyncio.Semaphore(max(2, get_settings().DB_THREADS))

    async def fetch(self, sql: str, params: dict[str, Any]) -> list[tuple[Any, ...]]:
        async with self.slots:
            return await self.fetch_on_a_connection(sql, params)

    async def fetch_on_a_connection(self, sql: str, params: dict[str, Any]) -> list[tuple[Any, ...]]:
        started = time.perf_counter()
        try:
            conn = self.idle.pop() if self.idle else await self.connect()
        except psycopg.Error as exc:
            raise DatabaseError(*exc.args) from exc
        keep = False
        try:
            cursor = await conn.execute(sql, params)
            rows: list[tuple[Any, ...]] = await cursor.fetchall()
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
        for conn in list(self.open):
            self.discard(conn)
        self.idle.clear()

    def logged(self, sql: str, params: dict[str, Any], started: float) -> None:
        # Where Django logs the ORM's queries (DEBUG, a test counting them),
        # the statements run here are logged alongside.
        db = self.django
        if db.queries_logged:
            db.queries_log.append({"sql": f"{sql} -- {params!r}", "time": f"{time.perf_counter() - started:.3f}"})


def fetch_on_this_thread(sql: str, params: dict[str, Any]) -> list[tuple[Any, ...]]:
    """One statement through Django's connection of this thread, as its own transaction.

    Bound on the server where psycopg 3 can (`server_bound_cursor`). Inside a
    caller's transaction a savepoint keeps a failure (a unique violation) local.
    """
    with transaction.atomic() if connection.in_atomic_block else nullcontext():
        with server_bound_cursor() as cursor:
            cursor.execute(sql, params)
            rows: list[tuple[Any, ...]] = cursor.fetchall()
            return rows


def server_bound_cursor(db: Any = connection, *, prepared: bool = True) -> Any:
    """A cursor of Django's connection `db` (the default database's) that binds parameters on the server.

    psycopg prepares such a statement once it has run `prepare_threshold`
    times on the connection (`DATABASES[...]["OPTIONS"]`; Django's default,
    None, never prepares), and PostgreSQL then skips parsing and planning it:
    16 posts took 2.6-3.2 ms bound on the client and 0.9-1.1 ms prepared,
    alone on the bench machine (docs/PERFORMANCE.md). Django's own cursors
    bind on the client, and their statements are never prepared. While
    queries are logged (DEBUG, a test capturing them) it is Django's own
    cursor, so the log shows the statement with its parameters in place.

    A statement whose parameters are large belongs here too, `prepared`
    False. psycopg keeps the text of each connection's last 100 distinct
    statements (`prepared_max`), to count their runs, client-bound ones
    included; bound on the client, a statement's text holds its parameters,
    so a query that sent a value per socket was kept whole by every
    connection that ran it. Not prepared, because PostgreSQL's generic plan
    cannot see how many values an array parameter holds: for 10,000 it chose
    10,000 index lookups (11 ms) where each run's own plan hashes (6 ms).
    """
    cursors = server_binding_cursors()
    if cursors is None or db.vendor != "postgresql" or db.queries_logged:
        return db.cursor()
    db.ensure_connection()
    db.validate_thread_sharing()
    with db.wrap_database_errors:
        # Django's wrapper all the same: its errors are django.db's.
        return db.make_cursor(cursors[0 if prepared else 1](db.connection))


@functools.cache
def server_binding_cursors() -> tuple[Any, Any] | None:
    """Django's cursor class that binds on the server, and one whose statements are never prepared; None without
    psycopg 3."""
    try:
        from django.db.backends.postgresql.base import ServerBindingCursor
    except ImportError:  # psycopg2, or another database: no server-side binding
        return None

    class NeverPrepared(ServerBindingCursor):
        def execute(self, query: Any, params: Any = None, *, prepare: bool | None = None, binary: Any = None) -> Any:
            # django-stubs know the class without psycopg's methods.
            return super().execute(query, params, prepare=False, binary=binary)  # type: ignore[misc]

    return ServerBindingCursor, NeverPrepared


class Gateway:
    """One event loop's way to the database (see the module's docstring)."""

    def __init__(self) -> None:
        # What a command type's batch form is chosen by ("postgresql", "sqlite", ...).
        self.vendor: str = connections[DEFAULT_DB_ALIAS].vendor
        self.loop_connections: LoopConnections | None = None

    @property
    def connections(self) -> LoopConnections | None:
        """The loop's own connections, or None where statements run on a database thread.

        The one place that decides: PostgreSQL with psycopg 3 and
        `LOOP_DATABASE` on (read on each statement, so a changed setting holds
        from the next one).
        """
        if self.vendor != "postgresql" or psycopg is None or not get_settings().LOOP_DATABASE:
            return None
        if self.loop_connections is None:
            self.loop_connections = LoopConnections()
        return self.loop_connections

    @property
    def on_loop(self) -> bool:
        """Whether statements run on the event loop's own connections."""
        return self.connections is not None

    async def fetch(self, sql: str, params: dict[str, Any]) -> list[tuple[Any, ...]]:
        """Run one statement (its own transaction) and return its rows."""
        loop_connections = self.connections
        if loop_connections is not None:
            return await loop_connections.fetch(sql, params)
        rows: list[tuple[Any, ...]] = await self.run(fetch_on_this_thread, sql, params)
        return rows

    async def run(self, func: Callable[..., Any], *args: Any) -> Any:
        """`func(*args)` on a database thread."""
        return await database_threads().run(func, *args)

    def close(self) -> None:
        """Close the loop's own connections (the threads are the process's)."""
        if self.loop_connections is not None:
            self.loop_connections.close()
