"""`messaging_move_watermarks_v4` mints its `message.state` events' ids time-ordered
(UUID version 7, as `messaging.ids.uuid7` and the posts' statement do).

Random ids put each event's entry on any page of the events' unique index of
`event_id`; once the index outgrows PostgreSQL's buffers every insert dirties
a page of its own, and the first write of a page after a checkpoint logs the
whole page (docs/PERFORMANCE.md, "Time-ordered ids"). The function
(`sql/0019_move_watermarks_v4.sql`) is 0016's with only its event id's
expression changed; `CREATE OR REPLACE` drops the function's settings, so
0017's generic plans are set again. Going back restores 0016's random ids,
with 0017's setting.
"""

import importlib

from django.db import migrations

from . import _sql

GENERIC_PLANS = importlib.import_module("messaging.migrations.0017_move_watermarks_v4_generic_plans")


def define(apps, schema_editor, name: str) -> None:
    _sql.define(apps, schema_editor, name)
    GENERIC_PLANS.generic_plans(apps, schema_editor)


def time_ordered(apps, schema_editor) -> None:
    define(apps, schema_editor, "0019_move_watermarks_v4")


def random(apps, schema_editor) -> None:
    define(apps, schema_editor, "0016_move_watermarks_v4")


class Migration(migrations.Migration):
    dependencies = [
        ("messaging", "0018_moderation_at_index"),
    ]

    operations = [migrations.RunPython(time_ordered, random)]
