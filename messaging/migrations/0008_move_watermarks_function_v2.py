"""The receipt's function also says what moved: `messaging_move_watermarks_v2`.

A receipt that moves messages to `delivered` or `read` tells each one's
sender with a `state` frame, and broadcasts `status` only in rooms of at most
`MEMBERS_ON_JOIN` members. The transaction knows both already: the UPDATEs
of states touch exactly the messages that moved, and the room's members are a
count away. This version returns them, still in one round trip:

- `members`: the room's members, counted up to `p_members_upto + 1` (a
  caller asks only whether the room is over that size, so a room of 8,000
  costs no more than one of 101);
- `moved_at`: the time of the move, the states' time;
- per state, the newest `p_states_limit` messages it moved, as two arrays in
  seq order: their seqs and their senders (a receipt that catches up on
  100,000 messages must not hand back 100,000 rows).

Everything else is version 1 (migration 0007), statement for statement, with
the same locks in the same order. Version 1 stays: during a rolling deploy a
process of the version before still calls it, beside processes calling this
one, and the two serialize on the same locks. A later release drops it.

The SQL is in `sql/0008_move_watermarks_v2.sql`, as in 0007.
"""

from django.db import migrations

from . import _sql


def create_function(apps, schema_editor) -> None:
    _sql.define(apps, schema_editor, "0008_move_watermarks_v2")


def drop_function(apps, schema_editor) -> None:
    _sql.drop(apps, schema_editor, "messaging_move_watermarks_v2(text, {user_id}, bigint, bigint, bigint, bigint)")


class Migration(migrations.Migration):
    dependencies = [
        ("messaging", "0007_move_watermarks_function"),
    ]

    operations = [
        migrations.RunPython(create_function, drop_function),
    ]
