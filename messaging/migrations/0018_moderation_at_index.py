"""The moderation audit by time, which `prune_moderation_actions` deletes from the oldest."""

from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("messaging", "0017_move_watermarks_v4_generic_plans"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.AddIndex(
            model_name="moderationaction",
            index=models.Index(fields=["at"], name="messaging_moderation_at"),
        ),
    ]
