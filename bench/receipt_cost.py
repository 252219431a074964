"""`python -m bench.receipt_cost`: the database's work per receipt against the room's size.

In a room of N members, one sender's M messages; then every other member
reads them all, one receipt each, in a random order, each receipt its own
call of the function (its own transaction, as a receipt alone runs). Timed
from the client over a local connection: the wall time of all the receipts,
per receipt, with `synchronous_commit` off (the commit's flush is the same
for both), and the shared buffers the database touched per receipt (its
`pg_stat_database` counters: the bench database's alone, nothing else may
use it meanwhile), which a shared machine's load does not move. The
function is the receipts' one (`messaging_move_watermarks_v4`: the room's
two lowest effective watermarks by index), so the cost per receipt should
not grow with the room. Nothing of the app's Python runs: this is
PostgreSQL's share alone.
"""

from __future__ import annotations

import argparse
import random
import time

import psycopg

MOVE = (
    "SELECT * FROM messaging_move_watermarks_v4(ARRAY[%s]::text[], ARRAY[%s], ARRAY[NULL]::bigint[], "
    "ARRAY[%s]::bigint[], ARRAY['']::text[], 300, 100, true)"
)


def drop(conn: psycopg.Connection, slug_like: str) -> None:
    """The rooms and everything of theirs this script wrote (no cascades in the database)."""
    rooms = [row[0] for row in conn.execute("SELECT id FROM messaging_room WHERE slug LIKE %s", [slug_like])]
    conn.execute(
        "DELETE FROM messaging_watermarkmove w USING messaging_membership m "
        "WHERE w.membership_id = m.id AND m.room_id = ANY(%s)",
        [rooms],
    )
    for table in ("messaging_membership", "messaging_message", "messaging_event"):
        conn.execute(f"DELETE FROM {table} WHERE room_id = ANY(%s)", [rooms])
    conn.execute("DELETE FROM messaging_room WHERE id = ANY(%s)", [rooms])


def build(conn: psycopg.Connection, slug: str, members: int, messages: int) -> list[int]:
    """The room, its members (users made as needed) and the sender's messages; the readers' user ids."""
    drop(conn, slug)
    room = conn.execute(
        "INSERT INTO messaging_room (slug, created_at, last_seq, last_rev, last_event, private) "
        "VALUES (%s, now(), %s, 0, 0, false) RETURNING id",
        [slug, messages],
    ).fetchone()[0]
    users = [
        row[0]
        for row in conn.execute(
            "INSERT INTO auth_user (username, password, is_superuser, first_name, last_name, email, is_staff, "
            "is_active, date_joined) SELECT 'cost-' || g, '', false, '', '', '', false, true, now() "
            "FROM generate_series(1, %s) g ON CONFLICT (username) DO UPDATE SET is_active = true RETURNING id",
            [members],
        ).fetchall()
    ]
    conn.execute(
        "INSERT INTO messaging_membership (room_id, user_id, joined_seq, joined_at, delivered, read, "
        "pruned_delivered, pruned_read) SELECT %s, u, 0, now(), 0, 0, 0, 0 FROM unnest(%s::int[]) u",
        [room, users],
    )
    conn.execute(
        "INSERT INTO messaging_message (room_id, seq, sender_id, client_msg_id, body, sent_at, state, "
        "version) SELECT %s, s, %s, %s || s, 'x', now(), 'sent', 1 "
        "FROM generate_series(1, %s) s",
        [room, users[0], slug, messages],
    )
    conn.execute("ANALYZE messaging_membership")
    conn.execute("ANALYZE messaging_message")
    return users[1:]


def run(database: str, call: str, slug: str, readers: list[int], messages: int) -> tuple[float, float]:
    """Per receipt, seconds and shared buffers touched: each reader reads
    every message, one receipt each, on a connection of its own; the
    database's buffer counters are read once that connection has closed
    (a backend reports them when it ends)."""
    order = readers[:]
    random.Random(26).shuffle(order)
    blocks = "SELECT blks_hit + blks_read FROM pg_stat_database WHERE datname = current_database()"
    with psycopg.connect(database, autocommit=True) as watcher:
        watcher.execute("SELECT pg_stat_clear_snapshot()")
        before = watcher.execute(blocks).fetchone()[0]
        with psycopg.connect(database, autocommit=True) as conn:
            # The commit's flush is the same for both and would hide their difference.
            conn.execute("SET synchronous_commit = off")
            started = time.perf_counter()
            for user in order:
                conn.execute(call, [slug, user, messages], prepare=True)
            seconds = time.perf_counter() - started
        time.sleep(0.5)
        watcher.execute("SELECT pg_stat_clear_snapshot()")
        after = watcher.execute(blocks).fetchone()[0]
    return seconds / len(order), (after - before) / len(order)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--database", default="postgres://postgres@127.0.0.1:5432/messaging_bench")
    p.add_argument("--sizes", default="10,100,1000,3000")
    p.add_argument("--messages", type=int, default=20)
    args = p.parse_args()
    with psycopg.connect(args.database, autocommit=True) as conn:
        drop(conn, "cost-%")
        # A warm-up, so that the first size does not pay for the cold caches.
        run(args.database, MOVE, "cost-warm", build(conn, "cost-warm", 50, args.messages), args.messages)
        drop(conn, "cost-warm")
        print("| members | ms per receipt | shared buffers per receipt |")
        print("| --- | --- | --- |")
        for size in (int(s) for s in args.sizes.split(",")):
            slug = f"cost-{size}"
            readers = build(conn, slug, size, args.messages)
            seconds, buffers = run(args.database, MOVE, slug, readers, args.messages)
            drop(conn, slug)
            print(f"| {size} | {seconds * 1000:.3f} | {buffers:.0f} |", flush=True)


if __name__ == "__main__":
    main()
