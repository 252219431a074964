"""`python -m bench.search_cost`: what `room.search`'s index costs a post, alone.

The posts' statement (`posts_statement`) in batches of 16 posts of a usual
length, in one process, with no sockets, in alternating blocks: without the
index, with it as migration 0031 makes it (GIN, `fastupdate` on: new entries
wait in a pending list that a later insert or VACUUM merges), and with
`fastupdate` off (each post's entries go straight into the tree). Per mode:
the statement's median and p99 time per batch and the WAL it writes per
post (`pg_current_wal_lsn()`), the merge of the pending list
(`gin_clean_pending_list`, what VACUUM or an insert that fills the list
does) counted in at the end of each block: its WAL in the post's, its time
apart. Each block rebuilds the index as its mode says; the index is left as
the migration made it. Run with the bench's
environment (`DATABASE_URL`, `DJANGO_SETTINGS_MODULE`).
"""

from __future__ import annotations

import json
import random
import statistics
import sys
import time
import uuid

WORDS = (
    "the a meeting at noon tomorrow lunch deploy review code please thanks ok see you later build failed again "
    "fixed it now coffee anyone call me when ready ship release notes bug ticket room search files upload"
).split()
MODES = ("no index", "GIN, fastupdate on (shipped)", "GIN, fastupdate off")


def main(blocks: int = 6, batches: int = 150, size: int = 16) -> dict:
    import django

    django.setup()
    from django.contrib.auth import get_user_model
    from django.db import connection

    from messaging.chat.posts import Post, posts_statement
    from messaging.chat.search import DOCUMENT
    from messaging.core.gateway import fetch_on_this_thread
    from messaging.core.handlers import CommandContext
    from messaging.models import Membership, Room

    user, _ = get_user_model().objects.get_or_create(username="search-cost")
    rooms = [Room.objects.get_or_create(slug=f"search-cost-{n}")[0] for n in range(4)]
    for room in rooms:
        Membership.objects.get_or_create(room=room, user=user)
    rand = random.Random(7)

    def execute(sql: str) -> None:
        with connection.cursor() as cursor:
            cursor.execute(sql, None)

    def index(mode: str) -> None:
        execute("DROP INDEX IF EXISTS messaging_message_search")
        if mode != MODES[0]:
            fastupdate = "on" if mode == MODES[1] else "off"
            execute(
                f"CREATE INDEX messaging_message_search ON messaging_message USING gin"
                f" ({DOCUMENT.replace('BODY', 'body')}) WITH (fastupdate = {fastupdate})"
            )
            execute("ALTER INDEX messaging_message_search ALTER COLUMN 1 SET STATISTICS 1000")

    def wal() -> int:
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_current_wal_lsn() - '0/0'::pg_lsn")
            return int(cursor.fetchone()[0])

    found: dict[str, dict[str, list[float]]] = {mode: {"ms": [], "wal": [], "merge_ms": []} for mode in MODES}
    try:
        for block in range(blocks):
            for mode in MODES[block % 3 :] + MODES[: block % 3]:
                index(mode)
                before = wal()
                for _ in range(batches):
                    entries = [
                        (
                            CommandContext(user=user, command_id=uuid.uuid4().hex, type="room.post"),
                            Post(rooms[n % len(rooms)].slug, " ".join(rand.choices(WORDS, k=8))),
                            "f",
                        )
                        for n in range(size)
                    ]
                    started = time.perf_counter()
                    fetch_on_this_thread(*posts_statement(entries))
                    found[mode]["ms"].append((time.perf_counter() - started) * 1000)
                if mode == MODES[1]:
                    started = time.perf_counter()
                    execute("SELECT gin_clean_pending_list('messaging_message_search')")
                    found[mode]["merge_ms"].append((time.perf_counter() - started) * 1000 / (batches * size))
                found[mode]["wal"].append((wal() - before) / (batches * size))
    finally:
        index(MODES[1])
    return {
        mode: {
            "batch_ms_median": round(statistics.median(v["ms"]), 3),
            "batch_ms_p99": round(statistics.quantiles(v["ms"], n=100)[-1], 3),
            "wal_bytes_per_post_median": round(statistics.median(v["wal"]), 1),
            "merge_ms_per_post_median": round(statistics.median(v["merge_ms"]), 4) if v["merge_ms"] else None,
            "batches": len(v["ms"]),
            "posts_per_batch": size,
        }
        for mode, v in found.items()
    }


if __name__ == "__main__":
    json.dump(main(), sys.stdout, indent=2)
    print()
