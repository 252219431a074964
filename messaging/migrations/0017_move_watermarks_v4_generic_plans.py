"""`messaging_move_watermarks_v4` plans its statements once per connection, with no batch's values.

PL/pgSQL plans each statement of a function with the call's values (a custom
plan) until it judges a generic plan no worse. With a room's statistics from
before the room filled (a room made and posted to since the last ANALYZE: the
planner takes it for one row), a custom plan of the state UPDATE read the
room's messages by `(room_id, posted_rev)` and filtered 15,000 rows on seq,
4.7 ms a receipt, where the generic plan takes the `(room_id, seq)` range:
0.08 ms. Which plan a connection kept depended on its first calls, so
receipts ran at 4,885/s on one server's connections and 1,341/s on
another's (docs/PERFORMANCE.md). Every statement of the function finds its
rows by room, member or message through an index whatever the values, so
the generic plan is right for all of them, and it saves the planning too.
"""

from django.db import migrations

from . import _sql

SIGNATURE = "messaging_move_watermarks_v4(text[], {user_id}[], bigint[], bigint[], text[], bigint, bigint, boolean)"


def generic_plans(apps, schema_editor) -> None:
    if schema_editor.connection.vendor != "postgresql":
        return
    function = SIGNATURE.format(user_id=_sql.user_id_type(apps, schema_editor))
    schema_editor.execute(f"ALTER FUNCTION {function} SET plan_cache_mode = force_generic_plan")


def default_plans(apps, schema_editor) -> None:
    if schema_editor.connection.vendor != "postgresql":
        return
    function = SIGNATURE.format(user_id=_sql.user_id_type(apps, schema_editor))
    schema_editor.execute(f"ALTER FUNCTION {function} RESET plan_cache_mode")


class Migration(migrations.Migration):
    dependencies = [
        ("messaging", "0016_move_watermarks_v4"),
    ]

    operations = [migrations.RunPython(generic_plans, default_plans)]
