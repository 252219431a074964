"""The tutorial pattern's own model: what a chat tutorial stores, no sequence numbers."""

from __future__ import annotations

from django.conf import settings
from django.db import models


class ChatMessage(models.Model):
    room = models.CharField(max_length=64)
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE)
    client_id = models.CharField(max_length=64)
    content = models.TextField()
    timestamp = models.DateTimeField(auto_now_add=True)
