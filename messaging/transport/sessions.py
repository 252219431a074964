"""Whether sessions still sign their users in, read for many sessions at once.

The same decision as `django.contrib.auth.get_user`, without its writes: on a
hash that only a fallback secret verifies, `get_user` rotates the session key
(the socket's browser would keep the old one and be logged out), and on a
stale hash it deletes the session. A periodic check from a socket must only
read; the next HTTP request does the rest, as it always did.

For many sessions (every socket of a process, messaging/transport/signins.py)
the reads are shared: with the database engine one query reads every
session, and the users, read beforehand in one query, stand in for the
backend's read where the backend's `get_user` is `ModelBackend`'s (which is
that read and `user_can_authenticate`). Any other engine is read session by
session, and any other backend asked user by user, as `get_user` would.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from importlib import import_module
from typing import Any

from django.conf import settings
from django.contrib.auth import BACKEND_SESSION_KEY, HASH_SESSION_KEY, SESSION_KEY, load_backend
from django.contrib.auth.backends import ModelBackend
from django.contrib.sessions.backends import db
from django.utils import timezone
from django.utils.crypto import constant_time_compare


def session_still_signs_in(session_key: str, user: Any) -> bool:
    """False once the session was logged out, flushed or expired, the user is
    gone or inactive, or a password change invalidated the session's hash."""
    session = import_module(settings.SESSION_ENGINE).SessionStore(session_key)
    return signs_in(dict(session.items()), user.pk)


def stored_sessions(keys: Collection[str]) -> dict[str, Mapping[str, Any]]:
    """The data of each session of `keys` that exists and has not expired (reads only)."""
    store = import_module(settings.SESSION_ENGINE).SessionStore
    if store.load is db.SessionStore.load and store._get_session_from_db is db.SessionStore._get_session_from_db:  # type: ignore[attr-defined]  # private: not in django-stubs
        # What `load` reads, for every key at once.
        rows = store.get_model_class().objects.filter(session_key__in=keys, expire_date__gt=timezone.now())
        decoder = store()
        found = {key: decoder.decode(data) for key, data in rows.values_list("session_key", "session_data")}
    else:
        found = {key: dict(store(key).items()) for key in keys}
    return {key: data for key, data in found.items() if data}


def signs_in(data: Mapping[str, Any], user_pk: Any, users: Mapping[str, Any] | None = None) -> bool:
    """Whether a session's `data` still signs in the user `user_pk`.

    `users` (by `str(pk)`), read beforehand, stand in for the backend's read
    where the backend's `get_user` is `ModelBackend`'s; without them, or for
    another backend, the backend reads the user.
    """
    user_id, backend_path = data.get(SESSION_KEY), data.get(BACKEND_SESSION_KEY)
    if user_id is None or str(user_id) != str(user_pk) or backend_path not in settings.AUTHENTICATION_BACKENDS:
        return False
    backend = load_backend(backend_path)
    if users is not None and isinstance(backend, ModelBackend) and type(backend).get_user is ModelBackend.get_user:
        current = users.get(str(user_pk))
        if current is not None and not backend.user_can_authenticate(current):
            current = None
    else:
        current = backend.get_user(user_pk)
    if current is None:
        return False
    if not hasattr(current, "get_session_auth_hash"):
        return True
    given = data.get(HASH_SESSION_KEY) or ""
    hashes = [current.get_session_auth_hash(), *current.get_session_auth_fallback_hash()]
    return bool(given) and any(constant_time_compare(given, expected) for expected in hashes)
