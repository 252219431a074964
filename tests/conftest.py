"""Fixtures for the whole suite."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Iterator

import pytest
import redis
from asgiref.sync import SyncToAsync
from django.db import connection, connections

from messaging.core.gateway import close_database_threads
from messaging.core.runtime import close_all_runtimes

from .support import databases
from .support.deployments import Pair, template
from .support.servers import ROOT, Daphne, Uvicorn, deployed_env


@pytest.fixture(autouse=True)
def _close_worker_thread_connections():
    """Async code under test reaches the database from asgiref's one worker
    thread and the app's pool of command threads, whose connections persist.
    Close them after each test, or the test database cannot be flushed and
    dropped. An event loop's own connections close with the loop (its
    runtime); those of a loop still open are closed here too."""
    yield
    SyncToAsync.single_thread_executor.submit(connections.close_all).result()
    close_database_threads()
    close_all_runtimes()


# Real server processes, shared by the e2e, browser, fault and integration suites.


@pytest.fixture(scope="session")
def static_root(tmp_path_factory):
    """What a deployment serves with DEBUG off: collectstatic output, through whitenoise."""
    root = tmp_path_factory.mktemp("static")
    env = {**os.environ, "DEBUG": "0", "SECRET_KEY": "e2e", "STATIC_ROOT": str(root)}
    subprocess.run([sys.executable, "manage.py", "collectstatic", "--noinput", "-v0"], cwd=ROOT, env=env, check=True)
    return root


@pytest.fixture
def server_env(transactional_db, static_root, tmp_path):
    """The environment of a deployed server process, pointed at the test database."""
    db = connection.settings_dict
    database_url = (
        f"postgres://{db['USER'] or 'postgres'}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/{db['NAME']}"
    )
    client = redis.Redis.from_url(os.environ["REDIS_URL"])
    client.flushdb()
    # Uploaded files: the test's own folder, shared by the processes it starts.
    yield {**deployed_env(database_url, os.environ["REDIS_URL"], static_root), "MEDIA_ROOT": str(tmp_path / "media")}
    client.flushdb()
    client.close()


def servers_of(kind: type[Daphne], server_env: dict[str, str], tmp_path) -> Iterator[Callable[..., Daphne]]:
    """A fixture's `start(args=(...), ready_path=..., **env)`: one more `kind` process
    (daphne, uvicorn) of the demo project; those it started are stopped at the end."""
    servers: list[Daphne] = []

    def start(args: tuple[str, ...] = (), ready_path: str = "/login/", **env: str) -> Daphne:
        server = kind({**server_env, **env}, log_dir=tmp_path, args=args, ready_path=ready_path).start()
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.stop()


@pytest.fixture
def start_daphne(server_env, tmp_path):
    """`start_daphne(args=(...), ready_path=..., **env)`: one more daphne process of the demo project, stopped at the end."""
    yield from servers_of(Daphne, server_env, tmp_path)


@pytest.fixture
def start_uvicorn(server_env, tmp_path):
    """`start_uvicorn(args=(...), **env)`: the same as `start_daphne`, served by uvicorn."""
    yield from servers_of(Uvicorn, server_env, tmp_path)


# Two federated deployments (tests/support/deployments.py): their databases are copies of one template.


@pytest.fixture(scope="session")
def peer_template():
    name = template(os.environ["DATABASE_URL"])
    yield name
    databases.drop(os.environ["DATABASE_URL"], name)


@pytest.fixture
def start_pair(peer_template, static_root, tmp_path):
    """`start_pair(servers=1, seed=0, **env)`: deployments a and b, stopped and dropped at the end."""
    pairs: list[Pair] = []

    def start(servers: int = 1, seed: int = 0, **env: str) -> Pair:
        pair = Pair(
            os.environ["DATABASE_URL"], peer_template, tmp_path, static_root, servers=servers, seed=seed, env=env
        )
        pairs.append(pair)
        return pair.start()

    yield start
    for pair in pairs:
        pair.stop()
        pair.drop()
