"""Who may fetch an upload's bytes (PROTOCOL.md 1.2, "Files").

A posted upload: the members of the room it was posted in (not its
invitees, and no one else: a member who leaves loses it). A pending one:
its uploader alone. Anyone else, and everyone once it is gone (its message
deleted, pruned), is answered as if it never existed (404).
"""

from __future__ import annotations

from typing import Any

from ..models import Membership
from .models import Upload


def fetchable(user: Any, upload_id: Any) -> Upload | None:
    """The upload `upload_id` if `user` may fetch it, else None."""
    upload = Upload.objects.filter(pk=upload_id).first()
    if upload is None:
        return None
    if upload.room_id is None:
        return upload if upload.user_id == user.pk else None
    return upload if Membership.objects.filter(room_id=upload.room_id, user=user).exists() else None
