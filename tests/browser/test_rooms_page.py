"""Several rooms on one page: only the selected room's conversation is on screen."""
from __future__ import annotations

import pytest
from playwright.sync_api import expect

from .conftest import bubbles, join, sign_in, write

pytestmark = [pytest.mark.e2e]

ROOMS = ("alpha", "beta", "gamma")


def body_in(room: str) -> str:
    return f"a message in {room}"


def expect_only_on_screen(page, selected: str, rooms: tuple[str, ...] = ROOMS) -> None:
    """The selected room's message is visible; the other rooms' are in the page but not shown.

    Playwright's visibility (a box on screen, not `display: none`), not the
    `hidden` attribute: a stylesheet rule that overrides `[hidden]` keeps the
    attribute and shows the element all the same.
    """
    expect(page.locator("#room-title")).to_have_text(f"# {selected}")
    for room in rooms:
        message = bubbles(page, body_in(room))
        expect(message).to_have_count(1)
        if room == selected:
            expect(message).to_be_visible()
        else:
            expect(message).to_be_hidden()
    # Nothing of another room's list is on screen, empty or not.
    expect(page.locator(".message-list:visible")).to_have_count(1)


def test_only_the_selected_room_is_shown_across_switches_and_a_reload(server, new_context):
    page = sign_in(new_context(), server.url, "ana")
    for n, room in enumerate(ROOMS, start=1):
        join(page, room)
        write(page, body_in(room))
        expect(bubbles(page, body_in(room))).to_have_attribute("data-state", "sent")
        expect_only_on_screen(page, room, ROOMS[:n])

    for room in ("alpha", "gamma", "beta", "alpha"):
        page.get_by_role("button", name=f"# {room}").click()
        expect_only_on_screen(page, room)

    # After a reload the page rejoins every room and selects the last one it showed.
    page.reload()
    expect(page.locator("[data-testid=conn]")).to_have_attribute("data-state", "open")
    expect_only_on_screen(page, "alpha")
    page.get_by_role("button", name="# gamma").click()
    expect_only_on_screen(page, "gamma")
