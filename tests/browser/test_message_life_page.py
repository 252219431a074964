"""A message's whole life on the page: edit and delete through the outbox,
scroll-back, unread badges and the divider, in Chromium against live daphne."""

from __future__ import annotations

import time

import pytest
from playwright.sync_api import expect

from messaging.models import CommandRecord, Membership, Message, MessageVersion

from ..support.archives import write_history
from .conftest import Relay, bubbles, join, poll, sign_in, write

pytestmark = [pytest.mark.e2e]


def accept_dialogs(page) -> None:
    page.on("dialog", lambda dialog: dialog.accept())


def edit(page, body: str, new_body: str) -> None:
    bubble = bubbles(page, body)
    bubble.locator("[data-testid=edit]").click()
    field = bubble.locator("[data-testid=edit-input]")
    expect(field).to_have_value(body)
    field.fill(new_body)
    bubble.locator("[data-testid=edit-save]").click()


def body_of(seq: int, room: str = "lobby") -> dict:
    return Message.objects.filter(room__slug=room, seq=seq).values("body", "version", "deleted_at").get()


def read_mark(name: str, room: str) -> int:
    return Membership.objects.filter(room__slug=room, user__first_name=name).values_list("read", flat=True).get()


def test_an_edit_and_a_delete_made_offline_apply_once_for_both_tabs_and_the_other_user(server, new_context):
    ana_context, bob_context = new_context(), new_context()
    ana = sign_in(ana_context, server.url, "Ana")
    ana_tab = ana_context.new_page()
    bob = sign_in(bob_context, server.url, "Bob")
    for page in (bob, ana):
        join(page, "lobby")
    ana_tab.goto(server.url + "/")
    expect(ana_tab.locator("#room-title")).to_have_text("# lobby")
    write(ana, "Meet at 5")
    write(ana, "Bring snacks")
    for page in (ana, ana_tab, bob):
        expect(bubbles(page, "Bring snacks")).to_have_count(1)
    # Only one's own messages have the controls.
    expect(bubbles(bob, "Meet at 5").locator("[data-testid=edit]")).to_have_count(0)

    ana_context.set_offline(True)
    expect(ana.locator("[data-testid=conn]")).to_have_attribute("data-state", "offline")
    edit(ana, "Meet at 5", "Meet at 6")
    accept_dialogs(ana)
    bubbles(ana, "Bring snacks").locator("[data-testid=delete]").click()
    expect(ana.locator("[data-testid=pending]")).to_have_text("2 changes waiting to be sent")
    assert body_of(1)["version"] == 1 and body_of(2)["deleted_at"] is None

    ana_context.set_offline(False)
    for page in (ana, ana_tab, bob):
        edited = bubbles(page, "Meet at 6")
        expect(edited).to_have_count(1)
        expect(edited.locator("[data-testid=edited]")).to_be_visible()
        tomb = page.locator("[data-msg-id][data-seq='2']")
        expect(tomb).to_have_attribute("data-deleted", "true")
        expect(tomb.locator(".body")).to_have_text("message deleted")
        expect(bubbles(page, "Bring snacks")).to_have_count(0)
        expect(page.locator("[data-msg-id]")).to_have_count(2)
    expect(ana.locator("[data-testid=pending]")).to_be_hidden()
    assert body_of(1) == {"body": "Meet at 6", "version": 2, "deleted_at": None}
    assert body_of(2)["body"] == "" and body_of(2)["version"] == 2
    assert CommandRecord.objects.filter(type="message.edit").count() == 1
    assert CommandRecord.objects.filter(type="message.delete").count() == 1
    assert MessageVersion.objects.count() == 2
    # A reload shows the same, from the server alone.
    bob.reload()
    expect(bubbles(bob, "Meet at 6").locator("[data-testid=edited]")).to_be_visible()
    expect(bob.locator("[data-msg-id][data-seq='2']")).to_have_attribute("data-deleted", "true")


def test_escape_cancels_an_edit_and_declining_keeps_the_message(server, new_context):
    ana = sign_in(new_context(), server.url, "Ana")
    join(ana, "lobby")
    write(ana, "Keep me")
    bubble = bubbles(ana, "Keep me")
    bubble.locator("[data-testid=edit]").click()
    bubble.locator("[data-testid=edit-input]").fill("changed my mind")
    bubble.locator("[data-testid=edit-input]").press("Escape")
    expect(bubble.locator("[data-testid=edit-input]")).to_have_count(0)
    expect(bubbles(ana, "Keep me")).to_have_count(1)
    ana.on("dialog", lambda dialog: dialog.dismiss())
    bubbles(ana, "Keep me").locator("[data-testid=delete]").click()
    ana.wait_for_timeout(500)
    expect(bubbles(ana, "Keep me")).not_to_have_attribute("data-deleted", "true")
    assert body_of(1) == {"body": "Keep me", "version": 1, "deleted_at": None}


def test_an_edit_made_while_away_reaches_the_page_when_it_reconnects(server, new_context):
    ana_context, bob_context = new_context(), new_context()
    ana, bob = sign_in(ana_context, server.url, "Ana"), sign_in(bob_context, server.url, "Bob")
    for page in (bob, ana):
        join(page, "lobby")
    write(ana, "typo hree")
    expect(bubbles(bob, "typo hree")).to_have_count(1)
    bob_context.set_offline(True)
    expect(bob.locator("[data-testid=conn]")).to_have_attribute("data-state", "offline")
    edit(ana, "typo hree", "typo here")
    expect(bubbles(ana, "typo here")).to_have_count(1)
    poll(ana, lambda: body_of(1)["version"] == 2, "stored edit")
    bob_context.set_offline(False)
    # The rejoin's since_rev brings the edit.
    expect(bubbles(bob, "typo here").locator("[data-testid=edited]")).to_be_visible()


def lobby_of_130(page) -> None:
    """The page's user joins the lobby, which then holds 130 messages of theirs, written in bulk."""
    from django.contrib.auth import get_user_model

    from messaging.models import Room

    join(page, "lobby")
    poll(page, lambda: Membership.objects.filter(room__slug="lobby").exists(), "the page's membership")
    room = Room.objects.get(slug="lobby")
    user = get_user_model().objects.get(memberships__room=room)
    write_history(room, user, [f"old {n}" for n in range(1, 131)], key="old")
    assert Membership.objects.filter(room=room).count() == 1


def test_scrolling_back_loads_older_pages_without_duplicates_or_jumps(server, new_context):
    ana = sign_in(new_context(), server.url, "Ana")
    lobby_of_130(ana)
    ana.reload()
    expect(ana.locator("[data-msg-id]")).to_have_count(50)
    older = ana.locator("[data-testid=load-older]")
    expect(older).to_be_visible()
    older.click()
    expect(ana.locator("[data-msg-id]")).to_have_count(100)
    # Scrolling to the top asks for the rest, and what is on screen stays
    # where it is while the page goes in above it.
    anchor = bubbles(ana, "old 31")
    top_before = ana.locator("[data-testid=messages]").evaluate(
        "box => { box.scrollTop = 0; return document.querySelector('[data-msg-id=old-31]').getBoundingClientRect().top; }"
    )
    expect(ana.locator("[data-msg-id]")).to_have_count(130)
    top_after = anchor.evaluate("n => n.getBoundingClientRect().top")
    assert abs(top_after - top_before) < 2, (top_before, top_after)
    seqs = [int(s) for s in ana.locator("[data-msg-id]").evaluate_all("ns => ns.map(n => n.dataset.seq)")]
    assert seqs == list(range(1, 131))
    expect(older).to_be_hidden()


def test_a_backlog_that_comes_in_slowly_asks_for_no_older_page(server, new_context):
    """The page scrolls itself to the newest message as each of the backlog's
    frames goes in. With a frame at a time and the browser's scroll events in
    between, the list rests a few pixels from its top now and then: that is not
    the user scrolling up, and brings no older page."""
    ana = sign_in(new_context(), server.url, "Ana")
    lobby_of_130(ana)
    held: list[dict] = []
    relay = Relay(ana, withhold=lambda frame: held.append(frame) is None)
    ana.reload()
    shown = ana.locator("[data-msg-id]")
    deadline = time.monotonic() + 30
    while (held or shown.count() < 50) and time.monotonic() < deadline:
        if held:
            relay.deliver(held.pop(0))
        ana.wait_for_timeout(40)
    # A little longer, for a page the scroll might have asked for.
    for _ in range(25):
        if held:
            relay.deliver(held.pop(0))
        ana.wait_for_timeout(40)
    assert shown.count() == 50
    assert [frame for frame in relay.sent if frame["t"] == "room.history"] == []
    # Scrolling up is still the user asking.
    ana.locator("[data-testid=messages]").evaluate("box => { box.scrollTop = 0; }")
    poll(ana, lambda: any(frame["t"] == "room.history" for frame in relay.sent), "the page's room.history")


def test_unread_badges_rise_in_other_rooms_fall_as_read_and_the_divider_marks_the_first(server, new_context):
    ana_context, bob_context = new_context(), new_context()
    ana, bob = sign_in(ana_context, server.url, "Ana"), sign_in(bob_context, server.url, "Bob")
    for room in ("side", "lobby"):
        join(ana, room)
        join(bob, room)
    # Ana looks at the lobby; Bob writes in the side room.
    join(ana, "lobby")
    join(bob, "side")
    write(bob, "first in side")
    write(bob, "second in side")
    side_badge = ana.locator("[data-testid=room-item][data-room=side] [data-testid=unread]")
    lobby_badge = ana.locator("[data-testid=room-item][data-room=lobby] [data-testid=unread]")
    expect(side_badge).to_have_text("2")
    expect(lobby_badge).to_be_hidden()
    write(ana, "mine in side?")  # Ana's own message in the lobby is not unread to her
    expect(lobby_badge).to_be_hidden()
    # Opening the room shows the divider above the first unread, and reading it clears the badge.
    ana.locator("[data-testid=room-item][data-room=side] button").click()
    divider = ana.locator("[data-testid=first-unread]")
    expect(divider).to_have_count(1)
    following = divider.evaluate("d => d.nextElementSibling.querySelector('.body').textContent")
    assert following == "first in side"
    expect(side_badge).to_be_hidden()
    # A reload counts from the server: nothing unread any more.
    poll(
        ana,
        lambda: (
            __import__("messaging.models", fromlist=["Membership"])
            .Membership.objects.filter(room__slug="side", user__first_name="Ana")
            .values_list("read", flat=True)
            .first()
            == 2
        ),
        "read receipt",
    )
    ana.reload()
    expect(ana.locator("[data-testid=room-item][data-room=side]")).to_be_visible()
    expect(side_badge).to_be_hidden()
    write(bob, "third in side")
    expect(bubbles(ana, "third in side")).to_have_count(1)
    expect(side_badge).to_be_hidden()
    ana.locator("[data-testid=room-item][data-room=lobby] button").click()
    write(bob, "fourth in side")
    write(bob, "fifth in side")
    expect(side_badge).to_have_text("2")
    # Bob deletes one of them: it is no longer unread.
    bob.on("dialog", lambda dialog: dialog.accept())
    bubbles(bob, "fifth in side").locator("[data-testid=delete]").click()
    expect(side_badge).to_have_text("1")


# An observer that reports nothing: as when its callback, due a frame after
# layout, has not come yet at the moment the user switches rooms.
SILENT_OBSERVER = """
window.IntersectionObserver = class { observe() {} unobserve() {} disconnect() {} takeRecords() { return []; } };
"""


def test_a_message_on_screen_as_the_user_switches_rooms_counts_as_read(server, new_context):
    ana_context, bob_context = new_context(), new_context()
    ana_context.add_init_script(SILENT_OBSERVER)
    ana, bob = sign_in(ana_context, server.url, "Ana"), sign_in(bob_context, server.url, "Bob")
    for room in ("lobby", "side"):
        join(bob, room)
        join(ana, room)
    join(bob, "side")
    write(bob, "seen in passing")
    expect(bubbles(ana, "seen in passing")).to_have_count(1)
    # Nothing has reported it on screen, so it is not read yet.
    ana.wait_for_timeout(300)
    assert read_mark("Ana", "side") == 0
    ana.locator("[data-testid=room-item][data-room=lobby] button").click()
    poll(ana, lambda: read_mark("Ana", "side") == 1, "read receipt on leaving the room")
    expect(ana.locator("[data-testid=room-item][data-room=side] [data-testid=unread]")).to_be_hidden()
