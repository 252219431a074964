"""The chat page is a contrib app (`messaging.contrib.chat`): its template is the
host's to override, and the reusable app alone serves no page and makes no accounts."""

from __future__ import annotations

import copy
import html
import json
import re

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from django.urls import reverse

from messaging.contrib.chat.views import import_map
from messaging.core import handlers

from ..support.csp import executed_inline_scripts, policy_of, sha256_source

pytestmark = [pytest.mark.django_db]


def signed_in(django_user_model) -> Client:
    client = Client()
    client.force_login(django_user_model.objects.create_user(username=f"user{django_user_model.objects.count()}"))
    return client


def test_the_page_and_its_sign_out_are_the_contrib_apps_urls():
    assert reverse("messaging-chat") == "/"
    assert reverse("messaging-logout") == "/logout/"


def test_the_page_sends_an_ended_session_to_the_hosts_login_url(settings, django_user_model):
    assert 'data-login-url="/login/?next=/"' in signed_in(django_user_model).get("/").content.decode()
    settings.LOGIN_URL = "/accounts/sign-in/"
    assert 'data-login-url="/accounts/sign-in/?next=/"' in signed_in(django_user_model).get("/").content.decode()


def test_the_page_carries_the_lanes_of_the_command_types(django_user_model):
    # The outbox reads its lanes from the page (outbox.js `servedLanes`): the server's `Handler.lane`s.
    body = signed_in(django_user_model).get("/").content.decode()
    [lanes] = re.findall(r'data-lanes="([^"]*)"', body)
    assert json.loads(html.unescape(lanes)) == handlers.lanes()


def test_a_host_template_of_the_same_name_overrides_the_page(settings, tmp_path, django_user_model):
    (tmp_path / "messaging").mkdir()
    (tmp_path / "messaging" / "chat.html").write_text(
        '<!doctype html><p data-testid="host-page">the host\'s page</p><script type="importmap">{{ import_map }}</script>'
    )
    templates = copy.deepcopy(settings.TEMPLATES)
    templates[0]["DIRS"] = [tmp_path]
    settings.TEMPLATES = templates
    response = signed_in(django_user_model).get("/")
    body = response.content.decode()
    assert response.status_code == 200 and 'data-testid="host-page"' in body
    # The host's template gets the import map, and the policy still allows exactly it.
    [script] = executed_inline_scripts(body)
    assert script == import_map()
    assert policy_of(response["Content-Security-Policy"])["script-src"] == ["'self'", sha256_source(script)]


def test_the_reusable_app_alone_has_no_page_and_no_sign_in(settings):
    settings.ROOT_URLCONF = "messaging.urls"
    client = Client()
    assert client.get("/").status_code == 404
    assert client.post("/login/", {"name": "ana"}).status_code == 404
    assert not get_user_model().objects.exists()
    assert client.get("/healthz").status_code == 200
