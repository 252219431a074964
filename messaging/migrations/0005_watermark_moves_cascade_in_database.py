"""On PostgreSQL, the database itself deletes a membership's watermark moves.

Django deletes a membership's moves with one statement, then the membership
with another. A receipt that commits a move between the two (it locks the
membership row, which the first statement does not touch) leaves a move
that the second statement's deferred foreign key check refuses at commit:
the delete fails. With ON DELETE CASCADE the membership's delete takes that
move with it (PostgreSQL runs referential actions at once, never deferred).

Django 5.2 cannot declare a cascade in the database (Django 6's
`on_delete=models.DB_CASCADE` can), so this migration sets it on the
constraint Django made; the model state does not change. An `AlterField`
of `WatermarkMove.membership` would make the constraint again without it.
SQLite needs nothing: a write transaction holds the whole database, so no
receipt commits between the two statements.

The constraint is made again NOT VALID (it holds for new rows at once),
then validated in a statement of its own, outside a transaction: that scan
of the existing moves does not block writes; only the swap takes a brief
exclusive lock.
"""

from django.db import migrations


def set_delete_action(apps, schema_editor, action: str) -> None:
    if schema_editor.connection.vendor != "postgresql":
        return
    field = apps.get_model("messaging", "WatermarkMove")._meta.get_field("membership")
    table, column = field.model._meta.db_table, field.column
    target = field.related_model._meta
    with schema_editor.connection.cursor() as cursor:
        cursor.execute(
            "SELECT conname FROM pg_constraint WHERE contype = 'f' AND conrelid = %s::regclass"
            " AND confrelid = %s::regclass",
            [table, target.db_table],
        )
        names = [name for (name,) in cursor.fetchall()]
    quote = schema_editor.quote_name
    for name in names:
        schema_editor.execute(
            f"ALTER TABLE {quote(table)} DROP CONSTRAINT {quote(name)},"
            f" ADD CONSTRAINT {quote(name)} FOREIGN KEY ({quote(column)})"
            f" REFERENCES {quote(target.db_table)} ({quote(target.pk.column)})"
            f" ON DELETE {action} DEFERRABLE INITIALLY DEFERRED NOT VALID"
        )
        schema_editor.execute(f"ALTER TABLE {quote(table)} VALIDATE CONSTRAINT {quote(name)}")


def cascade_in_database(apps, schema_editor) -> None:
    set_delete_action(apps, schema_editor, "CASCADE")


def check_at_commit_only(apps, schema_editor) -> None:
    # What Django makes: no action in the database, checked at commit.
    set_delete_action(apps, schema_editor, "NO ACTION")


class Migration(migrations.Migration):
    # Each statement commits on its own: the validation must not hold the swap's lock.
    atomic = False

    dependencies = [
        ("messaging", "0004_covered_foreign_key_indexes"),
    ]

    operations = [
        migrations.RunPython(cascade_in_database, check_at_commit_only),
    ]
