"""On PostgreSQL, a receipt's move is one function call: one round trip.

`messaging.chat.receipts.move_watermarks` took eight (BEGIN, the membership, the
room's state lock, the watermarks, the move, one UPDATE of states per
watermark, COMMIT), and a database thread hop from the event loop. One
statement cannot do it: its snapshot is taken before it waits for the room's
state lock, so it would not see a receipt that committed in the meantime, and
two recipients' receipts would each miss the other's (see
`receipts.lock_room_states`). In a VOLATILE PL/pgSQL function each statement
takes a fresh snapshot, so the UPDATEs after the lock see every watermark
committed before it, as the separate statements did.

The function does what the ORM path in `messaging.chat.receipts` does, in the same
order and with the same locks (the membership row, then the room's advisory
lock), so processes of both versions can run side by side during a deploy.
It returns no row for a non-member. Otherwise one row: the room's last seq,
the old watermarks, and the new ones, which are NULL when a given seq is
beyond the room's last (then nothing changed).

The SQL is in `sql/0007_move_watermarks.sql`, as it was at this point of the
schema's history (`_sql`): a later change of it is a new migration that
replaces it.
"""

from django.db import migrations

from . import _sql


def create_function(apps, schema_editor) -> None:
    _sql.define(apps, schema_editor, "0007_move_watermarks")


def drop_function(apps, schema_editor) -> None:
    _sql.drop(apps, schema_editor, "messaging_move_watermarks(text, {user_id}, bigint, bigint)")


class Migration(migrations.Migration):
    dependencies = [
        ("messaging", "0006_membership_pruned_watermarks"),
    ]

    operations = [
        migrations.RunPython(create_function, drop_function),
    ]
