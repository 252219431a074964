"""What a message's delete needs to find every copy of its events (PROTOCOL.md 1.2, "Deleted means gone").

Dead letters and webhook deliveries by event id, mentions by room and seq:
the delete blanks the body in each of them, found by an index, never by
reading the table whole.
"""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("messaging", "0026_message_event_ids"),
    ]

    operations = [
        migrations.AddIndex(
            model_name="deadletter",
            index=models.Index(fields=["event_id"], name="messaging_deadletter_by_event"),
        ),
        migrations.AddIndex(
            model_name="notification",
            index=models.Index(fields=["room", "seq"], name="messaging_notification_message"),
        ),
        migrations.AddIndex(
            model_name="webhookdelivery",
            index=models.Index(fields=["event_id"], name="messaging_delivery_by_event"),
        ),
    ]
