"""Rooms of thousands of members, inserted in SQL: creating them through the
ORM one by one would take minutes, and the tests are about what the server
does with such a room, not about how it got there."""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.db import connection

from messaging.models import Membership, Room

# auth.User's first_name holds 150 characters: the longest name a guest gets.
LONG_NAME = 150


def crowd(room: str, count: int, *, name_length: int = LONG_NAME, prefix: str = "crowd") -> list:
    """Make `count` new users, each named with `name_length` characters, members of
    `room` (created if missing) as of its last seq; returns their ids in id order.

    The users are the demo's `auth.User`s; their names end in their number, so
    every one differs.
    """
    users = get_user_model()._meta.db_table
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {Room._meta.db_table} (slug, last_seq, created_at) VALUES (%s, 0, now())"
            " ON CONFLICT (slug) DO NOTHING",
            [room],
        )
        cursor.execute(
            f"""
            INSERT INTO {users} (password, is_superuser, username, first_name, last_name, email, is_staff,
                                 is_active, date_joined)
            SELECT '!', false, %(prefix)s || '-' || n,
                   lpad(' ' || n, %(length)s, 'A member with a long name, '), '', '', false, true, now()
            FROM generate_series(1, %(count)s) AS n
            RETURNING id
            """,
            {"prefix": prefix, "length": name_length, "count": count},
        )
        ids = sorted(row[0] for row in cursor.fetchall())
        cursor.execute(
            f"""
            INSERT INTO {Membership._meta.db_table} (room_id, user_id, joined_seq, joined_at, delivered, read)
            SELECT r.id, u, r.last_seq, now(), 0, 0 FROM {Room._meta.db_table} r, unnest(%(ids)s) AS u
            WHERE r.slug = %(room)s
            """,
            {"ids": ids, "room": room},
        )
    return ids


def catch_up(room: str, user_ids: list, seq: int) -> None:
    """Set these members' watermarks to `seq`, as if each had read that far,
    without moving any message: the receipts of thousands, for the one that follows."""
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {Membership._meta.db_table} m SET delivered = %(seq)s, read = %(seq)s"
            f" FROM {Room._meta.db_table} r WHERE r.id = m.room_id AND r.slug = %(room)s AND m.user_id = ANY(%(ids)s)",
            {"seq": seq, "room": room, "ids": user_ids},
        )
