"""The client address a room was created from, and its index, by which rooms per address per hour are counted.

The column is nullable with no default: adding it rewrites nothing. The index
is partial (rooms made with an address only) and starts empty, since every
existing room has none.
"""

from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("messaging", "0023_invitations"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.AddField(
            model_name="room",
            name="created_from",
            field=models.CharField(blank=True, max_length=64, null=True),
        ),
        migrations.AddIndex(
            model_name="room",
            index=models.Index(
                condition=models.Q(("created_from__isnull", False)),
                fields=["created_from", "created_at"],
                name="messaging_room_created_from",
            ),
        ),
    ]
