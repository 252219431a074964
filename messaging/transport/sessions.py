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

Most sessions of a process's idle sockets are what they were at the check
before; decoding each again (a signature and JSON) and hashing its user's
password again cost an idle socket most of its CPU. `Verified` remembers,
from one round of checks to the next, the sessions that signed their users
in, by a digest of the session's stored data, its user and the user's
password hash: a session whose three are the same signs in again, once the
backend's `user_can_authenticate` (read again every round: `is_active`)
says yes. Anything else changed (a logout, a new login, a password change,
an expiry) is decided again in full.
"""

from __future__ import annotations

import hashlib
import sys
from collections.abc import Collection, Mapping
from importlib import import_module
from typing import Any

from django.conf import settings
from django.contrib.auth import BACKEND_SESSION_KEY, HASH_SESSION_KEY, SESSION_KEY, load_backend
from django.contrib.auth.backends import ModelBackend
from django.contrib.auth.base_user import AbstractBaseUser
from django.contrib.sessions.backends import db
from django.db import connections
from django.db.models import QuerySet
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
    encoded = encoded_sessions(keys)
    if encoded is not None:
        decoder = store()
        found = {key: decoder.decode(data) for key, data in encoded.items()}
    else:
        found = {key: dict(store(key).items()) for key in keys}
    return {key: data for key, data in found.items() if data}


def encoded_sessions(keys: Collection[str]) -> dict[str, str] | None:
    """The stored data, still encoded, of each session of `keys` that exists and
    has not expired: one query, with the database engine (None with another)."""
    if not sessions_are_rows():
        return None
    store = import_module(settings.SESSION_ENGINE).SessionStore
    # What `load` reads, for every key at once.
    rows = among(store.get_model_class().objects.filter(expire_date__gt=timezone.now()), "session_key", keys)
    return dict(rows.values_list("session_key", "session_data"))


def sessions_are_rows() -> bool:
    """Whether the session engine loads a session as the database engine does: its row, if not expired."""
    store = import_module(settings.SESSION_ENGINE).SessionStore
    # `_get_session_from_db` is private (not in django-stubs): read by name.
    own_read = getattr(store, "_get_session_from_db", None) is getattr(db.SessionStore, "_get_session_from_db", None)
    return store.load is db.SessionStore.load and own_read


def among(rows: QuerySet[Any], field: str, values: Collection[Any]) -> QuerySet[Any]:
    """`rows` whose `field` is one of `values` (not empty). On PostgreSQL one array
    parameter (`= ANY(%s)`): an `IN` list of 2,000 parameters costs Django and
    psycopg more CPU than the rest of a round of credential checks."""
    connection = connections[rows.db]
    if connection.vendor != "postgresql":
        return rows.filter(**{f"{field}__in": values})
    meta = rows.model._meta
    column = meta.pk.column if field == "pk" else meta.get_field(field).column
    quote = connection.ops.quote_name
    return rows.extra(where=[f"{quote(meta.db_table)}.{quote(column)} = ANY(%s)"], params=[list(values)])


def plain_hash(user: Any) -> bool:
    """Whether the user's session hash is Django's: the password's HMAC under the secret keys, and nothing else."""
    kind = type(user)
    return (
        kind.get_session_auth_hash is AbstractBaseUser.get_session_auth_hash
        and getattr(kind, "_get_session_auth_hash", None) is getattr(AbstractBaseUser, "_get_session_auth_hash", None)
        and kind.get_session_auth_fallback_hash is AbstractBaseUser.get_session_auth_fallback_hash
    )


class Verified:
    """The sessions that signed their users in at the last round of checks, and this round's (module docstring).

    Held by one process's credential watch, and asked by one round at a
    time. Each round keeps only what it verified: at most one entry (a
    16-byte digest) per session it was asked about, the last round's dropped
    as the next one ends.
    """

    def __init__(self) -> None:
        self.last: dict[bytes, str] = {}
        self.this: dict[bytes, str] = {}
        self.settings: tuple[Any, ...] = ()

    def start(self) -> None:
        """A round begins; what the last one verified holds only under the same keys and backends."""
        now = (settings.SECRET_KEY, tuple(settings.SECRET_KEY_FALLBACKS), tuple(settings.AUTHENTICATION_BACKENDS))
        if now != self.settings:
            self.settings, self.last, self.this = now, {}, {}

    def end(self) -> None:
        self.last, self.this = self.this, {}

    def signs_in(self, encoded: str | None, user_pk: Any, users: Mapping[str, Any]) -> bool:
        """`signs_in` for a session stored as `encoded` (None: none), with `users` read beforehand."""
        if encoded is None:
            return False
        current = users.get(str(user_pk))
        password = getattr(current, "password", None)
        if current is None or not isinstance(password, str) or not plain_hash(current):
            return signs_in(import_module(settings.SESSION_ENGINE).SessionStore().decode(encoded), user_pk, users)
        digest = hashlib.blake2b(f"{user_pk}\0{password}\0{encoded}".encode(), digest_size=16).digest()
        backend_path = self.last.get(digest)
        if backend_path is not None:
            backend = load_backend(backend_path)
            if (
                isinstance(backend, ModelBackend)
                and type(backend).get_user is ModelBackend.get_user
                and backend.user_can_authenticate(current)
            ):
                self.this[digest] = backend_path
                return True
        data = import_module(settings.SESSION_ENGINE).SessionStore().decode(encoded)
        if not signs_in(data, user_pk, users):
            return False
        backend_path = data[BACKEND_SESSION_KEY]
        if type(load_backend(backend_path)).get_user is ModelBackend.get_user:
            self.this[digest] = sys.intern(backend_path)
        return True


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
