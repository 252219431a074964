"""Databases of the tests' own on the shared PostgreSQL server: URLs, connections, templates.

The server is shared (other checkouts, other engineers), so a test only ever
creates, copies, drops and terminates backends of databases named after its
base database (`DATABASE_URL`'s): `<base>_<suffix>`.
"""

from __future__ import annotations

import os
import subprocess
import sys
from urllib.parse import urlsplit, urlunsplit

import psycopg

from .servers import ROOT


def database_url(base_url: str, name: str) -> str:
    parts = urlsplit(base_url)
    return urlunsplit(parts._replace(path="/" + name))


def database_name(url: str) -> str:
    return urlsplit(url).path.lstrip("/")


def connect_params(url: str) -> dict:
    parts = urlsplit(url)
    return {
        "host": parts.hostname or "127.0.0.1",
        "port": parts.port or 5432,
        "user": parts.username or "postgres",
        "password": parts.password,
        "dbname": database_name(url),
    }


def connect(url: str, **kwargs) -> psycopg.Connection:
    return psycopg.connect(**connect_params(url), **kwargs)


def admin(base_url: str) -> psycopg.Connection:
    """A connection to the maintenance database, to create and drop the tests' own."""
    return connect(database_url(base_url, "postgres"), autocommit=True)


def drop(base_url: str, name: str) -> None:
    with admin(base_url) as db:
        db.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def migrated(base_url: str, name: str, *extra_sql: str) -> str:
    """A new database `name`, migrated by `manage.py migrate` (and `extra_sql` run in it); its URL."""
    drop(base_url, name)
    with admin(base_url) as db:
        db.execute(f'CREATE DATABASE "{name}"')
    url = database_url(base_url, name)
    subprocess.run(
        [sys.executable, "manage.py", "migrate", "--noinput", "-v0", "--skip-checks"],
        cwd=ROOT,
        check=True,
        env={**os.environ, "DATABASE_URL": url, "REDIS_URL": "", "DEBUG": "0", "SECRET_KEY": "tests"},
    )
    if extra_sql:
        with connect(url, autocommit=True) as db:
            for sql in extra_sql:
                db.execute(sql)
    return url


def copied(base_url: str, template: str, name: str) -> str:
    """A new database `name`, a copy of `template`; its URL."""
    drop(base_url, name)
    with admin(base_url) as db:
        db.execute(f'CREATE DATABASE "{name}" TEMPLATE "{template}"')
    return database_url(base_url, name)
