"""API tokens (`messaging.models.ApiToken`): a user's credentials for `POST /api/commands` and for sockets of bots and backends.

A token is shown once, when it is made (`messaging_token` prints it; the
admin makes it when its own page shows it: `reveal_token`), and only its
SHA-256 is stored: a token is 32 random bytes, so a fast hash is as good as
a slow one and a lookup is one indexed read. A revoked or expired token
(`expires_at`) signs nobody in from its next use on, and the sockets it
opened are closed (messaging/transport/signins.py). The last-used time is
written at most once per `TOKEN_TOUCH_INTERVAL`, so a busy bot's requests
(and its sockets' handshakes) are reads.
"""

from __future__ import annotations

import hashlib
import secrets
from datetime import datetime, timedelta
from typing import Any

from django.core.exceptions import ValidationError
from django.db.models import Q, QuerySet
from django.utils import timezone

from ..conf import get_settings
from ..models import ApiToken

PREFIX = "msg_"
# How much of a token the admin shows, to tell one from another (`ApiToken.prefix`).
SHOWN = 12
TOKEN_TOUCH_INTERVAL = timedelta(seconds=60)


def digest(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).hexdigest()


def usable(now: datetime | None = None) -> QuerySet[ApiToken]:
    """The tokens neither revoked nor expired at `now` (with those the admin has not shown yet, which have no digest)."""
    now = now or timezone.now()
    return ApiToken.objects.filter(Q(expires_at__isnull=True) | Q(expires_at__gt=now), revoked_at__isnull=True)


def check_room_for_token(user: Any) -> None:
    """Refuse one token more than `API_TOKENS_PER_USER` active ones (`ValidationError`).

    A token the admin made and has not shown yet counts: it is one page away from signing in."""
    limit = get_settings().API_TOKENS_PER_USER
    if usable().filter(user=user).count() >= limit:
        raise ValidationError(f"this user has {limit} active API tokens (API_TOKENS_PER_USER): revoke one first")


def new_token() -> str:
    return PREFIX + secrets.token_urlsafe(32)


def create_token(
    user: Any, name: str = "", *, expires_at: datetime | None = None, instance: ApiToken | None = None
) -> tuple[ApiToken, str]:
    """A new token of `user` (saved, or `instance` filled and saved): the row and the token, which is not kept."""
    check_room_for_token(user)
    token = new_token()
    row = instance or ApiToken(user=user, name=name, expires_at=expires_at)
    row.user, row.prefix, row.digest = user, token[:SHOWN], digest(token)
    row.save()
    return row, token


def reveal_token(pk: Any) -> str | None:
    """Make the token of the row `pk` that has none yet, and return it; None if it has one (or is revoked).

    One conditional UPDATE: of two requests at once, one gets the token, the
    other None, and the token exists nowhere but in the answer to the first.
    """
    token = new_token()
    made = ApiToken.objects.filter(pk=pk, digest__isnull=True, revoked_at__isnull=True).update(
        prefix=token[:SHOWN], digest=digest(token)
    )
    return token if made else None


def signed_in_by(token: str) -> ApiToken | None:
    """The usable token row (with its user) of `token` if its user is active, else None; notes the token's use."""
    if not token.startswith(PREFIX) or len(token) > 128:
        return None
    now = timezone.now()
    row = usable(now).select_related("user").filter(digest=digest(token)).first()
    if row is None or not getattr(row.user, "is_active", True):
        return None
    if row.last_used_at is None or now - row.last_used_at >= TOKEN_TOUCH_INTERVAL:
        ApiToken.objects.filter(pk=row.pk).update(last_used_at=now)
    return row


def user_of_token(token: str) -> Any | None:
    """The active user whose usable token this is, or None; notes the token's use."""
    row = signed_in_by(token)
    return row.user if row is not None else None


def bearer_token(authorization: str | None) -> str | None:
    """The token of an `Authorization: Bearer <token>` header, or None for any other header."""
    if not authorization:
        return None
    scheme, _, token = authorization.strip().partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        return None
    return token.strip()
