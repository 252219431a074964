"""The chat page and its sign-out button's view.

Signing in is the host's: the page sends a visitor who is not signed in to
`settings.LOGIN_URL` (the demo's guest form at `/login/`, `project/guests.py`),
and so does its script when the session ends under it; sign-out goes there too.
"""

from __future__ import annotations

import base64
import hashlib
import json

from django.conf import settings
from django.contrib.auth import logout
from django.http import HttpRequest, HttpResponse, QueryDict
from django.http.response import HttpResponseBase
from django.shortcuts import redirect, render, resolve_url
from django.templatetags.static import static
from django.utils.safestring import mark_safe
from django.views.decorators.http import require_POST

from ...conf import get_settings
from ...core import handlers

try:
    from csp.decorators import csp_update
except ImportError:  # django-csp is optional: the `csp` extra
    csp_update = None  # type: ignore[assignment]  # the name stands for the extra's absence


@require_POST
def sign_out(request: HttpRequest) -> HttpResponse:
    """`POST /logout/`, with the CSRF token as for the sign-in form: ends the session and goes to `LOGIN_URL`.

    The session is deleted from its store, so every socket it opened is closed
    with 4401 at its next session check (`SESSION_CHECK_INTERVAL`). The page's
    outbox for that user stays in the browser's IndexedDB.
    """
    logout(request)
    return redirect(settings.LOGIN_URL)


# The page's ES modules import each other by relative URL. With manifest
# storage (DEBUG off) each file is served under a hashed name; the import map
# sends those relative imports to the hashed files, so one deployment's
# modules never mix with another's from a cache.
CHAT_MODULES = (
    "messaging/connection.js",
    "messaging/outbox.js",
    "messaging/store.js",
    "messaging/controller/emoji.js",
    "messaging/stream.js",
    "messaging/controller/files.js",
    "messaging/controller/messages.js",
    "messaging/controller/page.js",
    "messaging/controller/people.js",
    "messaging/controller/requests.js",
    "messaging/controller/rooms.js",
    "messaging/controller/search.js",
    "messaging/controller/threads.js",
    "messaging/model/changes.js",
    "messaging/model/commands.js",
    "messaging/model/emoji.js",
    "messaging/model/files.js",
    "messaging/model/invitations.js",
    "messaging/model/members.js",
    "messaging/model/message.js",
    "messaging/model/paging.js",
    "messaging/model/people.js",
    "messaging/model/reactions.js",
    "messaging/model/receipts.js",
    "messaging/model/room.js",
    "messaging/model/rooms.js",
    "messaging/model/states.js",
    "messaging/model/threads.js",
    "messaging/model/timeline.js",
    "messaging/model/unread.js",
    "messaging/views/composer.js",
    "messaging/views/conversation.js",
    "messaging/views/dom.js",
    "messaging/views/edits.js",
    "messaging/views/emoji.js",
    "messaging/views/files.js",
    "messaging/views/history.js",
    "messaging/views/icons.js",
    "messaging/views/invitations.js",
    "messaging/views/message.js",
    "messaging/views/people.js",
    "messaging/views/reactions.js",
    "messaging/views/reading.js",
    "messaging/views/replies.js",
    "messaging/views/search.js",
    "messaging/views/sidebar.js",
    "messaging/views/status.js",
    "messaging/views/thread.js",
    "messaging/views/uploads.js",
)


def import_map() -> str:
    imports = {settings.STATIC_URL + name: static(name) for name in CHAT_MODULES}
    # Safe inside <script>: json.dumps escapes no "<", so do it here.
    return json.dumps({"imports": imports}).replace("<", "\\u003c")


def script_hash(script: str) -> str:
    """The Content-Security-Policy source that allows exactly this inline script."""
    return "'sha256-" + base64.b64encode(hashlib.sha256(script.encode()).digest()).decode() + "'"


def allow_inline_script(request: HttpRequest, response: HttpResponse, script: str) -> HttpResponseBase:
    """Add `script`'s hash to the response's `script-src`, where django-csp sets the policy.

    Its `csp_update` decorator, applied per response: the import map names the
    deployment's hashed files, so its hash is not known before it is built.
    Without django-csp (the `csp` extra) a host project's own policy must
    allow it, with `script_hash(import_map())`.
    """
    if csp_update is None:
        return response
    return csp_update({"script-src": [script_hash(script)]})(lambda request: response)(request)


def login_url(request: HttpRequest) -> str:
    """Where the page sends the browser when its session has ended (4401): the host's
    `LOGIN_URL`, back to this page after (`/login/?next=/` in the demo)."""
    query = QueryDict(mutable=True)
    query["next"] = request.get_full_path()
    return f"{resolve_url(settings.LOGIN_URL)}?{query.urlencode(safe='/')}"


def chat(request: HttpRequest) -> HttpResponseBase:
    if not request.user.is_authenticated:
        return redirect(settings.LOGIN_URL)
    script = import_map()
    # `node`: this deployment's name with federation on (the page names users of other deployments by theirs).
    context = {
        "import_map": mark_safe(script),
        "login_url": login_url(request),
        "node": get_settings().NODE or "",
        # The outbox's lanes (`Handler.lane`): a host's own types' too.
        "lanes": json.dumps(handlers.lanes()),
    }
    response = render(request, "messaging/chat.html", context)
    return allow_inline_script(request, response, script)
