from django.conf import settings
from django.db import models


class Wallet(models.Model):
    user = models.OneToOneField(settings.AUTH_USER_MODEL, on_delete=models.CASCADE)
    balance = models.BigIntegerField(default=0)


class Heard(models.Model):
    """What the app's signals told the host (wallet/signals.py): one row per signal received."""

    signal = models.CharField(max_length=40)
    room = models.CharField(max_length=100)
    user = models.CharField(max_length=64)
    command_id = models.CharField(max_length=64)
    seq = models.BigIntegerField(null=True)
