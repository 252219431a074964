"""`messaging_move_watermarks_v4` mints its `message.state` events' ids time-ordered
(UUID version 7, as `messaging.ids.uuid7` and the posts' statement do).

Random ids put each event's entry on any page of the events' unique index of
`event_id`; once the index outgrows PostgreSQL's buffers every insert dirties
a page of its own, and the first write of a page after a checkpoint logs the
whole page (docs/PERFORMANCE.md, "Time-ordered ids"). The function is
0016's, with only its id expression changed; `CREATE OR REPLACE` drops the
function's settings, so 0017's generic plans are set again. Going back
restores 0016's random ids, with 0017's setting.
"""
import importlib

from django.db import migrations

V4 = importlib.import_module("messaging.migrations.0016_move_watermarks_v4")
GENERIC_PLANS = importlib.import_module("messaging.migrations.0017_move_watermarks_v4_generic_plans")

RANDOM_ID = "SELECT gen_random_uuid(), 'message.state',"
# The random UUID's first 6 bytes become the Unix time in milliseconds and its
# version 4 (0100) becomes 7 (0111: bits 52 and 53, counted from each byte's low bit).
TIME_ORDERED_ID = (
    "SELECT encode(set_bit(set_bit(overlay(uuid_send(gen_random_uuid()) placing"
    " substring(int8send((extract(epoch FROM clock_timestamp()) * 1000)::bigint) FROM 3) FROM 1 FOR 6),"
    " 52, 1), 53, 1), 'hex')::uuid, 'message.state',"
)
assert V4.FUNCTION.count(RANDOM_ID) == 1


def define(apps, schema_editor, function: str) -> None:
    if schema_editor.connection.vendor != "postgresql":
        return
    quote = schema_editor.quote_name
    model = apps.get_model
    schema_editor.execute(function.format(
        membership=quote(model("messaging", "Membership")._meta.db_table),
        room=quote(model("messaging", "Room")._meta.db_table),
        message=quote(model("messaging", "Message")._meta.db_table),
        move=quote(model("messaging", "WatermarkMove")._meta.db_table),
        event=quote(model("messaging", "Event")._meta.db_table),
        user_id=V4.user_id_type(apps, schema_editor),
        lock=V4.RECEIPTS_LOCK,
    ))
    GENERIC_PLANS.generic_plans(apps, schema_editor)


def time_ordered(apps, schema_editor) -> None:
    define(apps, schema_editor, V4.FUNCTION.replace(RANDOM_ID, TIME_ORDERED_ID))


def random(apps, schema_editor) -> None:
    define(apps, schema_editor, V4.FUNCTION)


class Migration(migrations.Migration):
    dependencies = [
        ("messaging", "0018_moderation_at_index"),
    ]

    operations = [migrations.RunPython(time_ordered, random)]
