"""The uploads' table: one row per file a user uploaded, and the message it was posted in.

It belongs to the `messaging` app (its migrations), so a host adds nothing
to `INSTALLED_APPS`; `messaging/models.py` imports it.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils import timezone

from ..ids import uuid7


class Upload(models.Model):
    """A file as `POST /api/uploads` stored it (messaging/files/uploads.py).

    Pending (no `room`) until a `room.post` attaches it: then `room` and
    `seq` name the message it belongs to, which it never leaves. Only its
    uploader fetches a pending upload, only the room's members a posted one
    (messaging/files/access.py). The row goes with the message's delete, the
    room, the user or `prune_uploads` (a pending one after
    `UPLOAD_RETENTION`), and its bytes with it, after the commit
    (messaging/files/storage.py).
    """

    # Unguessable as well as unique: a URL holds it (who may fetch it is still checked).
    id = models.UUIDField(primary_key=True, default=uuid7, editable=False)
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="uploads", db_index=False)
    # Its `Idempotency-Key`: the same key again is the same upload (with the same bytes).
    key = models.CharField(max_length=64)
    name = models.CharField(max_length=255)
    content_type = models.CharField(max_length=100)
    size = models.PositiveBigIntegerField()
    # SHA-256 of the bytes, hex: a second request with the key must carry the same ones.
    digest = models.CharField(max_length=64)
    # Its name in the storage (`UPLOAD_STORAGE`): the app's own, never the user's.
    file = models.CharField(max_length=255, unique=True)
    created_at = models.DateTimeField(default=timezone.now)
    room = models.ForeignKey(
        "messaging.Room", on_delete=models.CASCADE, null=True, blank=True, related_name="+", db_index=False
    )
    seq = models.PositiveBigIntegerField(null=True, blank=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["user", "key"], name="messaging_upload_user_key")]
        indexes = [
            # A message's files (its delete removes them; the room's cascade).
            models.Index(
                fields=["room", "seq"], name="messaging_upload_message", condition=models.Q(room__isnull=False)
            ),
            # The pending ones, oldest first (`prune_uploads`).
            models.Index(fields=["created_at"], name="messaging_upload_pending", condition=models.Q(room__isnull=True)),
        ]

    def __str__(self) -> str:
        return f"{self.name} ({self.pk})"

    @property
    def posted(self) -> bool:
        return self.room_id is not None
