"""Foreign keys whose lookups a composite unique constraint or index already
serves lose their own index (models.py says why).

Django's AlterField would drop and re-add each foreign key constraint, which
checks every row again under a lock: long on a large messages table. Only
the indexes go here; the model state changes as AlterField says.
"""

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models

# (model, field) whose single-column index goes.
COVERED = [
    ("commandrecord", "user"),
    ("membership", "room"),
    ("message", "room"),
    ("message", "sender"),
    ("watermarkmove", "membership"),
]


def single_column_indexes(schema_editor, table: str, column: str) -> list[str]:
    with schema_editor.connection.cursor() as cursor:
        constraints = schema_editor.connection.introspection.get_constraints(cursor, table)
    return [
        name
        for name, info in constraints.items()
        if info["index"] and not info["unique"] and not info["primary_key"] and info["columns"] == [column]
    ]


def drop_indexes(apps, schema_editor):
    for model_name, field_name in COVERED:
        model = apps.get_model("messaging", model_name)
        column = model._meta.get_field(field_name).column
        for name in single_column_indexes(schema_editor, model._meta.db_table, column):
            schema_editor.execute(f"DROP INDEX {schema_editor.quote_name(name)}")


def create_indexes(apps, schema_editor):
    for model_name, field_name in COVERED:
        model = apps.get_model("messaging", model_name)
        field = model._meta.get_field(field_name)
        if not single_column_indexes(schema_editor, model._meta.db_table, field.column):
            schema_editor.execute(schema_editor._create_index_sql(model, fields=[field]))


def foreign_key(to: str, related_name: str) -> models.ForeignKey:
    return models.ForeignKey(
        db_index=False, on_delete=django.db.models.deletion.CASCADE, related_name=related_name, to=to
    )


class Migration(migrations.Migration):
    dependencies = [
        ("messaging", "0003_reaction_count"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[migrations.RunPython(drop_indexes, create_indexes)],
            state_operations=[
                migrations.AlterField(
                    model_name="commandrecord",
                    name="user",
                    field=foreign_key(settings.AUTH_USER_MODEL, "command_records"),
                ),
                migrations.AlterField(
                    model_name="membership",
                    name="room",
                    field=foreign_key("messaging.room", "memberships"),
                ),
                migrations.AlterField(
                    model_name="message",
                    name="room",
                    field=foreign_key("messaging.room", "messages"),
                ),
                migrations.AlterField(
                    model_name="message",
                    name="sender",
                    field=foreign_key(settings.AUTH_USER_MODEL, "messages"),
                ),
                migrations.AlterField(
                    model_name="watermarkmove",
                    name="membership",
                    field=foreign_key("messaging.membership", "moves"),
                ),
            ],
        ),
    ]
