"""Every response carries the Content-Security-Policy, and the chat page's one
inline script, the import map, is allowed by the hash of the text it serves.

Here with the source tree's static files (DEBUG); with the manifest's hashed
names in tests/e2e/test_safe_defaults.py, and in chromium in tests/browser/test_csp.py.
"""

from __future__ import annotations

import pytest
from django.test import Client

from ..support.csp import executed_inline_scripts, policy_of, sha256_source

pytestmark = [pytest.mark.django_db]


def policy(response) -> dict[str, list[str]]:
    return policy_of(response["Content-Security-Policy"])


@pytest.mark.parametrize("path", ["/login/", "/admin/login/", "/healthz"])
def test_every_response_carries_the_policy(path):
    given = policy(Client().get(path))
    assert given["default-src"] == ["'self'"] and given["connect-src"] == ["'self'"]
    assert given["script-src"] == ["'self'"] and given["object-src"] == ["'none'"]


def test_the_import_map_is_allowed_by_the_hash_of_what_the_page_serves(django_user_model):
    client = Client()
    client.force_login(django_user_model.objects.create_user(username="ana"))
    response = client.get("/")
    [import_map] = executed_inline_scripts(response.content.decode())
    assert '"imports"' in import_map
    script_src = policy(response)["script-src"]
    assert script_src == ["'self'", sha256_source(import_map)]
    assert "'unsafe-inline'" not in response["Content-Security-Policy"]
