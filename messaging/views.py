"""Guest sign-in and the chat page."""
from __future__ import annotations

import json
import uuid

from django import forms
from django.conf import settings
from django.contrib.auth import get_user_model, login
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.templatetags.static import static
from django.utils.http import url_has_allowed_host_and_scheme
from django.utils.safestring import mark_safe
from django.views.decorators.http import require_http_methods


class GuestForm(forms.Form):
    name = forms.CharField(label="Your name", min_length=1, max_length=32, strip=True)


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
    status = 400 if request.method == "POST" else 200
    return render(request, "messaging/login.html", {"form": form, "next": next_url}, status=status)


# The page's ES modules import each other by relative URL. With manifest
# storage (DEBUG off) each file is served under a hashed name; the import map
# sends those relative imports to the hashed files, so one deployment's
# modules never mix with another's from a cache.
CHAT_MODULES = ("messaging/outbox.js", "messaging/store.js")


def import_map() -> str:
    imports = {settings.STATIC_URL + name: static(name) for name in CHAT_MODULES}
    # Safe inside <script>: json.dumps escapes no "<", so do it here.
    return json.dumps({"imports": imports}).replace("<", "\\u003c")


def chat(request: HttpRequest) -> HttpResponse:
    if not request.user.is_authenticated:
        return redirect("/login/")
    return render(request, "messaging/chat.html", {"import_map": mark_safe(import_map())})
