"""What the database holds, read by plain SQL: the one place that knows the app's tables.

The checker compares the history with this. It reads the tables, not the
app's models, so that it keeps working while the app's code moves; if the
schema changes, this module changes with it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import psycopg

STATES = ("sent", "delivered", "read")

ROOMS = "SELECT id, slug, last_seq FROM messaging_room"
MESSAGES = """
SELECT r.slug, m.seq, m.sender_id, m.client_msg_id, m.body, m.state,
       to_char(m.sent_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'), m.delivered_at, m.read_at
FROM messaging_message m JOIN messaging_room r ON r.id = m.room_id
"""
RECORDS = "SELECT user_id, command_id, type, result FROM messaging_commandrecord"
REACTIONS = """
SELECT r.slug, m.seq, c.count FROM messaging_reactioncount c
JOIN messaging_message m ON m.id = c.message_id JOIN messaging_room r ON r.id = m.room_id
"""
WALLETS = "SELECT name, balance FROM chaos_wallet"
MEMBERSHIPS = """
SELECT r.slug, ms.user_id, ms.joined_seq, ms.delivered, ms.read
FROM messaging_membership ms JOIN messaging_room r ON r.id = ms.room_id
"""

# Read while the run goes on, by the observer.
PROGRESS_STATES = "SELECT room_id, seq, state FROM messaging_message WHERE state <> 'sent'"
PROGRESS_WATERMARKS = "SELECT room_id, user_id, delivered, read FROM messaging_membership"
RECORDS_OF = """
SELECT c.user_id::text, c.command_id, c.result FROM messaging_commandrecord c
JOIN unnest(%(users)s::text[], %(ids)s::text[]) AS k(user_id, command_id)
  ON c.user_id::text = k.user_id AND c.command_id = k.command_id
"""


@dataclass
class Message:
    room: str
    seq: int
    sender: Any
    id: str
    body: str
    state: str
    at: str
    delivered_at: Any
    read_at: Any


@dataclass
class Truth:
    rooms: dict[str, int]  # slug -> last_seq
    messages: list[Message]
    records: dict[tuple[str, str], tuple[str, dict]]  # (user, id) -> (type, result)
    reactions: dict[tuple[str, int], int]
    wallets: dict[str, int]
    memberships: dict[tuple[str, str], tuple[int, int, int]]  # (room, user) -> joined_seq, delivered, read


def read(db: psycopg.Connection) -> Truth:
    """Everything the checker needs, in one snapshot (REPEATABLE READ)."""
    with db.transaction():
        db.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
        rooms = {slug: last_seq for _, slug, last_seq in db.execute(ROOMS)}
        messages = [Message(*row) for row in db.execute(MESSAGES)]
        records = {(str(user), id): (t, result) for user, id, t, result in db.execute(RECORDS)}
        reactions = {(room, seq): count for room, seq, count in db.execute(REACTIONS)}
        wallets = dict(db.execute(WALLETS).fetchall())
        memberships = {
            (room, str(user)): (joined, delivered, read_)
            for room, user, joined, delivered, read_ in db.execute(MEMBERSHIPS)
        }
    return Truth(rooms, messages, records, reactions, wallets, memberships)
