"""`python -m bench.outbox_cost`: what the outbox adds to the posts' statement, alone.

The full path's acks/s with and without the outbox differ by less than the
noise of a shared two-core box (`python -m bench --events`). This measures
the statement itself, in one process, with no sockets: batches of 16 posts
through the posts' statement (`posts_statement`), in alternating blocks with the outbox on and
off, and per mode the statement's median time per batch and the WAL it
writes per post (`pg_current_wal_lsn()`), which the box's noise does not move.
Run with the bench's environment (`DATABASE_URL`, `DJANGO_SETTINGS_MODULE`).
"""

from __future__ import annotations

import json
import statistics
import sys
import time
import uuid


def main(blocks: int = 20, batches: int = 25, size: int = 16) -> dict:
    import django

    django.setup()
    from django.conf import settings
    from django.contrib.auth import get_user_model
    from django.db import connection

    from messaging.chat.posts import Post, posts_statement
    from messaging.conf import get_settings
    from messaging.core.gateway import fetch_on_this_thread
    from messaging.core.handlers import CommandContext
    from messaging.models import Membership, Room

    user, _ = get_user_model().objects.get_or_create(username="outbox-cost")
    rooms = [Room.objects.get_or_create(slug=f"cost-{n}")[0] for n in range(4)]
    for room in rooms:
        Membership.objects.get_or_create(room=room, user=user)

    def wal() -> int:
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_current_wal_lsn() - '0/0'::pg_lsn")
            return int(cursor.fetchone()[0])

    found: dict[str, dict[str, list[float]]] = {
        "with outbox": {"ms": [], "wal": []},
        "without outbox": {"ms": [], "wal": []},
    }
    for block in range(blocks):
        order = ["with outbox", "without outbox"] if block % 2 == 0 else ["without outbox", "with outbox"]
        for mode in order:
            settings.MESSAGING = {**settings.MESSAGING, "EVENTS_OUTBOX": mode == "with outbox"}
            get_settings.cache_clear()
            before = wal()
            for _ in range(batches):
                entries = [
                    (
                        CommandContext(user=user, command_id=uuid.uuid4().hex, type="room.post"),
                        Post(rooms[n % len(rooms)].slug, "a message of a usual length, say forty"),
                        "f",
                    )
                    for n in range(size)
                ]
                started = time.perf_counter()
                fetch_on_this_thread(*posts_statement(entries))
                found[mode]["ms"].append((time.perf_counter() - started) * 1000)
            found[mode]["wal"].append((wal() - before) / (batches * size))
    return {
        mode: {
            "batch_ms_median": round(statistics.median(v["ms"]), 3),
            "batch_ms_p90": round(statistics.quantiles(v["ms"], n=10)[-1], 3),
            "wal_bytes_per_post_median": round(statistics.median(v["wal"]), 1),
            "batches": len(v["ms"]),
            "posts_per_batch": size,
        }
        for mode, v in found.items()
    }


if __name__ == "__main__":
    json.dump(main(), sys.stdout, indent=2)
    print()
