"""Browser fixtures: Debian's chromium, driven by Playwright, against live daphne.

The server fixtures are the end-to-end ones (daphne with DEBUG=0 after
collectstatic, over the test PostgreSQL and Redis). Without /usr/bin/chromium
these tests are skipped; `.ci/run` installs it.
"""

from __future__ import annotations

import json
import os
import re
import time
from pathlib import Path

import pytest
from playwright.sync_api import expect, sync_playwright

from ..support.servers import ROOT

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
SCREENSHOTS = ROOT / "artifacts" / "screenshots"
# Generous: two cores are shared with other suites, and an ack timeout is 5 s.
WAIT_MS = 30_000


@pytest.fixture(autouse=True)
def _orm_beside_playwright(monkeypatch):
    """Playwright's sync API keeps its event loop marked as running in this
    thread while the test runs, so Django's guard would refuse every query
    (and the database flush after the test). That loop is suspended, never
    blocked by us: the guard's worry does not apply here."""
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "1")


# Per module, not per session: while Playwright's sync API is started its
# event loop counts as running in this thread, which async tests elsewhere in
# the suite cannot share. It must be stopped before they run.
@pytest.fixture(scope="module")
def browser():
    if not os.access(CHROMIUM, os.X_OK):
        pytest.skip(f"{CHROMIUM} is missing (apt-get install chromium; .ci/run does it)")
    expect.set_options(timeout=WAIT_MS)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield browser
        browser.close()


@pytest.fixture
def new_context(browser):
    contexts = []

    def new(**options):
        context = browser.new_context(**options)
        context.set_default_timeout(WAIT_MS)
        contexts.append(context)
        return context

    yield new
    for context in contexts:
        context.close()


@pytest.fixture
def server(start_daphne):
    # The guard stays on in the server: only this test process needs it off.
    return start_daphne(DJANGO_ALLOW_ASYNC_UNSAFE="")


def sign_in(context, base_url: str, name: str):
    """A new page of `context`, signed in through the form as a new guest."""
    page = context.new_page()
    page.goto(base_url + "/")
    page.wait_for_url(re.compile(r"/login/"))
    page.get_by_label("Your name").fill(name)
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url(base_url + "/")
    return page


def ask_to_join(page, room: str) -> None:
    """Type the room's name and press Join: the page sends the join."""
    page.locator("[data-testid=room-input]").fill(room)
    page.locator("[data-testid=room-join]").click()


def join(page, room: str) -> None:
    ask_to_join(page, room)
    # The page opens a new room on its join's answer (chat.js, joinRoom), so
    # the title says the server has the membership: a post another page makes
    # next counts this user among its recipients. CI once saw one stay `sent`
    # when the title came with the join's sending instead.
    expect(page.locator("#room-title")).to_have_text(f"# {room}")


def write(page, body: str) -> None:
    page.locator("[data-testid=composer]").fill(body)
    page.locator("[data-testid=composer]").press("Enter")


def bubbles(page, body: str):
    """Message elements with exactly this body."""
    return page.locator("[data-msg-id]").filter(has=page.locator(".body", has_text=re.compile(f"^{re.escape(body)}$")))


def screenshot(page, name: str) -> Path:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    path = SCREENSHOTS / f"{name}.png"
    page.screenshot(path=str(path))
    return path


def leave_behind_the_pages_back(**filters) -> None:
    """Delete the memberships matching `filters`, as an admin would, while their pages may still send receipts.

    A receipt that commits its watermark move in the middle of the delete is
    deleted with the membership by the database (migration 0005); before
    that, such a delete failed on the move's foreign key.
    """
    from messaging.models import Membership

    Membership.objects.filter(**filters).delete()


def poll(page, check, what: str) -> None:
    """Wait for `check()` (say, a database row) while Playwright keeps
    delivering the page's events: a plain sleep would hold them back."""
    deadline = time.monotonic() + WAIT_MS / 1000
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"no {what} within {WAIT_MS / 1000:.0f} s")
        page.wait_for_timeout(100)


class Relay:
    """The page's socket, through the test: every frame the page sends is kept
    in `sent`, and every frame the server sends reaches the page unless
    `withhold(frame)` says otherwise; `deliver(frame)` lets one through later."""

    def __init__(self, page, withhold=lambda frame: False):
        self.sent: list[dict] = []
        self.withhold = withhold
        self.to_page = None
        page.route_web_socket(re.compile(r"/ws/$"), self.route)

    def route(self, ws):
        upstream = ws.connect_to_server()
        self.to_page = ws

        def from_page(message):
            self.sent.append(json.loads(message))
            upstream.send(message)

        def from_server(message):
            if not self.withhold(json.loads(message)):
                ws.send(message)

        ws.on_message(from_page)
        upstream.on_message(from_server)

    def deliver(self, frame: dict) -> None:
        self.to_page.send(json.dumps(frame))
