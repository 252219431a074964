"""The page's people (issue 25): the members panel with presence dots, a direct
conversation opened from it that a third user cannot see, typing shown and
cleared, private rooms from the room form, and their invite control."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from .conftest import bubbles, join, sign_in, write

pytestmark = [pytest.mark.e2e]


def member(page, name: str):
    return page.locator("[data-testid=member]").filter(has_text=name)


def test_two_users_open_a_dm_from_the_members_panel_and_a_third_cannot_see_it(server, new_context):
    ana = sign_in(new_context(), server.url, "ana")
    bob = sign_in(new_context(), server.url, "bob")
    eve = sign_in(new_context(), server.url, "eve")
    for page in (ana, bob, eve):
        join(page, "lobby")
    expect(member(ana, "bob")).to_have_attribute("data-online", "true")
    member(ana, "bob").locator("[data-testid=dm]").click()
    # Listed apart, under the other person's name, on both sides.
    expect(ana.locator("[data-testid=dm-list]").get_by_role("button", name="bob")).to_be_visible()
    expect(ana.locator("#room-title")).to_have_text("bob")
    write(ana, "just between us")
    expect(bubbles(ana, "just between us")).to_have_attribute("data-state", "sent")
    # bob is asked first (PROTOCOL.md 1.2): an invitation in his sidebar, which he accepts.
    invitation = bob.locator("[data-testid=invitation]")
    expect(invitation).to_contain_text("ana wants to message you")
    invitation.locator("[data-testid=accept]").click()
    expect(bob.locator("[data-testid=dm-list]").get_by_role("button", name="ana")).to_be_visible()
    expect(bob.locator("#room-title")).to_have_text("ana")
    expect(bubbles(bob, "just between us")).to_have_count(1)
    expect(bob.locator("[data-testid=members] [data-testid=member]")).to_have_count(2)
    # From bob's side the same conversation, not a new one.
    bob.get_by_role("button", name="# lobby").click()
    member(bob, "ana").locator("[data-testid=dm]").click()
    expect(bob.locator("[data-testid=dm-list] li")).to_have_count(1)
    expect(bubbles(bob, "just between us")).to_have_count(1)
    # eve has no such room, and its slug gets her nowhere.
    expect(eve.locator("[data-testid=dm-list] li")).to_have_count(0)
    expect(bubbles(eve, "just between us")).to_have_count(0)


def test_typing_is_shown_and_cleared(server, new_context):
    ana = sign_in(new_context(), server.url, "ana")
    bob = sign_in(new_context(), server.url, "bob")
    for page in (ana, bob):
        join(page, "lobby")
    ana.locator("[data-testid=composer]").press_sequentially("hel")
    expect(bob.locator("[data-testid=typing]")).to_have_text("ana is typing...")
    expect(ana.locator("[data-testid=typing]")).to_be_hidden()
    ana.locator("[data-testid=composer]").press("Enter")
    expect(bubbles(bob, "hel")).to_have_count(1)
    expect(bob.locator("[data-testid=typing]")).to_be_hidden()
    # Typing, then emptying the composer, clears it too.
    ana.locator("[data-testid=composer]").press_sequentially("again")
    expect(bob.locator("[data-testid=typing]")).to_have_text("ana is typing...")
    ana.locator("[data-testid=composer]").fill("")
    ana.locator("[data-testid=composer]").dispatch_event("input")
    expect(bob.locator("[data-testid=typing]")).to_be_hidden()


def test_presence_dots_change_when_a_tab_closes(server, new_context):
    ana = sign_in(new_context(), server.url, "ana")
    bob_context = new_context()
    bob = sign_in(bob_context, server.url, "bob")
    for page in (ana, bob):
        join(page, "lobby")
    expect(member(ana, "bob")).to_have_attribute("data-online", "true")
    second = bob_context.new_page()
    second.goto(server.url + "/")
    expect(second.locator("[data-testid=conn]")).to_have_attribute("data-state", "open")
    second.close()
    # A second tab closing leaves bob online; the last one takes him offline.
    ana.wait_for_timeout(500)
    expect(member(ana, "bob")).to_have_attribute("data-online", "true")
    bob.close()
    expect(member(ana, "bob")).to_have_attribute("data-online", "false")


def test_a_private_room_from_the_form_with_its_invite_control(server, new_context):
    ana = sign_in(new_context(), server.url, "ana")
    bob = sign_in(new_context(), server.url, "bob")
    join(bob, "lobby")
    ana.locator("[data-testid=room-private]").check()
    join(ana, "hideout")
    invite = ana.locator("[data-testid=invite-form]")
    expect(invite).to_be_visible()
    bob_id = member(bob, "bob").get_attribute("data-user-id")
    ana.locator("[data-testid=invite-user]").fill(bob_id)
    ana.locator("[data-testid=invite]").click()
    expect(ana.locator("[data-testid=invite-note]")).to_have_text("Invited.")
    # The invitation is in bob's sidebar; accepted, the room is his, as a member, not its owner.
    bob.locator("[data-testid=invitation][data-room=hideout] [data-testid=accept]").click()
    expect(bob.locator("#room-title")).to_have_text("# hideout")
    expect(bob.locator("[data-testid=members] [data-testid=member]")).to_have_count(2)
    expect(bob.locator("[data-testid=invite-form]")).to_be_hidden()
    # The lobby is public: no invite control there.
    ana.get_by_role("button", name="# hideout").click()
    join(ana, "lobby")
    expect(ana.locator("[data-testid=invite-form]")).to_be_hidden()
