"""Invitations on the page (PROTOCOL.md 1.2, "Page hooks (1.2)"): an invited user
sees the invitation in the sidebar and nothing of the room; Accept joins and
opens it; Decline sends `room.leave` and the entry goes, for good."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from messaging.models import Invitation, Membership

from .conftest import bubbles, join, poll, sign_in, write

pytestmark = [pytest.mark.e2e]

# The inviter's display name is user text: it must show as text, never as markup.
INVITER = "ana <b>owner</b>"


def user_id(page) -> int:
    return page.evaluate("JSON.parse(document.getElementById('messaging-me').textContent)")


def invite(page, user: int) -> None:
    page.locator("[data-testid=invite-user]").fill(str(user))
    page.locator("[data-testid=invite]").click()
    expect(page.locator("[data-testid=invite-note]")).to_have_text("Invited.")


def test_an_invitation_is_accepted_into_the_room_and_another_is_declined_away(server, new_context):
    ana = sign_in(new_context(), server.url, INVITER)
    bob = sign_in(new_context(), server.url, "bob")
    cat = sign_in(new_context(), server.url, "cat")
    ana.locator("[data-testid=room-private]").check()
    join(ana, "hideout")
    write(ana, "the plan")
    expect(bubbles(ana, "the plan")).to_have_attribute("data-state", "sent")
    for page in (bob, cat):
        invite(ana, user_id(page))

    # bob sees who asks him where, and nothing of the room: no room in his list, no message, no membership.
    entry = bob.locator("[data-testid=invitation][data-room=hideout]")
    expect(entry).to_contain_text(f"# hideout, from {INVITER}")
    assert entry.locator("b").count() == 0
    expect(bob.locator("[data-testid=room-item][data-room=hideout]")).to_have_count(0)
    expect(bubbles(bob, "the plan")).to_have_count(0)
    assert not Membership.objects.filter(room__slug="hideout", user_id=user_id(bob)).exists()
    entry.locator("[data-testid=accept]").click()
    expect(bob.locator("#room-title")).to_have_text("# hideout")
    expect(bubbles(bob, "the plan")).to_have_count(1)
    expect(entry).to_have_count(0)
    expect(bob.locator("[data-testid=invitations]")).to_be_hidden()
    expect(bob.locator("[data-testid=members] [data-testid=member]")).to_have_count(2)

    # cat declines: the entry goes, the server has her no, and a reload does not bring it back.
    declined = cat.locator("[data-testid=invitation][data-room=hideout]")
    declined.locator("[data-testid=decline]").click()
    expect(declined).to_have_count(0)
    expect(cat.locator("[data-testid=invitations]")).to_be_hidden()
    cat_id = user_id(cat)
    poll(
        cat,
        lambda: Invitation.objects.filter(room__slug="hideout", user_id=cat_id, declined_at__isnull=False).exists(),
        "decline",
    )
    cat.reload()
    expect(cat.locator("[data-testid=conn]")).to_have_attribute("data-state", "open")
    cat.wait_for_timeout(1000)
    expect(cat.locator("[data-testid=invitation]")).to_have_count(0)
    expect(cat.locator("[data-testid=room-item][data-room=hideout]")).to_have_count(0)
    assert not Membership.objects.filter(room__slug="hideout", user_id=cat_id).exists()
    # Asked again at once, the owner is told no.
    ana.locator("[data-testid=invite-user]").fill(str(cat_id))
    ana.locator("[data-testid=invite]").click()
    expect(ana.locator("[data-testid=invite-note]")).to_contain_text("Not invited")
