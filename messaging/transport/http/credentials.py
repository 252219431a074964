"""Who sends a request to the HTTP API, and whether they may send one more.

Two credentials, as PROTOCOL.md 1.1 says: an API token (`Authorization:
Bearer`, no CSRF: a browser never sends one on its own) or the session
cookie, which a browser sends on any site's behalf, so it needs Django's CSRF
check (the `X-CSRFToken` header). A request that offers a token is judged by
the token alone.

Rate limits are the sockets': the user's window over every socket, request
and process (`USER_RATE_LIMIT`), and a bucket per credential, a token or a
session, standing for a socket's own (`RATE_BURST`, `RATE_PER_SECOND`),
kept in this process for at most `RATE_WINDOW_KEYS` credentials.
"""

from __future__ import annotations

import math
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, NoReturn

from django.http import HttpRequest, HttpResponse
from django.middleware.csrf import CsrfViewMiddleware, RejectRequest

from ...conf import get_settings
from ...core.exceptions import Forbidden, RateLimited
from ...core.runtime import runtime
from ..ratelimit import TokenBucket, user_limiter
from ..tokens import bearer_token, digest, user_of_token


class Unauthenticated(Exception):
    """no valid credentials: a session cookie (with X-CSRFToken) or Authorization: Bearer <token>"""


@dataclass(frozen=True)
class Caller:
    user: Any
    # What the credential's own bucket is kept under: a token's digest or a session's key.
    credential: str


async def caller(request: HttpRequest) -> Caller:
    """The request's signed-in caller; `Unauthenticated` or `Forbidden` (a session without its CSRF token)."""
    header = request.headers.get("Authorization")
    if header is not None:
        token = bearer_token(header)
        user = await runtime().gateway.run(user_of_token, token) if token else None
        if not token or user is None:
            raise Unauthenticated()
        return Caller(user, "token:" + digest(token))
    # Without AuthenticationMiddleware (a host's API-only stack) only tokens sign in.
    auser = getattr(request, "auser", None)
    user = await auser() if auser is not None else None
    # Inactive is refused whatever the backend (`AllowAllUsersModelBackend` signs such users in).
    if user is None or not user.is_authenticated or not getattr(user, "is_active", True):
        raise Unauthenticated()
    reason = _csrf_failure(request)
    if reason is not None:
        raise Forbidden(f"CSRF check failed: {reason}; send the csrftoken cookie's value as X-CSRFToken")
    return Caller(user, "session:" + (request.session.session_key or ""))


class _CsrfCheck(CsrfViewMiddleware):
    # Django's check as a function: its refusal is raised with its reason, not rendered.
    def _reject(self, request: HttpRequest, reason: str) -> NoReturn:
        raise RejectRequest(reason)


def _nothing(request: HttpRequest) -> HttpResponse:  # pragma: no cover: never called
    raise AssertionError


def _csrf_failure(request: HttpRequest) -> str | None:
    """Why Django's CSRF check refuses `request`, or None where it passes."""
    check = _CsrfCheck(_nothing)
    check.process_request(request)
    try:
        check.process_view(request, _nothing, (), {})
    except RejectRequest as exc:
        return exc.reason
    return None


_buckets: OrderedDict[str, TokenBucket] = OrderedDict()


async def check_rate(who: Caller) -> None:
    """`RateLimited` (with `retry_after`) above the credential's bucket or the user's window."""
    conf = get_settings()
    bucket = _buckets.get(who.credential)
    if bucket is None or bucket.rate != conf.RATE_PER_SECOND or bucket.burst != conf.RATE_BURST:
        bucket = _buckets[who.credential] = TokenBucket(conf.RATE_PER_SECOND, conf.RATE_BURST)
        while len(_buckets) > conf.RATE_WINDOW_KEYS:
            _buckets.popitem(last=False)
    _buckets.move_to_end(who.credential)
    wait = bucket.take() or await user_limiter().ahit(who.user.pk)
    if wait:
        raise RateLimited(retry_after=math.ceil(wait * 1000) / 1000)
