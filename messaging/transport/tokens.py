"""API tokens (`messaging.models.ApiToken`): a user's credentials for `POST /api/commands` and for sockets of bots and backends.

A token is shown once, when it is made (the admin, `messaging_token`), and
only its SHA-256 is stored: a token is 32 random bytes, so a fast hash is as
good as a slow one and a lookup is one indexed read. A revoked token signs
nobody in from its next use on. The last-used time is written at most once
per `TOKEN_TOUCH_INTERVAL`, so a busy bot's requests are reads.
"""
from __future__ import annotations

import hashlib
import secrets
from datetime import timedelta
from typing import Any

from django.core.exceptions import ValidationError
from django.utils import timezone

from ..conf import get_settings
from ..models import ApiToken

PREFIX = "msg_"
# How much of a token the admin shows, to tell one from another (`ApiToken.prefix`).
SHOWN = 12
TOKEN_TOUCH_INTERVAL = timedelta(seconds=60)


def digest(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).hexdigest()


def check_room_for_token(user: Any) -> None:
    """Refuse one token more than `API_TOKENS_PER_USER` active ones (`ValidationError`)."""
    limit = get_settings().API_TOKENS_PER_USER
    if ApiToken.objects.filter(user=user, revoked_at__isnull=True).count() >= limit:
        raise ValidationError(f"this user has {limit} active API tokens (API_TOKENS_PER_USER): revoke one first")


def create_token(user: Any, name: str = "", *, instance: ApiToken | None = None) -> tuple[ApiToken, str]:
    """A new token of `user` (saved, or `instance` filled and saved): the row and the token, which is not kept."""
    check_room_for_token(user)
    token = PREFIX + secrets.token_urlsafe(32)
    row = instance or ApiToken(user=user, name=name)
    row.user, row.prefix, row.digest = user, token[:SHOWN], digest(token)
    row.save()
    return row, token


def user_of_token(token: str) -> Any | None:
    """The active user whose active token this is, or None; notes the token's use."""
    if not token.startswith(PREFIX) or len(token) > 128:
        return None
    row = ApiToken.objects.select_related("user").filter(digest=digest(token), revoked_at__isnull=True).first()
    if row is None or not row.user.is_active:
        return None
    now = timezone.now()
    if row.last_used_at is None or now - row.last_used_at >= TOKEN_TOUCH_INTERVAL:
        ApiToken.objects.filter(pk=row.pk).update(last_used_at=now)
    return row.user


def bearer_token(authorization: str | None) -> str | None:
    """The token of an `Authorization: Bearer <token>` header, or None for any other header."""
    if not authorization:
        return None
    scheme, _, token = authorization.strip().partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        return None
    return token.strip()
