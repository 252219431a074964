"""The page in a room of another deployment (PROTOCOL 1.2): a user of the other side is shown
as `name · node`, in the messages and the members panel, and has no "Message" button; an own
message there reaches `read` when a reader on the room's home reads it."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from .conftest import bubbles, join, screenshot, sign_in, write

pytestmark = [pytest.mark.e2e]


def test_users_of_the_other_deployment_are_shown_with_their_node(start_pair, new_context):
    pair = start_pair()
    ana = sign_in(new_context(), pair.a.url, "ana")
    bo = sign_in(new_context(), pair.b.url, "bo")
    join(ana, "lobby")
    join(bo, "lobby@a")
    write(ana, "hello from a")
    write(bo, "hello from b")
    expect(bubbles(bo, "hello from a").locator(".sender")).to_have_text("ana · a")
    expect(bubbles(ana, "hello from b").locator(".sender")).to_have_text("bo · b")
    expect(bubbles(bo, "hello from b").locator(".sender")).to_have_text("You")
    # ana's page, on a, reads it: the state comes back to bo's page through b's replica.
    expect(bubbles(bo, "hello from b")).to_have_attribute("data-state", "read")
    members = ana.locator("[data-testid=member]")
    expect(members.filter(has_text="bo · b")).to_have_count(1)
    expect(members.filter(has_text="bo · b").locator("[data-testid=dm]")).to_have_count(0)
    expect(members.filter(has_text="ana (you)")).to_have_count(1)
    screenshot(bo, "federation-replica")
