"""Federation (PROTOCOL.md 1.2, "Two deployments, one conversation"): a room's slug holds a replica's
address, `slug@node` (81 characters); `PeerRoom` is each peer's cursor in the changes of a shared room."""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("messaging", "0027_deleted_means_gone"),
    ]

    operations = [
        migrations.AlterField(
            model_name="room",
            name="slug",
            field=models.CharField(max_length=81, unique=True),
        ),
        migrations.CreateModel(
            name="PeerRoom",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("peer", models.CharField(max_length=16)),
                ("position", models.PositiveBigIntegerField(default=0)),
                ("created_at", models.DateTimeField(auto_now_add=True)),
                (
                    "room",
                    models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="peers",
                        to="messaging.room",
                    ),
                ),
            ],
            options={
                "indexes": [models.Index(fields=["peer", "room"], name="messaging_peerroom_peer")],
                "constraints": [models.UniqueConstraint(fields=("room", "peer"), name="messaging_peerroom_unique")],
            },
        ),
    ]
