"""`ReactionCount`, moved from `messaging` (its table, made by `messaging.0003`, stays as it is)."""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    initial = True

    dependencies = [
        ("messaging", "0010_reactioncount_moves_to_contrib"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.CreateModel(
                    name="ReactionCount",
                    fields=[
                        (
                            "message",
                            models.OneToOneField(
                                on_delete=django.db.models.deletion.CASCADE,
                                primary_key=True,
                                related_name="reactions",
                                serialize=False,
                                to="messaging.message",
                            ),
                        ),
                        ("count", models.PositiveBigIntegerField(default=0)),
                    ],
                    options={"db_table": "messaging_reactioncount"},
                ),
            ],
            # The table exists: `messaging.0003` made it, under this name.
            database_operations=[],
        ),
    ]
