"""A message keeps the id of its post's event, and each version the id of its change's.

A delete finds the events that carried the body by these, through the
outbox's unique index of `event_id` (PROTOCOL.md 1.2, "Deleted means gone").
Nullable columns, added without rewriting either table: a process of the
version before, still running during a rolling deploy, writes none, and a
delete then finds those events in the room's outbox instead.
"""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("messaging", "0025_api_token_expiry"),
    ]

    operations = [
        migrations.AddField(
            model_name="message",
            name="posted_event_id",
            field=models.UUIDField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="messageversion",
            name="event_id",
            field=models.UUIDField(blank=True, null=True),
        ),
    ]
