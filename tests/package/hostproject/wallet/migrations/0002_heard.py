from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("wallet", "0001_initial"),
    ]

    operations = [
        migrations.CreateModel(
            name="Heard",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("signal", models.CharField(max_length=40)),
                ("room", models.CharField(max_length=100)),
                ("user", models.CharField(max_length=64)),
                ("command_id", models.CharField(max_length=64)),
                ("seq", models.BigIntegerField(null=True)),
            ],
        ),
    ]
