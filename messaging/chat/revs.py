"""`rev`: one gapless change counter per room (PROTOCOL.md 1.1).

Every post, edit, delete and reaction change takes the room's next rev in
its own transaction, by an UPDATE of the room's row that holds the row lock
until commit: two changes of a room queue on it, so revs are handed out in
commit order, and a rollback takes its number back with it (no gap). Posts
take theirs with their seq in the same UPDATE (messaging/chat/sql/posts_and_records.sql).
Every such change also writes one event (messaging/events/outbox.py), whose
position in the room the same UPDATE takes.
"""

from __future__ import annotations

from django.db import connection

from ..models import Room


def next_rev(room_id: int) -> tuple[int, int]:
    """Take the room's next rev and its change's event position (`emit(..., at=(room_id, position))`).
    Holds the room's row lock until commit."""
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {Room._meta.db_table} SET last_rev = last_rev + 1, last_event = last_event + 1"
            " WHERE id = %s RETURNING last_rev, last_event",
            [room_id],
        )
        taken: tuple[int, int] = cursor.fetchone()
        return taken
