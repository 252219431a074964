"""The page's sign-out button: a form POST with the CSRF token, from the
keyboard; the user's other tab follows to /login/ once its socket is closed
with 4401, and the outbox of that user stays in IndexedDB."""

from __future__ import annotations

import json
import re

import pytest
from playwright.sync_api import expect

from .conftest import Relay, bubbles, join, screenshot, sign_in, write

pytestmark = [pytest.mark.e2e]

OUTBOX_OF = """async (user) => {
    const db = await new Promise((ok, no) => {
        const req = indexedDB.open(`messaging-user-${user}`);
        req.onsuccess = () => ok(req.result); req.onerror = () => no(req.error);
    });
    const entries = await new Promise((ok, no) => {
        const req = db.transaction("outbox").objectStore("outbox").getAll();
        req.onsuccess = () => ok(req.result); req.onerror = () => no(req.error);
    });
    db.close();
    return entries.map((entry) => entry.d.body);
}"""


def test_sign_out_from_the_keyboard_ends_both_tabs_and_keeps_the_outbox(start_daphne, new_context):
    server = start_daphne(DJANGO_ALLOW_ASYNC_UNSAFE="", MESSAGING_SESSION_CHECK_INTERVAL="1")
    context = new_context()
    other_tab = sign_in(context, server.url, "ana")
    expect(other_tab.locator("[data-testid=conn]")).to_have_attribute("data-state", "open")

    # This tab never hears about its post, so the post stays in the outbox.
    tab = context.new_page()

    def posts() -> set[str]:
        return {frame["id"] for frame in relay.sent if frame["t"] == "room.post"}

    relay = Relay(tab, withhold=lambda frame: frame["t"] == "msg" or (frame["t"] == "ack" and frame["id"] in posts()))
    tab.goto(server.url + "/")
    join(tab, "lobby")
    write(tab, "left unsent")
    expect(bubbles(tab, "left unsent")).to_have_attribute("data-state", "sending")
    user = json.loads(tab.locator("#messaging-me").text_content())

    tab.locator("[data-testid=logout]").focus()
    screenshot(tab, "sign-out-focused")
    tab.keyboard.press("Enter")
    tab.wait_for_url(re.compile(r"/login/$"))
    # The other tab's socket is closed with 4401 within the check interval; the page goes to sign in.
    other_tab.wait_for_url(re.compile(r"/login/"))
    assert not any(cookie["name"] == "sessionid" for cookie in context.cookies(server.url))

    assert tab.evaluate(OUTBOX_OF, user) == ["left unsent"]
