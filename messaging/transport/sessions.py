"""Whether a socket's session still signs its user in.

The same decision as `django.contrib.auth.get_user`, without its writes: on a
hash that only a fallback secret verifies, `get_user` rotates the session key
(the socket's browser would keep the old one and be logged out), and on a
stale hash it deletes the session. A periodic check from a socket must only
read; the next HTTP request does the rest, as it always did.
"""
from __future__ import annotations

from importlib import import_module
from typing import Any

from django.conf import settings
from django.contrib.auth import BACKEND_SESSION_KEY, HASH_SESSION_KEY, SESSION_KEY, load_backend
from django.utils.crypto import constant_time_compare


def session_still_signs_in(session_key: str, user: Any) -> bool:
    """False once the session was logged out, flushed or expired, the user is
    gone or inactive, or a password change invalidated the session's hash."""
    session = import_module(settings.SESSION_ENGINE).SessionStore(session_key)
    user_id, backend_path = session.get(SESSION_KEY), session.get(BACKEND_SESSION_KEY)
    if user_id is None or str(user_id) != str(user.pk) or backend_path not in settings.AUTHENTICATION_BACKENDS:
        return False
    current = load_backend(backend_path).get_user(user.pk)
    if current is None:
        return False
    if not hasattr(current, "get_session_auth_hash"):
        return True
    given = session.get(HASH_SESSION_KEY) or ""
    hashes = [current.get_session_auth_hash(), *current.get_session_auth_fallback_hash()]
    return bool(given) and any(constant_time_compare(given, expected) for expected in hashes)
