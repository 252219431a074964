"""Edits, deletes and one change counter per room (issue 24).

Messages stored before revs get rev = posted_rev = seq, and each room's
last_rev its last_seq: seqs are gapless, so these are too, and a
`since_rev` replay from 0 sends every message. Reaction counts then take
the next revs of their room, in seq order: `messaging_reactions.0002`,
as that app owns them.
"""

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models
from django.db.models import F


def revs_for_what_exists(apps, schema_editor):
    Message = apps.get_model("messaging", "Message")
    Room = apps.get_model("messaging", "Room")
    Message.objects.update(posted_rev=F("seq"), rev=F("seq"))
    Room.objects.update(last_rev=F("last_seq"))


class Migration(migrations.Migration):
    dependencies = [
        ("messaging", "0014_events"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.CreateModel(
            name="MessageVersion",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("version", models.PositiveIntegerField()),
                ("kind", models.CharField(choices=[("edit", "Edit"), ("delete", "Delete")], max_length=6)),
                ("at", models.DateTimeField()),
                ("previous_body", models.TextField(blank=True, null=True)),
            ],
            options={
                "ordering": ["message", "version"],
            },
        ),
        migrations.AddField(
            model_name="message",
            name="deleted_at",
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="message",
            name="edited_at",
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="message",
            name="posted_rev",
            field=models.PositiveBigIntegerField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="message",
            name="rev",
            field=models.PositiveBigIntegerField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="message",
            name="version",
            field=models.PositiveIntegerField(db_default=1, default=1),
        ),
        migrations.AddField(
            model_name="room",
            name="last_rev",
            field=models.PositiveBigIntegerField(db_default=0, default=0),
        ),
        migrations.AddIndex(
            model_name="message",
            index=models.Index(fields=["room", "posted_rev"], name="messaging_message_posted_rev"),
        ),
        migrations.AddIndex(
            model_name="message",
            index=models.Index(
                condition=models.Q(("rev__gt", models.F("posted_rev"))),
                fields=["room", "rev"],
                name="messaging_message_rev",
            ),
        ),
        migrations.AddField(
            model_name="messageversion",
            name="by",
            field=models.ForeignKey(
                blank=True,
                null=True,
                on_delete=django.db.models.deletion.SET_NULL,
                related_name="+",
                to=settings.AUTH_USER_MODEL,
            ),
        ),
        migrations.AddField(
            model_name="messageversion",
            name="message",
            field=models.ForeignKey(
                db_index=False,
                on_delete=django.db.models.deletion.CASCADE,
                related_name="versions",
                to="messaging.message",
            ),
        ),
        migrations.AddIndex(
            model_name="messageversion",
            index=models.Index(fields=["at"], name="messaging_version_at"),
        ),
        migrations.AddConstraint(
            model_name="messageversion",
            constraint=models.UniqueConstraint(fields=("message", "version"), name="messaging_version_unique"),
        ),
        migrations.RunPython(revs_for_what_exists, migrations.RunPython.noop),
    ]
