"""What a deployment's database holds of its rooms, read by SQL (as the chaos checker reads it)."""

from __future__ import annotations

from ..support.databases import connect

MESSAGES = """
SELECT m.seq, m.client_msg_id, m.body, m.version, m.rev, u.username
FROM messaging_message m JOIN messaging_room r ON r.id = m.room_id JOIN auth_user u ON u.id = m.sender_id
WHERE r.slug = %s ORDER BY m.seq
"""


def messages(url: str, room: str) -> list[tuple]:
    with connect(url) as db:
        return db.execute(MESSAGES, [room]).fetchall()


def room(url: str, slug: str) -> tuple | None:
    with connect(url) as db:
        return db.execute("SELECT last_seq, last_rev FROM messaging_room WHERE slug = %s", [slug]).fetchone()


def scalar(url: str, sql: str, *params) -> object:
    with connect(url) as db:
        return db.execute(sql, list(params)).fetchone()[0]
