"""Other people's rooms, already in the database, as a deployment has them.

The bench's own rooms are a handful, made by each run: on tables that small
PostgreSQL plans any statement well. `--rooms N` puts N rooms of
`--room-members` members each (users of their own, never the bench's
sockets) in the database before the runs, untimed, so that the reference
load runs beside a deployment's room table: a statement whose plan reads
every room, rather than the batch's, shows there.
"""

from __future__ import annotations

import psycopg

SEED = "seed-"


def seed_rooms(database: str, rooms: int, members: int) -> None:
    """`rooms` rooms `seed-1`... of `members` members each, drawn from `members` x 10 users, analyzed."""
    if rooms <= 0:
        return
    users = max(members, 1) * 10
    with psycopg.connect(database, autocommit=True) as conn:
        conn.execute(
            "INSERT INTO auth_user (password, is_superuser, username, first_name, last_name, email, is_staff,"
            " is_active, date_joined) SELECT '', false, %(seed)s || g, '', '', '', false, true, now()"
            " FROM generate_series(1, %(users)s) g ON CONFLICT (username) DO NOTHING",
            {"seed": SEED, "users": users},
        )
        conn.execute(
            "INSERT INTO messaging_room (slug, last_seq, last_rev, last_event, private, created_at)"
            " SELECT %(seed)s || g, 0, 0, 0, false, now() FROM generate_series(1, %(rooms)s) g",
            {"seed": SEED, "rooms": rooms},
        )
        # Member k of room r is seed user (r x members + k) mod users: each room's members differ.
        conn.execute(
            "INSERT INTO messaging_membership (room_id, user_id, joined_seq, joined_at, delivered, read,"
            " pruned_delivered, pruned_read)"
            " SELECT r.id, u.id, 0, now(), 0, 0, 0, 0"
            " FROM messaging_room r CROSS JOIN generate_series(0, %(members)s - 1) k"
            " JOIN auth_user u ON u.username = %(seed)s"
            "  || ((substr(r.slug, length(%(seed)s) + 1)::int * %(members)s + k) %% %(users)s + 1)"
            " WHERE r.slug LIKE %(pattern)s",
            {"seed": SEED, "members": members, "users": users, "pattern": SEED + "%"},
        )
        conn.execute("ANALYZE auth_user, messaging_room, messaging_membership")
