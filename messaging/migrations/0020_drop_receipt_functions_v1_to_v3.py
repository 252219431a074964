"""The contract step of the receipts' function: versions 1 to 3 and 0013's indexes go.

Version 4 (0016, 0019) is the only one the code calls since 0.3.0, which
still defined the earlier versions for processes of the release before it
during a rolling deploy (the expand step). Versions 1 to 3, and the indexes
on a member's raw watermarks that only version 3 read, cost every receipt
two index writes and every reader of the schema a puzzle. The rule for a
rolling deploy (docs/OPERATIONS.md, "Upgrades"): every process runs 0.3.0
before this migration runs.

Going back defines them again from their files, as they were.
"""

import importlib

from django.db import migrations

from . import _sql

INDEXES_0013 = importlib.import_module("messaging.migrations.0013_membership_watermark_indexes")

# Each version's SQL file and arguments' types, which name it among functions of the same name.
FUNCTIONS = [
    ("0007_move_watermarks", "messaging_move_watermarks(text, {user_id}, bigint, bigint)"),
    ("0008_move_watermarks_v2", "messaging_move_watermarks_v2(text, {user_id}, bigint, bigint, bigint, bigint)"),
    (
        "0014_move_watermarks_v3",
        "messaging_move_watermarks_v3(text, {user_id}, bigint, bigint, bigint, bigint, text, boolean)",
    ),
]


def drop_functions(apps, schema_editor) -> None:
    for _, signature in FUNCTIONS:
        _sql.drop(apps, schema_editor, signature)


def define_functions(apps, schema_editor) -> None:
    for name, _ in FUNCTIONS:
        _sql.define(apps, schema_editor, name)


class Migration(migrations.Migration):
    dependencies = [
        ("messaging", "0019_state_event_ids_v7"),
    ]

    operations = [
        migrations.RunPython(drop_functions, define_functions),
        migrations.SeparateDatabaseAndState(
            # `IF EXISTS`: 0013 made them on any database, as does going back.
            database_operations=[migrations.RunPython(INDEXES_0013.drop, INDEXES_0013.create)],
            state_operations=[
                migrations.RemoveIndex(model_name="membership", name="messaging_membership_delivered"),
                migrations.RemoveIndex(model_name="membership", name="messaging_membership_read"),
            ],
        ),
    ]
