"""API tokens may expire (`expires_at`), and a token the admin made is not yet
minted (`digest` NULL) until its page shows it, once."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("messaging", "0024_rooms_created_from"),
    ]

    operations = [
        migrations.AddField(
            model_name="apitoken",
            name="expires_at",
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AlterField(
            model_name="apitoken",
            name="digest",
            field=models.CharField(editable=False, max_length=64, null=True, unique=True),
        ),
    ]
