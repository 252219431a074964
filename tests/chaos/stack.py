"""The real parts of a chaos run: a database, a redis-server and daphne processes of the harness's own.

The PostgreSQL server is shared (other checkouts, other helpers), so the
harness only ever creates, drops and terminates backends of databases named
after its base database: `<base>_chaos_template`, migrated once per `Stack`,
and `<base>_chaos`, copied from it for each run. Redis is a server of its own
on a free port, so killing, pausing and flushing it touches nothing else.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import psycopg

from ..support import databases
from ..support.databases import connect, connect_params, database_name, database_url
from ..support.servers import Daphne, RedisServer, collected_static
from .hooks import WALLET_SCHEMA

__all__ = ["Stack", "connect", "connect_params", "database_name", "database_url"]

# The server settings of a run: short enough that a dead process's claims
# and a paused Redis cost seconds, as in the fault suite; the dedup window
# short enough that duplicates after it (answered from the durable record)
# happen in every run, not only after a flush.
SERVER_SETTINGS = {
    "MESSAGING_CLAIM_LEASE": "2",
    "MESSAGING_IN_PROGRESS_WAIT": "0.5",
    "MESSAGING_DEDUP_WINDOW": "20",
}


@dataclass
class Stack:
    """A database template, a static root and a redis-server, shared by the runs made on it."""

    base_url: str
    directory: Path
    static_root: Path | None = None
    redis: RedisServer = field(init=False)

    def __post_init__(self) -> None:
        base = database_name(self.base_url)
        self.template = f"{base}_chaos_template"
        self.run_database = f"{base}_chaos"
        self.redis = RedisServer(self.directory)

    @property
    def run_url(self) -> str:
        return database_url(self.base_url, self.run_database)

    def start(self) -> Stack:
        with ThreadPoolExecutor(2) as pool:
            static = pool.submit(self.collect_static) if self.static_root is None else None
            self.migrate_template()
            if static is not None:
                self.static_root = static.result()
        self.redis.start()
        return self

    def stop(self) -> None:
        self.redis.stop()

    # -- the database --------------------------------------------------------------

    def admin(self) -> psycopg.Connection:
        """A connection to the maintenance database, to create and drop the harness's own."""
        return databases.admin(self.base_url)

    def drop(self, name: str) -> None:
        databases.drop(self.base_url, name)

    def migrate_template(self) -> None:
        """A database with the app's schema and the test command type's table, to copy for each run."""
        databases.migrated(self.base_url, self.template, WALLET_SCHEMA)

    def fresh_database(self) -> str:
        """The run's database, a new copy of the template; returns its URL."""
        return databases.copied(self.base_url, self.template, self.run_database)

    def drop_databases(self) -> None:
        self.drop(self.run_database)
        self.drop(self.template)

    def collect_static(self) -> Path:
        return collected_static(self.directory)

    # -- the servers ---------------------------------------------------------------

    def servers(self, count: int, plant: str | None, log_dir: Path) -> list[Daphne]:
        """`count` daphne processes of the harness's application on the run's database (not started)."""
        env = {
            "DATABASE_URL": self.run_url,
            "REDIS_URL": self.redis.url,
            "DEBUG": "0",
            "SECRET_KEY": "chaos-secret",
            "ALLOWED_HOSTS": "127.0.0.1,localhost",
            "STATIC_ROOT": str(self.static_root),
            "LOG_LEVEL": "WARNING",
            "CHAOS_PLANT": plant or "",
            # Every client of the harness is 127.0.0.1: per-address throttles off, as for the suite's servers.
            "CONNECT_RATE": "0",
            "SIGNIN_RATE": "0",
            "MESSAGING_ROOMS_CREATED_PER_ADDRESS_PER_HOUR": "0",
            **SERVER_SETTINGS,
        }
        return [Daphne(env, log_dir=log_dir, app="tests.chaos.app:application") for _ in range(count)]
