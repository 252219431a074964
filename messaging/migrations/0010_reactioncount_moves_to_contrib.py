"""`ReactionCount` moves to `messaging.contrib.reactions` (its migration 0001
takes it over): only Django's state of the models changes, the table and its
rows stay. Without that app installed the table stays too, unused."""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [
        ("messaging", "0009_room_created_by"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[migrations.DeleteModel(name="ReactionCount")],
            database_operations=[],
        ),
    ]
