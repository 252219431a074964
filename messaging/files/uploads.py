"""An upload recorded once per key, within its user's bounds, and how frames show it.

`POST /api/uploads` (messaging/transport/http/uploads.py) stores the bytes
first and then records them here: in one transaction under the user's row
lock, so that two requests with one key, on any processes, end in one row
(the second finds the first's, and its own file is removed), and two
uploads at once cannot both pass the user's bounds: at most
`UPLOADS_PENDING_PER_USER` uploads, and `UPLOADS_PENDING_BYTES_PER_USER`
bytes, not posted yet. The key is the upload's own: the same key on a
command is another thing.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.contrib.auth import get_user_model
from django.db import transaction
from django.db.models import Count, Sum
from django.urls import reverse
from django.utils import timezone

from ..conf import get_settings
from .models import Upload
from .storage import Stored


class OverBounds(Exception):
    """The user's uploads not posted yet are at their bound (429); `retry_after` is when the oldest lapses."""

    def __init__(self, message: str, retry_after: int) -> None:
        super().__init__(message)
        self.retry_after = retry_after


@dataclass(frozen=True)
class Recorded:
    upload: Upload
    # False: the key's row was there before (this request's file is not needed).
    created: bool


def find(user: Any, key: str) -> Upload | None:
    return Upload.objects.filter(user=user, key=key).first()


def check_bounds(user: Any, adding: int) -> None:
    """`OverBounds` if one more upload of `adding` bytes would take the user past either bound."""
    conf = get_settings()
    pending = Upload.objects.filter(user=user, room__isnull=True)
    totals = pending.aggregate(count=Count("pk"), size=Sum("size"))
    count, size = totals["count"], totals["size"] or 0
    if count + 1 > conf.UPLOADS_PENDING_PER_USER:
        why = f"{count} uploads are not posted yet (UPLOADS_PENDING_PER_USER: {conf.UPLOADS_PENDING_PER_USER})"
    elif size + adding > conf.UPLOADS_PENDING_BYTES_PER_USER:
        why = (
            f"{size} bytes of uploads are not posted yet"
            f" (UPLOADS_PENDING_BYTES_PER_USER: {conf.UPLOADS_PENDING_BYTES_PER_USER})"
        )
    else:
        return
    oldest = pending.order_by("created_at").values_list("created_at", flat=True).first()
    lapses = (oldest or timezone.now()) + timedelta(seconds=conf.UPLOAD_RETENTION) - timezone.now()
    raise OverBounds(why + "; post them or wait", max(1, math.ceil(lapses.total_seconds())))


def record(user: Any, key: str, name: str, content_type: str, stored: Stored) -> Recorded:
    """The upload of `key`: the one recorded before, or a new row for `stored`; `OverBounds` refuses it."""
    with transaction.atomic():
        # One user's uploads one at a time: the key's row and the bounds are read under this lock.
        get_user_model().objects.select_for_update().filter(pk=user.pk).exists()
        existing = find(user, key)
        if existing is not None:
            return Recorded(existing, created=False)
        check_bounds(user, stored.size)
        upload = Upload.objects.create(
            id=stored.id,
            user=user,
            key=key,
            name=name,
            content_type=content_type,
            size=stored.size,
            digest=stored.digest,
            file=stored.file,
        )
    return Recorded(upload, created=True)


def upload_url(upload_id: Any) -> str:
    """Where `GET` serves the upload's bytes (`messaging.urls`)."""
    return reverse("messaging-api-upload", args=[str(upload_id)])


def shown(upload: Upload) -> dict[str, Any]:
    """The upload as `POST /api/uploads` answers it and a `msg` frame's `attachments` list it."""
    return {
        "upload": str(upload.pk),
        "name": upload.name,
        "size": upload.size,
        "content_type": upload.content_type,
        "url": upload_url(upload.pk),
    }
