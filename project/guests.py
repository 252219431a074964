"""The demo's guest sign-in: `/login/` makes a new account for whoever gives a name.

The demo's, not the app's: a host project signs its users in its own way
(`messaging` reads the session's user and makes no accounts). The accounts
it makes are named `guest-` and 16 hex digits, which is how
`manage.py prune_guests` tells them from other accounts.
"""

from __future__ import annotations

import uuid

from django import forms
from django.conf import settings
from django.contrib.auth import get_user_model, login
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_http_methods

from messaging import limit_posts_per_address


class GuestForm(forms.Form):
    name = forms.CharField(label="Your name", min_length=1, max_length=32, strip=True)


def signin_rate() -> tuple[int, float]:
    """Guest sign-ins per client address per window (`SIGNIN_RATE`, `SIGNIN_RATE_WINDOW`)."""
    return getattr(settings, "SIGNIN_RATE", 30), getattr(settings, "SIGNIN_RATE_WINDOW", 60.0)


@limit_posts_per_address("signin", signin_rate, "sign-ins")
@require_http_methods(["GET", "POST"])
def guest_login(request: HttpRequest) -> HttpResponse:
    """Each successful POST creates a new guest account with the given display name."""
    next_url = request.POST.get("next") or request.GET.get("next") or "/"
    if not url_has_allowed_host_and_scheme(next_url, {request.get_host()}, require_https=request.is_secure()):
        next_url = "/"
    form = GuestForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        user = get_user_model().objects.create_user(
            username=f"guest-{uuid.uuid4().hex[:16]}", first_name=form.cleaned_data["name"]
        )
        login(request, user, backend="django.contrib.auth.backends.ModelBackend")
        return redirect(next_url)
    return render(request, "guest_login.html", {"form": form, "next": next_url})
