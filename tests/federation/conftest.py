"""Two real deployments (daphne, PostgreSQL, Redis each) with a fault proxy between them (tests/support/deployments.py)."""

from __future__ import annotations

import os

import pytest

from ..support import databases
from ..support.deployments import Pair, template


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
