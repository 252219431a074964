"""The admin's login on real daphne processes: failed logins lock their client address out (django-axes,
`ADMIN_LOGIN_FAILURES`), keyed by the app's reading of the client, so a rotating X-Forwarded-For from a peer
that is not a trusted proxy does not make new addresses."""

from __future__ import annotations

import asyncio
import http.client
import http.cookies
import urllib.parse

import pytest
from asgiref.sync import sync_to_async
from django.contrib.auth import get_user_model

pytestmark = [pytest.mark.e2e]

PASSWORD = "correct horse battery staple"
ENV = {"TRUSTED_PROXIES": "127.0.0.1", "ADMIN_LOGIN_FAILURES": "3"}


def admin_login(server, password: str, forwarded_for: str | None = None, source: str = "127.0.0.1") -> int:
    """GET the admin's login form, POST `admin` and `password` from `source`: the POST's status
    (302: signed in; 200: the form again, refused; 429: locked out)."""
    headers = {} if forwarded_for is None else {"X-Forwarded-For": forwarded_for}

    def request(method: str, body: str | None = None, cookie: str | None = None) -> http.client.HTTPResponse:
        conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10, source_address=(source, 0))
        sent = dict(headers)
        if body is not None:
            sent |= {"Content-Type": "application/x-www-form-urlencoded", "Cookie": f"csrftoken={cookie}"}
        conn.request(method, "/admin/login/?next=/admin/", body=body, headers=sent)
        response = conn.getresponse()
        response.read()
        conn.close()
        return response

    form = request("GET")
    csrf = http.cookies.SimpleCookie(form.headers["Set-Cookie"])["csrftoken"].value
    body = urllib.parse.urlencode(
        {"username": "admin", "password": password, "csrfmiddlewaretoken": csrf, "next": "/admin/"}
    )
    return request("POST", body, csrf).status


async def login(server, password: str, forwarded_for: str | None = None, source: str = "127.0.0.1") -> int:
    return await asyncio.to_thread(admin_login, server, password, forwarded_for, source)


@pytest.fixture
def admin(transactional_db):
    return get_user_model().objects.create_superuser("admin", "admin@example.com", PASSWORD)


async def test_failed_admin_logins_lock_their_address_out_on_every_process(start_daphne, admin):
    a, b = start_daphne(**ENV), start_daphne(**ENV)
    # The third failure, on whichever process, locks the address out.
    assert [await login(server, "wrong", "203.0.113.7") for server in (a, b, a)] == [200, 200, 429]
    # Locked out, on either process, even with the right password.
    assert await login(b, PASSWORD, "203.0.113.7") == 429
    assert await login(a, PASSWORD, "198.51.100.1, 203.0.113.7") == 429
    # Another address behind the proxy still gets in.
    assert await login(a, PASSWORD, "203.0.113.8") == 302
    assert await login(b, PASSWORD, "203.0.113.8") == 302


async def test_a_rotating_x_forwarded_for_from_an_untrusted_peer_is_one_address(start_daphne, admin):
    server = start_daphne(**ENV)
    # 127.0.0.2 is no trusted proxy: whatever it writes, it is 127.0.0.2.
    statuses = [await login(server, "wrong", f"198.51.100.{n}", source="127.0.0.2") for n in range(1, 4)]
    assert statuses == [200, 200, 429]
    assert await login(server, PASSWORD, "198.51.100.99", source="127.0.0.2") == 429
    assert await login(server, PASSWORD, source="127.0.0.2") == 429
    # The addresses it named are not locked out.
    assert await login(server, PASSWORD, "198.51.100.1") == 302
    assert await sync_to_async(lambda: get_user_model().objects.get(username="admin").last_login is not None)()
    # ADMIN_LOGIN_FAILURES=0 turns the lockout off.
    unlimited = start_daphne(**{**ENV, "ADMIN_LOGIN_FAILURES": "0"})
    assert [await login(unlimited, "wrong", "203.0.113.7") for _ in range(5)] == [200] * 5
    assert await login(unlimited, PASSWORD, "203.0.113.7") == 302
