"""The handshake's sign-in read (`messaging.transport.auth.signed_in_user`) on a connection PostgreSQL ended.

It is read again once, on a fresh connection, only when the connection it
failed on is dead; any other database error fails the handshake as before.
The real-daphne proof is tests/faults/test_handshake_failover.py.
"""

from __future__ import annotations

import psycopg
import pytest
from django.contrib.auth import get_user_model
from django.db import OperationalError, connection
from django.test import Client as HttpClient
from django.test.utils import CaptureQueriesContext

from messaging.transport.auth import signed_in_user

pytestmark = [pytest.mark.django_db(transaction=True)]


def signed_in_scope() -> tuple[object, dict]:
    user = get_user_model().objects.create_user("ana")
    http = HttpClient()
    http.force_login(user)
    # A store of the deployed SESSION_ENGINE that has not loaded yet, as channels' middleware makes it.
    session = http.session
    return user, {"session": session.__class__(session.session_key)}


def other_connection() -> psycopg.Connection:
    db = connection.settings_dict
    return psycopg.connect(
        host=db["HOST"] or "127.0.0.1",
        port=db["PORT"] or 5432,
        user=db["USER"] or "postgres",
        dbname=db["NAME"],
        autocommit=True,
    )


def test_a_dead_connection_is_replaced_and_the_user_signed_in():
    user, scope = signed_in_scope()
    dead = connection.connection.info.backend_pid
    with other_connection() as other:
        other.execute("SELECT pg_terminate_backend(%s)", [dead])
    assert signed_in_user(scope) == user
    assert connection.connection.info.backend_pid != dead


def test_an_error_on_a_live_connection_is_not_retried():
    _, scope = signed_in_scope()
    live = connection.connection.info.backend_pid
    with connection.cursor() as cursor:
        cursor.execute("SET lock_timeout = '50ms'")
    with other_connection() as other, other.transaction():
        # The session table locked elsewhere: the read fails on a connection that still works.
        other.execute("LOCK TABLE django_session IN ACCESS EXCLUSIVE MODE")
        with CaptureQueriesContext(connection) as queries, pytest.raises(OperationalError, match="lock timeout"):
            signed_in_user(scope)
    assert len(queries) == 1, "read once: the connection was not the trouble"
    assert connection.connection.info.backend_pid == live
    with connection.cursor() as cursor:
        cursor.execute("RESET lock_timeout")


@pytest.mark.parametrize(
    "backend", ["django.contrib.auth.backends.ModelBackend", "django.contrib.auth.backends.AllowAllUsersModelBackend"]
)
def test_an_inactive_user_signs_in_no_socket_whatever_the_backend(settings, backend):
    settings.AUTHENTICATION_BACKENDS = [backend]
    user, scope = signed_in_scope()
    assert signed_in_user(scope) == user
    get_user_model().objects.filter(pk=user.pk).update(is_active=False)
    assert not signed_in_user({"session": scope["session"].__class__(scope["session"].session_key)}).is_authenticated
