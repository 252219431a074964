"""Edits, deletes and one change counter per room (issue 24).

Messages stored before revs get rev = posted_rev = seq, and each room's
last_rev its last_seq: seqs are gapless, so these are too, and a
`since_rev` replay from 0 sends every message. Reaction counts then take
the next revs of their room, in seq order.
"""

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models
from django.db.models import F


def revs_for_what_exists(apps, schema_editor):
    Message = apps.get_model("messaging", "Message")
    Room = apps.get_model("messaging", "Room")
    ReactionCount = apps.get_model("messaging", "ReactionCount")
    Message.objects.update(posted_rev=F("seq"), rev=F("seq"))
    Room.objects.update(last_rev=F("last_seq"))
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
        ('messaging', '0009_room_created_by'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.CreateModel(
            name='MessageVersion',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('version', models.PositiveIntegerField()),
                ('kind', models.CharField(choices=[('edit', 'Edit'), ('delete', 'Delete')], max_length=6)),
                ('at', models.DateTimeField()),
                ('previous_body', models.TextField(blank=True, null=True)),
            ],
            options={
                'ordering': ['message', 'version'],
            },
        ),
        migrations.AddField(
            model_name='message',
            name='deleted_at',
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name='message',
            name='edited_at',
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name='message',
            name='posted_rev',
            field=models.PositiveBigIntegerField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name='message',
            name='rev',
            field=models.PositiveBigIntegerField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name='message',
            name='version',
            field=models.PositiveIntegerField(db_default=1, default=1),
        ),
        migrations.AddField(
            model_name='reactioncount',
            name='rev',
            field=models.PositiveBigIntegerField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name='reactioncount',
            name='room',
            field=models.ForeignKey(blank=True, db_index=False, null=True, on_delete=django.db.models.deletion.CASCADE, related_name='+', to='messaging.room'),
        ),
        migrations.AddField(
            model_name='room',
            name='last_rev',
            field=models.PositiveBigIntegerField(db_default=0, default=0),
        ),
        migrations.AddIndex(
            model_name='message',
            index=models.Index(fields=['room', 'posted_rev'], name='messaging_message_posted_rev'),
        ),
        migrations.AddIndex(
            model_name='message',
            index=models.Index(condition=models.Q(('rev__gt', models.F('posted_rev'))), fields=['room', 'rev'], name='messaging_message_rev'),
        ),
        migrations.AddIndex(
            model_name='reactioncount',
            index=models.Index(fields=['room', 'rev'], name='messaging_reaction_rev'),
        ),
        migrations.AddField(
            model_name='messageversion',
            name='by',
            field=models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to=settings.AUTH_USER_MODEL),
        ),
        migrations.AddField(
            model_name='messageversion',
            name='message',
            field=models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.CASCADE, related_name='versions', to='messaging.message'),
        ),
        migrations.AddIndex(
            model_name='messageversion',
            index=models.Index(fields=['at'], name='messaging_version_at'),
        ),
        migrations.AddConstraint(
            model_name='messageversion',
            constraint=models.UniqueConstraint(fields=('message', 'version'), name='messaging_version_unique'),
        ),
        migrations.RunPython(revs_for_what_exists, migrations.RunPython.noop),
    ]
