"""The page in a room of 8,000 members: its own message's ticks come from `state`
frames (no `status` frames, and it knows only 100 of the members), and after a
reload from the state its backlog carries."""

from __future__ import annotations

import json

import pytest
from playwright.sync_api import expect

from messaging.models import Message

from ..support.crowds import catch_up, crowd
from .conftest import bubbles, join, poll, sign_in, write

pytestmark = [pytest.mark.e2e]


def test_in_a_room_of_8000_the_ticks_follow_state_frames_and_survive_a_reload(server, new_context):
    # Bob and Ana make it 8,000. The crowd has read as far as the message to
    # come (set in SQL): Bob is its last recipient.
    crowd_ids = crowd("big", 7998)
    catch_up("big", crowd_ids, 1)
    received: list[dict] = []

    def watch(ws):
        ws.on("framereceived", lambda payload: received.append(json.loads(payload)))

    ana_context = new_context()
    ana_context.on("page", lambda page: page.on("websocket", watch))
    ana = sign_in(ana_context, server.url, "ana")
    join(ana, "big")
    bob = sign_in(new_context(), server.url, "bob")
    join(bob, "big")
    join(bob, "elsewhere")  # big is joined but not on Bob's screen

    write(ana, "hello, everyone")
    mine = bubbles(ana, "hello, everyone")
    expect(mine).to_have_attribute("data-state", "delivered")
    assert Message.objects.get(body="hello, everyone").state == "delivered"
    mine.get_by_role("button", name="Delivered. Who has read it?").press("Enter")
    # Ana's page knows 100 of the 8,000: it says only what the state says.
    expect(mine.locator(".readers")).to_have_text("Not read by everyone yet.")

    bob.get_by_role("button", name="# big").click()
    expect(bubbles(bob, "hello, everyone")).to_be_visible()
    expect(mine).to_have_attribute("data-state", "read")
    expect(mine.locator(".readers")).to_have_text("Read by everyone.")
    # Bob's copy: the page does not know who has read another's message here.
    bob_copy = bubbles(bob, "hello, everyone")
    bob_copy.click()
    expect(bob_copy.locator(".readers")).to_have_text("Who has read it is not shown in a room of 8000 members.")

    poll(ana, lambda: sum(f["t"] == "state" for f in received) == 2, "the two state frames")
    [join_ack] = [f for f in received if f["t"] == "ack" and "members_total" in f.get("d", {})]
    assert join_ack["d"]["members_total"] == 7999 and len(join_ack["d"]["members"]) == 100, "Bob joined after her"
    assert [(f["d"]["seq"], f["d"]["state"]) for f in received if f["t"] == "state"] == [(1, "delivered"), (1, "read")]
    assert not any(f["t"] == "status" for f in received)

    received.clear()
    ana.reload()
    mine = bubbles(ana, "hello, everyone")
    expect(mine).to_have_attribute("data-state", "read")
    poll(ana, lambda: any(f["t"] == "msg" for f in received), "the backlog")
    assert not any(f["t"] == "state" for f in received), "the backlog's msg said it"
    mine.click()
    expect(mine.locator(".readers")).to_have_text("Read by everyone.")
