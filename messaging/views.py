"""Guest sign-in and sign-out and the chat page (`/healthz` and `/metrics` are messaging.ops.health)."""
from __future__ import annotations

import base64
import hashlib
import json
import logging
import uuid

from django import forms
from django.conf import settings
from django.contrib.auth import get_user_model, login, logout
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.templatetags.static import static
from django.utils.http import url_has_allowed_host_and_scheme
from django.utils.safestring import mark_safe
from django.views.decorators.http import require_http_methods, require_POST

try:
    from csp.decorators import csp_update
except ImportError:  # django-csp is optional: the `csp` extra
    csp_update = None

from .ops.health import healthz, metrics_view  # noqa: F401 (0.2 documented them as messaging.views.*)
from .transport.addresses import limit_posts_per_address

log = logging.getLogger(__name__)


class GuestForm(forms.Form):
    name = forms.CharField(label="Your name", min_length=1, max_length=32, strip=True)


def signin_rate() -> tuple[int, float]:
    """Guest sign-ins per client address per window: the demo project's settings, as the view is the demo's."""
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
    return render(request, "messaging/login.html", {"form": form, "next": next_url})


@require_POST
def sign_out(request: HttpRequest) -> HttpResponse:
    """`POST /logout/`, with the CSRF token as for `/login/`: ends the session and goes to `/login/`.

    The session is deleted from its store, so every socket it opened is closed
    with 4401 at its next session check (`SESSION_CHECK_INTERVAL`). The page's
    outbox for that user stays in the browser's IndexedDB.
    """
    logout(request)
    return redirect("/login/")


# The page's ES modules import each other by relative URL. With manifest
# storage (DEBUG off) each file is served under a hashed name; the import map
# sends those relative imports to the hashed files, so one deployment's
# modules never mix with another's from a cache.
CHAT_MODULES = (
    "messaging/outbox.js", "messaging/store.js", "messaging/changes.js", "messaging/edits.js",
    "messaging/history.js", "messaging/unread.js",
)


def import_map() -> str:
    imports = {settings.STATIC_URL + name: static(name) for name in CHAT_MODULES}
    # Safe inside <script>: json.dumps escapes no "<", so do it here.
    return json.dumps({"imports": imports}).replace("<", "\\u003c")


def script_hash(script: str) -> str:
    """The Content-Security-Policy source that allows exactly this inline script."""
    return "'sha256-" + base64.b64encode(hashlib.sha256(script.encode()).digest()).decode() + "'"


def allow_inline_script(request: HttpRequest, response: HttpResponse, script: str) -> HttpResponse:
    """Add `script`'s hash to the response's `script-src`, where django-csp sets the policy.

    Its `csp_update` decorator, applied per response: the import map names the
    deployment's hashed files, so its hash is not known before it is built.
    Without django-csp (the `csp` extra) a host project's own policy must
    allow it, with `script_hash(import_map())`.
    """
    if csp_update is None:
        return response
    return csp_update({"script-src": [script_hash(script)]})(lambda request: response)(request)


def chat(request: HttpRequest) -> HttpResponse:
    if not request.user.is_authenticated:
        return redirect("/login/")
    script = import_map()
    response = render(request, "messaging/chat.html", {"import_map": mark_safe(script)})
    return allow_inline_script(request, response, script)
