"""Guest sign-in at /login/ and the redirect from / (PROTOCOL.md, Endpoints)."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

pytestmark = [pytest.mark.django_db]


@pytest.fixture
def browser():
    return Client(enforce_csrf_checks=True)


def csrf_token(browser) -> str:
    browser.get("/login/")
    return browser.cookies["csrftoken"].value


def test_signed_out_visitor_is_redirected_to_login(browser):
    response = browser.get("/")
    assert response.status_code == 302 and response["Location"] == "/login/"


def test_each_sign_in_creates_a_new_guest_and_logs_it_in(browser):
    for expected in (1, 2):
        token = csrf_token(browser)
        response = browser.post("/login/", {"name": "ana", "csrfmiddlewaretoken": token})
        assert response.status_code == 302 and response["Location"] == "/"
        assert "sessionid" in response.cookies
        assert get_user_model().objects.filter(first_name="ana").count() == expected
    assert browser.get("/").status_code == 200


def test_safe_next_is_followed_and_unsafe_next_is_not(browser):
    token = csrf_token(browser)
    response = browser.post("/login/?next=/admin/", {"name": "ana", "csrfmiddlewaretoken": token})
    assert response["Location"] == "/admin/"
    token = csrf_token(browser)
    response = browser.post("/login/", {"name": "bob", "next": "https://evil.example/", "csrfmiddlewaretoken": token})
    assert response["Location"] == "/"


@pytest.mark.parametrize("name", ["", "   ", "x" * 33])
def test_bad_names_are_refused(browser, name):
    token = csrf_token(browser)
    response = browser.post("/login/", {"name": name, "csrfmiddlewaretoken": token})
    assert response.status_code == 200 and "sessionid" not in response.cookies
    assert not get_user_model().objects.exists()


def test_names_of_32_characters_are_fine(browser):
    token = csrf_token(browser)
    assert browser.post("/login/", {"name": "é" * 32, "csrfmiddlewaretoken": token}).status_code == 302


def test_post_without_csrf_token_is_refused(browser):
    assert browser.post("/login/", {"name": "ana"}).status_code == 403
    assert not get_user_model().objects.exists()
