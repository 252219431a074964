"""The page works under its Content-Security-Policy, as chromium enforces it:
the import map runs, the modules load, the socket connects to `ws://` under
`connect-src 'self'`, and no violation is reported; the admin too."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from .conftest import bubbles, join, sign_in, write

pytestmark = [pytest.mark.e2e]

# Before any of the page's own scripts: every violation, as the page would hear it.
LISTEN = """
window.__violations = [];
document.addEventListener("securitypolicyviolation", (e) => {
  window.__violations.push(`${e.violatedDirective} ${e.blockedURI}`);
});
"""


def watched(context) -> list[str]:
    """The context's pages report violations in `window.__violations`; console errors land in the list returned
    (but the admin's missing /favicon.ico, which is no policy's doing)."""
    errors: list[str] = []

    def console(message) -> None:
        where = message.location.get("url", "")
        if message.type == "error" and not where.endswith("/favicon.ico"):
            errors.append(f"{message.text} {where}")

    context.add_init_script(LISTEN)
    context.on("page", lambda page: page.on("console", console))
    return errors


def test_the_chat_page_works_under_its_policy_with_no_violation(server, new_context):
    context = new_context()
    errors = watched(context)
    page = sign_in(context, server.url, "ana")
    policy = page.context.request.get(server.url + "/").headers["content-security-policy"]
    assert "'unsafe-inline'" not in policy and "connect-src 'self'" in policy
    expect(page.locator("[data-testid=conn]")).to_have_attribute("data-state", "open")
    join(page, "lobby")
    write(page, "under the policy")
    expect(bubbles(page, "under the policy")).to_have_attribute("data-state", "sent")
    assert page.evaluate("window.__violations") == []
    assert errors == []


def test_the_admin_works_under_the_policy(server, new_context, django_user_model):
    django_user_model.objects.create_superuser(username="root", password="a long admin password")
    context = new_context()
    errors = watched(context)
    page = context.new_page()
    page.goto(server.url + "/admin/")
    page.get_by_label("Username").fill("root")
    page.get_by_label("Password").fill("a long admin password")
    page.get_by_role("button", name="Log in").click()
    expect(page.get_by_role("link", name="Messages")).to_be_visible()
    page.get_by_role("link", name="Messages").click()
    expect(page.locator("#changelist")).to_be_visible()
    assert page.evaluate("window.__violations") == []
    assert errors == []
