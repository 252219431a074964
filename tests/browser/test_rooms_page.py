"""Several rooms on one page: only the selected room's conversation is on screen."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from .conftest import Relay, ask_to_join, bubbles, join, poll, sign_in, write

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


def test_a_new_room_opens_once_the_server_has_the_membership(server, new_context):
    """Online, the page shows a room it joins when the join is answered: a room
    on screen is one the server counts this user in. With no answer in 5 s it
    opens anyway; offline it opens at once and the join waits for the network."""
    context = new_context()
    page = sign_in(context, server.url, "ana")
    held: list[dict] = []

    def join_of(room: str) -> set[str]:
        return {f["id"] for f in relay.sent if f["t"] == "room.join" and f["d"]["room"] == room}

    def withhold(frame: dict) -> bool:
        if frame["t"] == "ack" and frame["id"] in join_of("second") | join_of("third"):
            held.append(frame)
            return True
        return False

    relay = Relay(page, withhold)
    page.reload()
    join(page, "first")

    ask_to_join(page, "second")
    poll(page, lambda: held, "the server's answer to the join of second")
    # The server has answered; the page has not heard it: still the first room.
    expect(page.locator("#room-title")).to_have_text("# first")
    relay.deliver(held[0])
    expect(page.locator("#room-title")).to_have_text("# second")
    expect(page.locator("[data-testid=member]", has_text="(you)")).to_have_count(1)

    # An answer that never comes: the room opens after the wait all the same.
    ask_to_join(page, "third")
    expect(page.locator("#room-title")).to_have_text("# third", timeout=15_000)
    assert len(held) == 2

    # Offline: at once, and the join goes out with the reconnection.
    context.set_offline(True)
    expect(page.locator("[data-testid=conn]")).to_have_attribute("data-state", "offline")
    join(page, "fourth")
    context.set_offline(False)
    poll(page, lambda: join_of("fourth"), "the join of fourth after the reconnection")
    write(page, "made it")
    expect(bubbles(page, "made it")).to_have_attribute("data-state", "sent")
