"""The page's mentions badge: the signed-in user's unread mentions, and marking them read."""

from __future__ import annotations

from django.http import HttpRequest, JsonResponse
from django.utils import timezone
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET, require_POST

from ..core.protocol import format_time
from .models import Notification

# The most unread mentions one answer lists (the count is of all of them).
LISTED = 20


def signed_in(request: HttpRequest) -> JsonResponse | None:
    if not request.user.is_authenticated:
        return JsonResponse({"error": "sign in first"}, status=401)
    return None


@never_cache
@require_GET
def mentions(request: HttpRequest) -> JsonResponse:
    """`{"unread": n, "mentions": [...]}`: the newest `LISTED` unread, newest first."""
    refused = signed_in(request)
    if refused:
        return refused
    # Signed in (above): django-stubs cannot narrow `request.user`.
    unread = Notification.objects.filter(user=request.user, read_at__isnull=True)  # type: ignore[misc]
    listed = [
        {"room": n.room, "seq": n.seq, "sender": n.sender_name, "body": n.body, "at": format_time(n.created_at)}
        for n in unread.order_by("-created_at")[:LISTED]
    ]
    return JsonResponse({"unread": unread.count(), "mentions": listed})


@require_POST
def mentions_read(request: HttpRequest) -> JsonResponse:
    """Mark every unread mention of the user read (the CSRF token as for any form)."""
    refused = signed_in(request)
    if refused:
        return refused
    # Signed in (above): django-stubs cannot narrow `request.user`.
    Notification.objects.filter(user=request.user, read_at__isnull=True).update(read_at=timezone.now())  # type: ignore[misc]
    return JsonResponse({"unread": 0})
