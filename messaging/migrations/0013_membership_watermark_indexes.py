"""Indexes on a room's members by watermark, for the receipt's state UPDATEs.

A message moves to `delivered` (`read`) once no recipient's watermark is
behind it. Without these, each message a receipt might move costs a scan of
all the room's memberships (the unique index on room and user), so a room of
1,000 members all reading cost O(members^2) rows and serialized receipts at
8 per second. With them, the `NOT EXISTS` reads only the members still behind.

On a large existing table, create them first with `CREATE INDEX
CONCURRENTLY` under these names; this migration then finds them
(`IF NOT EXISTS`) instead of locking the table's writes while it builds them.
"""

from django.db import migrations, models

INDEXES = [("messaging_membership_delivered", "delivered"), ("messaging_membership_read", "read")]


def create(apps, schema_editor):
    table = schema_editor.quote_name(apps.get_model("messaging", "Membership")._meta.db_table)
    for name, column in INDEXES:
        schema_editor.execute(
            f"CREATE INDEX IF NOT EXISTS {schema_editor.quote_name(name)} ON {table} (room_id, {schema_editor.quote_name(column)})"
        )


def drop(apps, schema_editor):
    for name, _ in INDEXES:
        schema_editor.execute(f"DROP INDEX IF EXISTS {schema_editor.quote_name(name)}")


class Migration(migrations.Migration):
    dependencies = [
        ("messaging", "0012_rooms_and_people"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[migrations.RunPython(create, drop)],
            state_operations=[
                migrations.AddIndex(
                    model_name="membership",
                    index=models.Index(fields=["room", "delivered"], name="messaging_membership_delivered"),
                ),
                migrations.AddIndex(
                    model_name="membership",
                    index=models.Index(fields=["room", "read"], name="messaging_membership_read"),
                ),
            ],
        ),
    ]
