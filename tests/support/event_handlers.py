"""Event handlers for `messaging_consume` in the tests: a database effect per event,
and faults on cue (the environment names the body that triggers each)."""

from __future__ import annotations

import os
import signal
import time

from django.db import connection, transaction


def record_effect(event: dict) -> None:
    body = event["data"].get("body", "")
    if body.startswith("poison"):
        raise ValueError("poisoned event")
    if body == os.environ.get("TEST_HANG_ON"):
        time.sleep(3600)
    with connection.cursor() as cursor:
        marker = os.environ.get("TEST_SLOW_MARKER", "")
        if body == os.environ.get("TEST_SLOW_ON") and marker and not os.path.exists(marker):
            # Once, and long enough for the test to cut the connection under it.
            open(marker, "w").close()
            cursor.execute("SELECT pg_sleep(30)")
        cursor.execute(
            "INSERT INTO events_test_effect (grp, event_id, body) VALUES ('effects', %s, %s)", [event["event_id"], body]
        )
    if body == os.environ.get("TEST_DIE_ON"):
        # After the commit, before the consumer's XACK: the hardest place to die.
        transaction.on_commit(lambda: os.kill(os.getpid(), signal.SIGKILL))
