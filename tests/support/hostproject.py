"""The host project of tests/package: a separate Django project that adds the app
as docs/INTEGRATION.md says, here on a PostgreSQL database of its own."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import psycopg

from .servers import ROOT

HOST = ROOT / "tests" / "package" / "hostproject"


@contextmanager
def postgres_database(suffix: str) -> Iterator[str]:
    """A new, empty database beside the test run's (`DATABASE_URL`); yields its URL and drops it after."""
    url = psycopg.conninfo.conninfo_to_dict(os.environ["DATABASE_URL"].replace("postgres://", "postgresql://", 1))
    name = f"{url.pop('dbname')}_{suffix}"
    server = {**url, "dbname": "postgres"}
    with psycopg.connect(**server, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        yield f"postgres://{url.get('user', 'postgres')}@{url.get('host', '127.0.0.1')}:{url.get('port', 5432)}/{name}"
    finally:
        with psycopg.connect(**server, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def host_env(redis_url: str, **settings: str) -> dict[str, str]:
    """This process's environment, less what points at the demo project, for the host project's processes."""
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in {"DJANGO_SETTINGS_MODULE", "PYTHONPATH", "DATABASE_URL", "PROMETHEUS_MULTIPROC_DIR"}
    }
    return {**env, "DJANGO_SETTINGS_MODULE": "hostsite.settings", "REDIS_URL": redis_url, **settings}


def uuid_users_env(env: dict[str, str], database_url: str) -> dict[str, str]:
    """The host's environment on PostgreSQL with its user model keyed by UUID."""
    return {**env, "HOST_DATABASE_URL": database_url, "HOST_UUID_USERS": "1"}


def migrate(python: str | Path, project: Path, env: dict[str, str]) -> None:
    proc = subprocess.run(
        [str(python), "manage.py", "migrate", "--noinput"],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
