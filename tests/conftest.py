"""Fixtures for the whole suite."""
from __future__ import annotations

import pytest
from asgiref.sync import SyncToAsync
from django.db import connections

from messaging.idempotency import close_db_threads


@pytest.fixture(autouse=True)
def _close_worker_thread_connections():
    """Async code under test reaches the database from asgiref's one worker
    thread or the app's pool of command threads, which keep persistent
    connections (CONN_MAX_AGE). Close them after each test, or the test
    database cannot be flushed and dropped."""
    yield
    SyncToAsync.single_thread_executor.submit(connections.close_all).result()
    close_db_threads()
