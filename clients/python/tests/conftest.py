"""The client's tests, run by the repository's suite (`make test`) against the installed `messaging_client`.

The pure parts (test_outbox_and_rooms.py, test_ids.py) need nothing but the
client. test_client.py talks to real daphne processes of the demo project
on the suite's PostgreSQL and Redis, so it takes the suite's server
fixtures from the repository (tests/conftest.py), as every e2e test does.
This folder is no package: its modules import as `test_client`, not as a
second `tests` beside the repository's.
"""

from __future__ import annotations

from tests.conftest import _close_worker_thread_connections, server_env, start_daphne, static_root  # noqa: F401
