"""Reaction counts get their room and the room's rev of their latest change
(issue 24). Counts stored before revs take the next revs of their room after
`messaging.0014` gave the room's messages theirs, in seq order."""

import django.db.models.deletion
from django.db import migrations, models


def revs_for_what_exists(apps, schema_editor):
    Room = apps.get_model("messaging", "Room")
    ReactionCount = apps.get_model("messaging_reactions", "ReactionCount")
    counts = ReactionCount.objects.select_related("message").order_by("message__room_id", "message__seq")
    last_rev: dict[int, int] = {}
    for count in counts.iterator():
        room_id = count.message.room_id
        if room_id not in last_rev:
            last_rev[room_id] = Room.objects.get(pk=room_id).last_rev
        last_rev[room_id] += 1
        ReactionCount.objects.filter(pk=count.pk).update(room_id=room_id, rev=last_rev[room_id])
    for room_id, rev in last_rev.items():
        Room.objects.filter(pk=room_id).update(last_rev=rev)


class Migration(migrations.Migration):
    dependencies = [
        ("messaging_reactions", "0001_initial"),
        ("messaging", "0015_message_versions_and_revs"),
    ]

    operations = [
        migrations.AddField(
            model_name="reactioncount",
            name="rev",
            field=models.PositiveBigIntegerField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="reactioncount",
            name="room",
            field=models.ForeignKey(
                blank=True,
                db_index=False,
                null=True,
                on_delete=django.db.models.deletion.CASCADE,
                related_name="+",
                to="messaging.room",
            ),
        ),
        migrations.AddIndex(
            model_name="reactioncount",
            index=models.Index(fields=["room", "rev"], name="messaging_reaction_rev"),
        ),
        migrations.RunPython(revs_for_what_exists, migrations.RunPython.noop),
    ]
