"""What a person sees: message states from the server, who has read what, the page's screenshots."""

from __future__ import annotations

import json
import re

import pytest
from playwright.sync_api import expect

from messaging.models import Membership, Message

from .conftest import bubbles, join, poll, screenshot, sign_in, write

pytestmark = [pytest.mark.e2e]


def state_of(body: str) -> str:
    return Message.objects.get(body=body).state


def test_the_ticks_follow_the_other_user_from_delivered_to_read(server, new_context):
    ana = sign_in(new_context(), server.url, "ana")
    join(ana, "lobby")
    bob = sign_in(new_context(), server.url, "bob")
    # Bob by keyboard alone: the labelled room box, Enter, and he lands in the composer.
    bob.get_by_label("Join a room").fill("lobby")
    bob.keyboard.press("Enter")
    expect(bob.locator("[data-testid=composer]")).to_be_focused()
    join(bob, "elsewhere")  # lobby is joined but not on Bob's screen

    write(ana, "are you there?")
    mine = bubbles(ana, "are you there?")
    # Bob's page rendered it (delivered) but he is looking at another room.
    expect(mine).to_have_attribute("data-state", "delivered")
    assert state_of("are you there?") == "delivered"
    # Who has read it, from the keyboard: the state is a labelled button.
    mine.get_by_role("button", name="Delivered. Who has read it?").press("Enter")
    expect(mine.locator(".readers")).to_have_text("Not read by anyone yet.")

    bob.get_by_role("button", name="# lobby").click()
    expect(bubbles(bob, "are you there?")).to_be_visible()
    expect(mine).to_have_attribute("data-state", "read")
    expect(mine.locator(".readers")).to_have_text("Read by bob")
    assert state_of("are you there?") == "read"
    # Bob's copy carries the same id; its state is the message's, from his side.
    expect(bubbles(bob, "are you there?")).to_have_attribute("data-msg-id", mine.get_attribute("data-msg-id"))

    bob.locator("[data-testid=composer]").fill("yes, here")
    bob.locator("[data-testid=send]").click()
    expect(bubbles(ana, "yes, here")).to_have_attribute("data-state", "read")
    expect(bubbles(bob, "yes, here")).to_have_attribute("data-state", "read")


def test_receipts_are_cumulative_watermarks_not_one_frame_per_message(server, new_context):
    ana = sign_in(new_context(), server.url, "ana")
    join(ana, "lobby")
    bodies = [f"backlog {n}" for n in range(1, 7)]
    for body in bodies:
        write(ana, body)
    expect(bubbles(ana, bodies[-1])).to_have_attribute("data-state", "sent")

    receipts: list[dict] = []

    def watch(ws):
        def sent(payload):
            frame = json.loads(payload)
            if frame["t"] == "receipt":
                receipts.append(frame["d"])

        ws.on("framesent", sent)

    # Every socket of bob's page is watched from the page's creation on.
    bob_context = new_context()
    bob_context.on("page", lambda page: page.on("websocket", watch))
    bob = sign_in(bob_context, server.url, "bob")
    join(bob, "lobby")
    # Bob joined after them, so they stay `sent` for Ana (he is no recipient);
    # his watermarks say what his page reported.
    poll(bob, lambda: Membership.objects.filter(user__first_name="bob", read=len(bodies)).exists(), "receipts from bob")
    # Playwright hands the page's frame events to the test only while the
    # test calls into it: the database can be ahead of `receipts` (the poll
    # above may not have waited at all).
    poll(bob, lambda: any(r.get("read") == len(bodies) for r in receipts), "bob's last receipt frame")
    # Six messages arrived in one backlog: their receipts went out together,
    # each frame a watermark (the highest seq so far), never a list of seqs.
    assert 1 <= len(receipts) < len(bodies)
    assert {r["room"] for r in receipts} == {"lobby"}
    delivered = [r["delivered"] for r in receipts if "delivered" in r]
    assert delivered == sorted(delivered) and delivered[-1] == len(bodies)
    assert max(r.get("read", 0) for r in receipts) == len(bodies)


def test_the_page_in_pictures_wide_and_narrow(server, new_context):
    ana_context = new_context(viewport={"width": 1100, "height": 680})
    ana = sign_in(ana_context, server.url, "Ana")
    join(ana, "design")
    join(ana, "lobby")
    bob = sign_in(new_context(), server.url, "Bob")
    join(bob, "lobby")
    lines = [
        (ana, "Morning! Did the reconnect fix land?"),
        (bob, "It did. Pressing Send once now means one message, whatever the network does."),
        (ana, "Even through a reload?"),
        (bob, "Even then: the outbox lives in IndexedDB and resends with the same id."),
    ]
    for page, body in lines:
        write(page, body)
        expect(bubbles(ana, body)).to_have_attribute("data-state", "read")
    bubbles(ana, lines[2][1]).click()  # a click anywhere on a message shows who has read it
    expect(bubbles(ana, lines[2][1]).locator(".readers")).to_have_text("Read by Bob")
    # A message written on a train: it waits, marked as sending, until the network is back.
    ana_context.set_offline(True)
    write(ana, "Going into a tunnel, this one will wait…")
    expect(bubbles(ana, "Going into a tunnel, this one will wait…")).to_have_attribute("data-state", "sending")
    expect(ana.locator("[data-testid=conn]")).to_have_attribute("data-state", "offline")
    assert screenshot(ana, "chat-wide").stat().st_size > 0

    ana.set_viewport_size({"width": 390, "height": 760})
    expect(ana.locator("[data-testid=composer]")).to_be_in_viewport()
    expect(ana.locator("[data-testid=room-input]")).to_be_in_viewport()
    # Narrow: nothing sticks out sideways.
    assert ana.evaluate("document.documentElement.scrollWidth") <= 390
    assert screenshot(ana, "chat-narrow").stat().st_size > 0

    ana_context.set_offline(False)
    expect(bubbles(ana, "Going into a tunnel, this one will wait…")).to_have_attribute("data-state", "read")


def test_with_debug_off_the_modules_load_from_their_hashed_names(server, new_context):
    context = new_context()
    statics: dict[str, int] = {}
    context.on("response", lambda r: statics.update({r.url: r.status}) if "/static/" in r.url else None)
    page = sign_in(context, server.url, "ana")
    join(page, "lobby")  # the page works: its modules ran
    hashed = re.compile(r"/static/messaging/((model|views|controller)/)?[a-z]+\.[0-9a-f]{12}\.(js|css)$")
    names = {re.sub(r"\.[0-9a-f]{12}\.", ".", url.rsplit("/", 1)[1]) for url in statics}
    assert names >= {
        "chat.js",
        "chat.css",
        "outbox.js",
        "store.js",
        "changes.js",
        "edits.js",
        "history.js",
        "unread.js",
        "people.js",
        "mentions.js",
    }
    assert all(hashed.search(url) and status == 200 for url, status in statics.items()), statics
