"""`POST /logout/` (PROTOCOL.md 1.1, "Sign-out"): the session ends, 302 to
/login/; GET is 405 and a POST without the CSRF token 403, both changing
nothing; another user's session is untouched. The sockets' side is in
tests/e2e/test_sign_out.py."""

from __future__ import annotations

import re

import pytest
from django.contrib.sessions.models import Session
from django.test import Client

pytestmark = [pytest.mark.django_db]


def signed_in(name: str) -> Client:
    browser = Client(enforce_csrf_checks=True)
    browser.get("/login/")
    browser.post("/login/", {"name": name, "csrfmiddlewaretoken": browser.cookies["csrftoken"].value})
    assert browser.get("/").status_code == 200
    return browser


def token_on_the_page(browser: Client) -> str:
    """The CSRF token of the page's sign-out form, as a browser would submit it."""
    page = browser.get("/").content.decode()
    form = re.search(r'<form class="logout" method="post" action="/logout/">(.*?)</form>', page, re.S)
    assert form and 'data-testid="logout"' in form.group(1), page
    return re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', form.group(1)).group(1)


def test_sign_out_ends_the_session_and_redirects_to_login():
    ana = signed_in("ana")
    session = ana.cookies["sessionid"].value
    response = ana.post("/logout/", {"csrfmiddlewaretoken": token_on_the_page(ana)})
    assert response.status_code == 302 and response["Location"] == "/login/"
    assert not Session.objects.filter(session_key=session).exists()
    assert ana.get("/")["Location"] == "/login/"


def test_get_is_405_and_changes_nothing():
    ana = signed_in("ana")
    assert ana.get("/logout/").status_code == 405
    assert ana.get("/").status_code == 200


def test_without_the_csrf_token_it_is_refused_and_changes_nothing():
    ana = signed_in("ana")
    assert ana.post("/logout/").status_code == 403
    assert ana.post("/logout/", {"csrfmiddlewaretoken": "x" * 64}).status_code == 403
    assert ana.get("/").status_code == 200


def test_one_users_sign_out_leaves_another_signed_in():
    ana, bob = signed_in("ana"), signed_in("bob")
    assert ana.post("/logout/", {"csrfmiddlewaretoken": token_on_the_page(ana)}).status_code == 302
    assert bob.get("/").status_code == 200
    assert Session.objects.filter(session_key=bob.cookies["sessionid"].value).exists()


def test_signing_out_when_signed_out_still_lands_on_login():
    visitor = Client(enforce_csrf_checks=True)
    visitor.get("/login/")
    response = visitor.post("/logout/", {"csrfmiddlewaretoken": visitor.cookies["csrftoken"].value})
    assert response.status_code == 302 and response["Location"] == "/login/"
