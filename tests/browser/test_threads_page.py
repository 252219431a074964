"""Threads and emoji reactions on the page (PROTOCOL.md 1.2, "Page hooks (1.2)"): a reply written in a
root's thread panel goes through the outbox, once, and every member's page counts it; an emoji picked
shows under the message for everyone, with the user's own marked, and a click takes it off again."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from messaging.chat.models import Reaction, ReactionTally
from messaging.models import Message

from .conftest import bubbles, join, poll, sign_in, write

pytestmark = [pytest.mark.e2e]

ROOT = "Who brings the cake on Friday?"


def two_in_lobby(server, new_context):
    ana_context, bob_context = new_context(), new_context()
    ana, bob = sign_in(ana_context, server.url, "Ana"), sign_in(bob_context, server.url, "Bob")
    for page in (bob, ana):
        join(page, "lobby")
    write(bob, ROOT)
    for page in (ana, bob):
        expect(bubbles(page, ROOT)).to_have_attribute("data-seq", "1")
    return ana_context, ana, bob


def root_seq() -> int:
    return Message.objects.get(body=ROOT).seq


def test_a_reply_in_the_thread_panel_is_posted_once_and_counted_on_every_page(server, new_context):
    ana_context, ana, bob = two_in_lobby(server, new_context)
    root = bubbles(ana, ROOT)
    expect(root.locator("[data-testid=reply-count]")).to_be_hidden()
    root.locator("[data-testid=reply]").click()
    panel = ana.locator("[data-testid=thread]")
    expect(panel).to_be_visible()
    expect(panel).to_have_attribute("data-root", "1")
    # Written offline: it waits in the outbox, shown in the panel, and goes once when back.
    ana_context.set_offline(True)
    expect(ana.locator("[data-testid=conn]")).to_have_attribute("data-state", "offline")
    panel.locator("[data-testid=thread-composer]").fill("Me, a lemon one")
    panel.locator("[data-testid=thread-send]").click()
    reply = panel.locator("[data-msg-id]").filter(has_text="Me, a lemon one")
    expect(reply).to_have_attribute("data-state", "sending")
    ana_context.set_offline(False)
    # Read: Bob's page has the room on screen, and its read mark goes past the replies after what it shows.
    expect(reply).to_have_attribute("data-state", "read")
    # Not in the room's list: in its thread, counted on its root on both pages.
    expect(ana.locator("[data-testid=messages] [data-msg-id]")).to_have_count(1)
    for page in (ana, bob):
        expect(bubbles(page, ROOT).locator("[data-testid=reply-count]")).to_have_text("1")
    assert Message.objects.filter(reply_to=1).count() == 1
    # Bob opens the thread: the reply is there, from the server's page of it; his answer reaches Ana's panel.
    bubbles(bob, ROOT).locator("[data-testid=reply-count]").click()
    bob_panel = bob.locator("[data-testid=thread]")
    expect(bob_panel.locator("[data-msg-id]")).to_have_count(1)
    expect(bob_panel.locator("[data-msg-id]")).to_have_attribute("data-state", "read")
    bob_panel.locator("[data-testid=thread-composer]").fill("Then I bring candles")
    bob_panel.locator("[data-testid=thread-send]").click()
    expect(panel.locator("[data-msg-id]")).to_have_count(2)
    expect(panel.locator("[data-msg-id] .body")).to_have_text(["Me, a lemon one", "Then I bring candles"])
    for page in (ana, bob):
        expect(bubbles(page, ROOT).locator("[data-testid=reply-count]")).to_have_text("2")
    poll(ana, lambda: Message.objects.filter(reply_to=1).count() == 2, "second reply")


def test_an_emoji_picked_shows_for_everyone_and_a_click_toggles_ones_own(server, new_context):
    _, ana, bob = two_in_lobby(server, new_context)
    root = bubbles(ana, ROOT)
    expect(root.locator("[data-testid=reaction]")).to_have_count(0)
    root.locator("[data-testid=react-picker]").click()
    root.locator('[data-testid=emoji][data-emoji="🎉"]').click()
    mine = root.locator('[data-testid=reaction][data-emoji="🎉"]')
    expect(mine).to_have_text("1")
    expect(mine).to_have_attribute("data-mine", "true")
    bobs = bubbles(bob, ROOT).locator('[data-testid=reaction][data-emoji="🎉"]')
    expect(bobs).to_have_text("1")
    expect(bobs).to_have_attribute("data-mine", "false")
    # Bob joins in by clicking it; both pages count 2.
    bobs.click()
    expect(bobs).to_have_attribute("data-mine", "true")
    for locator in (mine, bobs):
        expect(locator).to_have_text("2")
    # Ana takes hers off: 1, and not hers.
    mine.click()
    expect(mine).to_have_attribute("data-mine", "false")
    expect(mine).to_have_text("1")
    expect(bobs).to_have_text("1")
    poll(ana, lambda: list(ReactionTally.objects.values_list("emoji", "count")) == [("🎉", 1)], "the count")
    assert list(Reaction.objects.values_list("user__first_name", flat=True)) == ["Bob"]
    # A reload shows the counts and Ana's own (none) from the join's backlog.
    ana.reload()
    reloaded = bubbles(ana, ROOT).locator('[data-testid=reaction][data-emoji="🎉"]')
    expect(reloaded).to_have_text("1")
    expect(reloaded).to_have_attribute("data-mine", "false")
