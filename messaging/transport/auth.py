"""Signing in a WebSocket's user at the handshake, on a connection that may have died.

Channels' `AuthMiddleware` reads the session and the user on its database
thread, whose connection is persistent. With health checks off (the demo's
default: they cost a `SELECT 1` per command), a connection that PostgreSQL
ended meanwhile (a failover, a restart, `pg_terminate_backend`) is only found
dead when a query fails on it, and channels' upkeep around the call closes it
only afterwards: the handshake that met it answered HTTP 500, once per
process and failover. Commands recover the same way but answer `unavailable`,
which clients retry on the same socket; a failed handshake costs a reconnect.

Here the read is tried again once, on a fresh connection, when it failed
because a connection is unusable. A healthy connection pays nothing; a dead
one costs one `SELECT 1` on it and a reconnect. A database that is down
fails the second read too, and the handshake still fails (HTTP 500).

`AuthMiddlewareStack` is channels' stack with this middleware in place of
its `AuthMiddleware`: `project/asgi.py` uses it, and so may a host project.
"""

from __future__ import annotations

from typing import Any

from channels.auth import AuthMiddleware, get_user
from channels.db import database_sync_to_async
from channels.sessions import CookieMiddleware, SessionMiddleware
from django.contrib.auth.models import AnonymousUser
from django.db import InterfaceError, OperationalError, connections

# Channels' own lookup (session, backend, user, session hash), as a plain function.
_user_of_session = get_user.__wrapped__


def _user_of_scope(scope: dict[str, Any]) -> Any:
    """The user of the handshake's API token (`Authorization: Bearer`, a bot's or
    a backend's client) if it offers one, else of its session.

    A token that signs its user in is named in `scope["api_token"]` (its row's
    id, never the token): what the socket's checks ask about from then on
    (messaging/transport/signins.py)."""
    from .tokens import bearer_token, signed_in_by

    for name, value in scope.get("headers", ()):
        if name == b"authorization":
            token = bearer_token(value.decode("latin-1"))
            row = signed_in_by(token) if token else None
            if row is None:
                return AnonymousUser()
            scope["api_token"] = row.pk
            return row.user
    user = _user_of_session(scope)
    # Inactive is refused whatever the backend (`AllowAllUsersModelBackend` signs such users in).
    return user if getattr(user, "is_active", True) else AnonymousUser()


def drop_dead_connections() -> bool:
    """Close this thread's connections that no longer answer; whether there was one."""
    dropped = False
    for conn in connections.all(initialized_only=True):
        if conn.connection is not None and not conn.in_atomic_block and not conn.is_usable():
            conn.close()
            dropped = True
    return dropped


def signed_in_user(scope: dict[str, Any]) -> Any:
    """The scope's user (or `AnonymousUser`), read again once if a dead connection failed the first read."""
    try:
        return _user_of_scope(scope)
    except (OperationalError, InterfaceError):
        if not drop_dead_connections():
            raise
    # The session loads lazily and keeps nothing from a failed load, so this
    # reads it afresh; reads only, so reading twice changes nothing.
    return _user_of_scope(scope)


class RecoveringAuthMiddleware(AuthMiddleware):  # type: ignore[misc]  # channels has no types
    """Channels' `AuthMiddleware`, whose read survives a connection that died since its last use."""

    async def resolve_scope(self, scope: dict[str, Any]) -> None:
        scope["user"]._wrapped = await database_sync_to_async(signed_in_user)(scope)


def AuthMiddlewareStack(inner: Any) -> Any:  # noqa: N802 (channels' name, so it swaps in for channels' own)
    return CookieMiddleware(SessionMiddleware(RecoveringAuthMiddleware(inner)))
