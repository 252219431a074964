"""Receipts at a cost that does not grow with the room, several in one call
(issue 26): `messaging_move_watermarks_v4` and the indexes it reads.

A member's *effective* watermark is greatest(delivered, joined_seq): a member
that joined at or after seq s is no recipient of s, and its effective
watermark is >= s, so it never holds s back. A message s of sender x moves to
delivered iff every member other than x has an effective watermark >= s and
at least one member other than x joined before s (0014's two `EXISTS`, per
message, over the room's memberships). So the two lowest effective watermarks
of the room, and whose the lowest is, decide every message of the move: the
lowest among the others is the second one when x holds the first (on a tie
the two are equal, whoever holds which). The same for read. Each is one or two
rows of an index on (room, expression), whatever the room's size; the
mover's own messages are the only ones of its range whose recipient it is
not, and for them the earliest other member's `joined_seq` decides.

Version 4 also takes a batch: arrays of receipts, per receipt one row (its
index in `receipt`), in one transaction. Receipts run room by room (by room
id), member by member (by user id; a member's in the given order), so
membership rows are locked in (room, user) order, as `prune_watermark_moves`
locks them; a room's advisory lock is taken before any of its membership
rows (version 3 took it after the member's row), so two batches take their
locks in the same order and cannot deadlock; the rooms'
rows, for the `message.state` events' positions, are taken last, once every
receipt's messages are done, in room id order (a receipt's room row before
the next receipt's message rows would deadlock with an edit, which takes a
message's row and then its room's). A refusal (a
non-member: `last_seq` NULL; a seq beyond the room's last: `new_delivered`
NULL) changes nothing of that receipt and nothing of the others'.

Version 3 stays for processes of the version before during a rolling deploy:
the two take a room's locks in opposite orders, so until the deploy is done a
receipt of each may meet in a deadlock, which PostgreSQL breaks by failing
one (`unavailable`; the client sends it again). 0013's indexes stay for
version 3 too.

The function's SQL is in `sql/0016_move_watermarks_v4.sql` (`_sql`). The
indexes are created `IF NOT EXISTS`, as in 0013: on a large table, build
them first with `CREATE INDEX CONCURRENTLY` under these names.
"""

from django.db import migrations, models
from django.db.models.functions import Greatest

from . import _sql

# Its arguments' types, which name it among functions of the same name.
SIGNATURE = "messaging_move_watermarks_v4(text[], {user_id}[], bigint[], bigint[], text[], bigint, bigint, boolean)"

# The indexes, each on the room and then one expression (names of at most 30 characters, Django's limit).
INDEXES = [
    models.Index(models.F("room"), Greatest("delivered", "joined_seq"), name="messaging_member_eff_delivered"),
    models.Index(models.F("room"), Greatest("read", "joined_seq"), name="messaging_member_eff_read"),
    models.Index(fields=["room", "joined_seq"], name="messaging_member_joined"),
]
# On PostgreSQL, as each is written there, to find one built beforehand.
POSTGRESQL_INDEXES = {
    "messaging_member_eff_delivered": "(room_id, (greatest(delivered, joined_seq)))",
    "messaging_member_eff_read": "(room_id, (greatest(read, joined_seq)))",
    "messaging_member_joined": "(room_id, joined_seq)",
}


def create_indexes(apps, schema_editor) -> None:
    membership = apps.get_model("messaging", "Membership")
    if schema_editor.connection.vendor != "postgresql":
        for index in INDEXES:
            schema_editor.add_index(membership, index)
        return
    table = schema_editor.quote_name(membership._meta.db_table)
    for name, columns in POSTGRESQL_INDEXES.items():
        schema_editor.execute(f"CREATE INDEX IF NOT EXISTS {schema_editor.quote_name(name)} ON {table} {columns}")


def drop_indexes(apps, schema_editor) -> None:
    membership = apps.get_model("messaging", "Membership")
    for index in INDEXES:
        schema_editor.remove_index(membership, index)


def create_function(apps, schema_editor) -> None:
    _sql.define(apps, schema_editor, "0016_move_watermarks_v4")


def drop_function(apps, schema_editor) -> None:
    _sql.drop(apps, schema_editor, SIGNATURE)


class Migration(migrations.Migration):
    dependencies = [
        ("messaging", "0015_message_versions_and_revs"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[migrations.RunPython(create_indexes, drop_indexes)],
            state_operations=[migrations.AddIndex(model_name="membership", index=index) for index in INDEXES],
        ),
        migrations.RunPython(create_function, drop_function),
    ]
