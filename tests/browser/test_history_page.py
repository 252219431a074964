"""Scroll-back through pages cut short to fit in a frame (PROTOCOL 1.2), in Chromium against live daphne.

A room of messages of 4,000 control characters (24 KB each in JSON): a page
of 50 does not fit in one frame, so the server answers with fewer and
`more: true`, and the page asks again until the first message is in.
"""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from messaging.models import Message

from ..support.archives import archive
from ..support.noisy import noisy_room
from .conftest import Relay, bubbles, join, poll, sign_in

pytestmark = [pytest.mark.e2e]

FIRST = "the very first"


def test_scroll_back_goes_through_short_pages_to_the_rooms_first_message(server, new_context):
    noisy_room("noisy", 100)
    Message.objects.filter(room__slug="noisy", seq=1).update(body=FIRST)
    ana = sign_in(new_context(), server.url, "Ana")
    join(ana, "noisy")
    shown = ana.locator("[data-msg-id]")
    expect(shown).to_have_count(50)
    box = ana.locator("[data-testid=messages]")
    for _ in range(10):
        if shown.count() == 100:
            break
        before = shown.count()
        # The user scrolls to the top of what is shown: the next page goes in above.
        box.evaluate("box => { box.scrollTop = 0; box.dispatchEvent(new Event('scroll')); }")
        poll(ana, lambda before=before: shown.count() > before, f"older page above the {before} messages shown")
    expect(bubbles(ana, FIRST)).to_have_count(1)
    assert seqs_shown(shown) == list(range(1, 101)), "every message once, in order"
    expect(ana.locator("[data-testid=load-older]")).to_be_hidden()


def plain_room(slug: str, count: int) -> None:
    archive(slug, None, [f"old {n}" for n in range(1, count + 1)])


def history_requests(relay: Relay) -> list[dict]:
    return [frame for frame in relay.sent if frame["t"] == "room.history"]


def lobby_through(page, withhold) -> tuple[Relay, object]:
    """The page's socket through a `Relay` that withholds what `withhold(relay, frame)` says, joined to
    the lobby, its newest 50 messages shown; the relay and the messages' locator."""
    relay = Relay(page, lambda frame: withhold(relay, frame))
    page.reload()
    join(page, "lobby")
    shown = page.locator("[data-msg-id]")
    expect(shown).to_have_count(50)
    return relay, shown


def seqs_shown(shown) -> list[int]:
    return [int(s) for s in shown.evaluate_all("ns => ns.map(n => n.dataset.seq)")]


def test_short_pages_that_leave_the_list_short_of_its_box_are_followed_to_the_first(server, new_context):
    # A page may hold fewer messages than asked for and still say `more`;
    # here every page the server sends is cut to its newest message on its
    # way, and the room's 50 shown messages do not fill the tall window: no
    # scroll can ask again, so the page goes on by itself after one click.
    plain_room("lobby", 60)
    ana = sign_in(new_context(viewport={"width": 1000, "height": 6400}), server.url, "Ana")
    asked: set[str] = set()

    def cut_short(relay: Relay, frame: dict) -> bool:
        asked.update(f["id"] for f in history_requests(relay))
        if frame["t"] != "ack" or frame.get("id") not in asked or not frame["ok"]:
            return False
        messages = frame["d"]["messages"]
        relay.deliver(
            {**frame, "d": {**frame["d"], "messages": messages[-1:], "more": frame["d"]["more"] or len(messages) > 1}}
        )
        return True

    relay, shown = lobby_through(ana, cut_short)
    box = ana.locator("[data-testid=messages]")
    assert box.evaluate("box => box.scrollHeight <= box.clientHeight"), "the list does not fill its box"
    ana.locator("[data-testid=load-older]").click()
    expect(shown).to_have_count(60)
    assert seqs_shown(shown) == list(range(1, 61))
    assert len(history_requests(relay)) == 10, "one request a page, each for the page before it"
    expect(ana.locator("[data-testid=load-older]")).to_be_hidden()


def test_an_error_frame_in_place_of_a_pages_answer_lets_the_page_ask_again(server, new_context):
    plain_room("lobby", 60)
    ana = sign_in(new_context(), server.url, "Ana")
    refused: list[str] = []

    def refuse_first(relay: Relay, frame: dict) -> bool:
        requests = history_requests(relay)
        if refused or frame["t"] != "ack" or not requests or frame.get("id") != requests[0]["id"]:
            return False
        refused.append(frame["id"])
        relay.deliver(
            {
                "t": "error",
                "error": {
                    "code": "frame_too_large",
                    "id": frame["id"],
                    "message": "a frame of 2000000 bytes is over the 1048576 bytes",
                },
            }
        )
        return True

    relay, shown = lobby_through(ana, refuse_first)
    older = ana.locator("[data-testid=load-older]")
    older.click()
    poll(ana, lambda: refused, "the refused page")
    # Not waiting for an answer any more (before: for good)...
    expect(older).to_be_enabled()
    # ...so a scroll at the top asks again (the click's own scroll may have asked already).
    ana.locator("[data-testid=messages]").evaluate(
        "box => { box.scrollTop = 0; box.dispatchEvent(new Event('scroll')); }"
    )
    expect(shown).to_have_count(60)
    asked = history_requests(relay)
    assert len(asked) >= 2 and {r["d"]["before"] for r in asked} == {11}, asked
