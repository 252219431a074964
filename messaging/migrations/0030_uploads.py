"""Files (PROTOCOL.md 1.2): the uploads' table, and a message's files as its frames list them."""

import django.db.models.deletion
import django.utils.timezone
import messaging.ids
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("messaging", "0029_member_watermarks_events"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.AddField(
            model_name="message",
            name="attachments",
            field=models.JSONField(blank=True, null=True),
        ),
        migrations.CreateModel(
            name="Upload",
            fields=[
                (
                    "id",
                    models.UUIDField(default=messaging.ids.uuid7, editable=False, primary_key=True, serialize=False),
                ),
                ("key", models.CharField(max_length=64)),
                ("name", models.CharField(max_length=255)),
                ("content_type", models.CharField(max_length=100)),
                ("size", models.PositiveBigIntegerField()),
                ("digest", models.CharField(max_length=64)),
                ("file", models.CharField(max_length=255, unique=True)),
                ("created_at", models.DateTimeField(default=django.utils.timezone.now)),
                ("seq", models.PositiveBigIntegerField(blank=True, null=True)),
                (
                    "room",
                    models.ForeignKey(
                        blank=True,
                        db_index=False,
                        null=True,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="+",
                        to="messaging.room",
                    ),
                ),
                (
                    "user",
                    models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="uploads",
                        to=settings.AUTH_USER_MODEL,
                    ),
                ),
            ],
            options={
                "indexes": [
                    models.Index(
                        condition=models.Q(("room__isnull", False)),
                        fields=["room", "seq"],
                        name="messaging_upload_message",
                    ),
                    models.Index(
                        condition=models.Q(("room__isnull", True)),
                        fields=["created_at"],
                        name="messaging_upload_pending",
                    ),
                ],
                "constraints": [models.UniqueConstraint(fields=("user", "key"), name="messaging_upload_user_key")],
            },
        ),
    ]
