"""The "+1" counter on the page: one click counts once, for everyone, whatever the network does.

Each click is a `reaction.add` command through the outbox, like a post: its
id is minted once, it waits in IndexedDB while offline, and it is resent
with the same id. What the page shows is the server's count (acks and
`reaction` frames), checked against the `ReactionCount` rows.
"""

from __future__ import annotations

import asyncio
import re
from concurrent.futures import ThreadPoolExecutor

import pytest
from playwright.sync_api import expect

from messaging.contrib.reactions.models import ReactionCount
from messaging.testing import SocketClient
from messaging_client import sign_in as ws_sign_in

from .conftest import Relay, bubbles, join, leave_behind_the_pages_back, poll, screenshot, sign_in, write

pytestmark = [pytest.mark.e2e]

BODY = "Lunch at the new place on Friday?"


def stored_count(body: str) -> int:
    row = ReactionCount.objects.filter(message__body=body).first()
    return row.count if row else 0


def plus_one(page, body: str = BODY):
    return bubbles(page, body).locator("[data-testid=react]")


def shown_count(page, body: str = BODY):
    return bubbles(page, body).locator("[data-testid=reaction-count]")


def expect_count(pages, count: int, body: str = BODY) -> None:
    for page in pages:
        expect(shown_count(page, body)).to_have_text(str(count))
        expect(plus_one(page, body)).to_have_accessible_name(re.compile(rf"^\+1 reaction, {count} so far\b"))


def ana_and_bob_with_a_message(server, new_context, page_options=None):
    """Ana and Bob in `lobby`, where Bob wrote BODY: (ana_context, ana, bob_context, bob)."""
    ana_context, bob_context = new_context(**(page_options or {})), new_context()
    ana, bob = sign_in(ana_context, server.url, "Ana"), sign_in(bob_context, server.url, "Bob")
    # Bob first, so Ana's join ack lists him. A page that hears a `status` of
    # a member it does not know rejoins to learn when they joined; Ana's page
    # doing so after a test deleted her membership would create it again.
    for page in (bob, ana):
        join(page, "lobby")
    write(bob, BODY)
    for page in (ana, bob):
        expect(plus_one(page)).to_have_accessible_name("+1 reaction, none so far")
        expect(shown_count(page)).to_be_hidden()
    return ana_context, ana, bob_context, bob


def test_a_plus_one_clicked_offline_counts_once_for_both_when_back(server, new_context):
    ana_context, ana, _, bob = ana_and_bob_with_a_message(server, new_context)
    ana_context.set_offline(True)
    expect(ana.locator("[data-testid=conn]")).to_have_attribute("data-state", "offline")
    plus_one(ana).click()
    # Waiting, and shown as such, but not counted ahead of the server.
    expect(plus_one(ana)).to_have_attribute("data-pending", "")
    expect(plus_one(ana)).to_have_accessible_name("+1 reaction, none so far, 1 of yours on the way")
    expect(shown_count(ana)).to_be_hidden()
    expect(ana.locator("[data-testid=pending]")).to_have_text("1 reaction waiting to be sent")
    assert stored_count(BODY) == 0

    ana_context.set_offline(False)
    expect_count([ana, bob], 1)
    expect(plus_one(ana)).not_to_have_attribute("data-pending", "")
    expect(ana.locator("[data-testid=pending]")).to_be_hidden()
    assert stored_count(BODY) == 1
    # A fresh page learns the count from the join's backlog, and nothing is resent.
    ana.reload()
    expect_count([ana], 1)
    assert stored_count(BODY) == 1


def test_a_click_whose_ack_is_lost_is_resent_with_its_id_and_counts_once(server, new_context):
    _, ana, _, bob = ana_and_bob_with_a_message(server, new_context)
    acks: list[dict] = []
    held: list[dict] = []  # the duplicates' acks, until `released`
    released: list = []

    def withhold(frame):
        if frame["t"] != "ack" or "count" not in frame.get("d", {}):
            return False
        acks.append(frame)
        if len(acks) == 1:
            return True  # the first reaction's ack never arrives
        if not released:
            held.append(frame)
        return not released

    relay = Relay(ana, withhold)
    ana.reload()
    plus_one(ana).click()
    # The broadcast shows the count; the ack timeout resends the same id, answered as a duplicate.
    expect_count([ana, bob], 1)
    poll(ana, lambda: held, "the resent click's ack")
    clicks = [f["id"] for f in relay.sent if f["t"] == "reaction.add"]
    assert len(clicks) >= 2 and set(clicks) == {clicks[0]}
    assert [a["dup"] for a in acks] == [False] + [True] * (len(acks) - 1)
    assert all(a["d"] == acks[0]["d"] for a in acks)
    # Bob reacts before those acks arrive: they carry the count of the first
    # delivery (1), older than what the page has seen since.
    plus_one(bob).click()
    expect_count([ana, bob], 2)
    released.append(True)
    for frame in held:
        relay.deliver(frame)
    expect(ana.locator("[data-testid=pending]")).to_be_hidden()
    expect_count([ana, bob], 2)
    assert stored_count(BODY) == 2


def test_each_click_counts_by_mouse_or_keyboard(server, new_context):
    _, ana, _, bob = ana_and_bob_with_a_message(server, new_context)
    for _ in range(3):
        plus_one(ana).click()
    expect_count([ana, bob], 3)
    # Bob on his own message, from the keyboard: a real button.
    plus_one(bob).press("Enter")
    expect_count([ana, bob], 4)
    expect(ana.locator("[data-testid=pending]")).to_be_hidden()
    poll(ana, lambda: stored_count(BODY) == 4, "four reactions stored")
    # Clicking +1 is not clicking the message: who has read it stays closed.
    expect(bubbles(ana, BODY).locator(".readers")).to_be_hidden()


def test_a_refused_click_says_why_and_is_not_kept(server, new_context):
    _, ana, _, _ = ana_and_bob_with_a_message(server, new_context)
    # Ana leaves the room behind her page's back: her +1 is refused, retry
    # false. Her page's receipt for Bob's message may be landing right now.
    leave_behind_the_pages_back(room__slug="lobby", user__first_name="Ana")
    plus_one(ana).click()
    expect(plus_one(ana)).to_have_attribute("data-failed", "")
    expect(plus_one(ana)).to_have_accessible_name(
        "+1 reaction, none so far; your last one was not counted: join the room first"
    )
    expect(ana.locator("[data-testid=pending]")).to_be_hidden()
    # Not kept as a failed message, and the reload's rejoin lets the next click count.
    ana.reload()
    # Failed messages are shown before the backlog arrives: once it has, none is there.
    expect(plus_one(ana)).to_have_accessible_name("+1 reaction, none so far")
    expect(ana.locator("[data-msg-id]")).to_have_count(1)
    plus_one(ana).click()
    expect_count([ana], 1)
    expect(plus_one(ana)).not_to_have_attribute("data-failed", "")
    assert stored_count(BODY) == 1


def test_a_page_that_was_offline_catches_up_on_counts_when_back(server, new_context):
    _, ana, bob_context, bob = ana_and_bob_with_a_message(server, new_context)
    bob_context.set_offline(True)
    expect(bob.locator("[data-testid=conn]")).to_have_attribute("data-state", "offline")
    plus_one(ana).click()
    plus_one(ana).click()
    expect_count([ana], 2)
    # Bob's page had the message before: its rejoin fetches it again for the count.
    bob_context.set_offline(False)
    expect_count([bob], 2)
    expect(bubbles(bob, BODY)).to_have_count(1)
    assert stored_count(BODY) == 2


def post_from_another_client(base_url: str, room: str, count: int) -> None:
    """`count` posts to `room` by a protocol client of a guest of its own (on a thread: the page's loop is Playwright's)."""

    async def post() -> None:
        client = await SocketClient(base_url, ws_sign_in(base_url, "Cid")).connect()
        try:
            assert (await client.call("room.join", {"room": room}))["ok"]
            for n in range(count):
                assert (await client.call("room.post", {"room": room, "body": f"filler {n}"}))["ok"]
        finally:
            await client.close()

    with ThreadPoolExecutor(1) as thread:
        thread.submit(asyncio.run, post()).result(timeout=60)


def test_a_page_back_online_catches_up_on_counts_of_every_message_it_shows(server, new_context):
    _, ana, bob_context, bob = ana_and_bob_with_a_message(server, new_context)
    # BODY is then one of 61 messages on Bob's page, far from the newest.
    post_from_another_client(server.url, "lobby", 60)
    expect(bubbles(bob, "filler 59")).to_have_count(1)
    bob_context.set_offline(True)
    expect(bob.locator("[data-testid=conn]")).to_have_attribute("data-state", "offline")
    plus_one(ana).click()
    expect_count([ana], 1)
    bob_context.set_offline(False)
    expect(bob.locator("[data-testid=conn]")).to_have_attribute("data-state", "open")
    expect_count([bob], 1)
    expect(bubbles(bob, BODY)).to_have_count(1)


def test_the_page_in_pictures_with_reactions(server, new_context):
    ana_context, ana, _, bob = ana_and_bob_with_a_message(
        server, new_context, {"viewport": {"width": 1100, "height": 680}}
    )
    lines = [
        (ana, "Yes! The one with the courtyard?"),
        (bob, "That one. Twelve thirty, I'll book a table for four."),
        (ana, "Perfect, I'll tell the others."),
    ]
    for page, body in lines:
        write(page, body)
        expect(bubbles(ana, body)).to_have_attribute("data-state", "read")
    plus_one(ana).click()
    plus_one(bob, lines[1][1]).click()
    plus_one(ana, lines[1][1]).click()
    expect_count([ana, bob], 1)
    expect_count([ana, bob], 2, lines[1][1])
    # A click on a train: it waits, dashed, until the network is back.
    ana_context.set_offline(True)
    plus_one(ana, lines[2][1]).click()
    expect(plus_one(ana, lines[2][1])).to_have_attribute("data-pending", "")
    expect(ana.locator("[data-testid=pending]")).to_have_text("1 reaction waiting to be sent")
    assert screenshot(ana, "chat-reactions-wide").stat().st_size > 0
    ana_context.set_offline(False)
    expect_count([ana, bob], 1, lines[2][1])
