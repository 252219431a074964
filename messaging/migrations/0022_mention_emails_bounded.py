"""Mention e-mails bounded per user and hour (messaging/events/mention_emails.py): when each was sent,
the digest a held mention goes out in, and when; an index for `prune_notifications`.

New columns are nullable, so processes of the version before, still running
during a rolling deploy, insert rows as they did; their e-mails are not
counted in the hour, as the e-mails sent before this version are not.
"""

from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("messaging", "0021_webhook_secrets_standard"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.AddField(
            model_name="notification",
            name="digest",
            field=models.UUIDField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="notification",
            name="due_at",
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="notification",
            name="emailed_at",
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AlterField(
            model_name="notification",
            name="email",
            field=models.CharField(
                choices=[
                    ("pending", "Pending"),
                    ("sent", "Sent"),
                    ("online", "Online"),
                    ("no address", "No Address"),
                    ("held", "Held"),
                    ("sending", "Sending"),
                ],
                default="pending",
                max_length=10,
            ),
        ),
        migrations.AddIndex(
            model_name="notification",
            index=models.Index(
                condition=models.Q(("emailed_at__isnull", False)),
                fields=["user", "emailed_at"],
                name="messaging_notification_emailed",
            ),
        ),
        migrations.AddIndex(
            model_name="notification",
            index=models.Index(
                condition=models.Q(("email__in", ["held", "sending"])),
                fields=["due_at"],
                name="messaging_notification_due",
            ),
        ),
        migrations.AddIndex(
            model_name="notification",
            index=models.Index(fields=["created_at"], name="messaging_notification_created"),
        ),
    ]
