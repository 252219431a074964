"""Pressing Send once means one message, for everyone, whatever the network does.

Each test drives the real page in Debian's chromium against daphne (DEBUG=0,
static files from collectstatic through whitenoise) over the test PostgreSQL
and Redis, and checks both what people see and the rows stored.
"""

from __future__ import annotations

import json
import re

import pytest
from playwright.sync_api import expect

from messaging.models import Message

from .conftest import bubbles, join, leave_behind_the_pages_back, poll, screenshot, sign_in, write

pytestmark = [pytest.mark.e2e]

STORED = re.compile(r"^(sent|delivered|read)$")


def stored_bodies(room: str) -> list[str]:
    return list(Message.objects.filter(room__slug=room).order_by("seq").values_list("body", flat=True))


def expect_once_each(page, bodies: list[str], state=None) -> None:
    for body in bodies:
        expect(bubbles(page, body)).to_have_count(1)
        if state is not None:
            expect(bubbles(page, body)).to_have_attribute("data-state", state)


def expect_in_order(page, bodies: list[str]) -> None:
    expect(page.locator(".message-list:not([hidden]) [data-msg-id] .body")).to_have_text(bodies)


def test_messages_sent_offline_are_sent_once_each_in_order(server, new_context):
    ana_context, bob_context = new_context(), new_context()
    ana, bob = sign_in(ana_context, server.url, "ana"), sign_in(bob_context, server.url, "bob")
    for page in (ana, bob):
        join(page, "lobby")
        expect(page.locator("[data-testid=conn]")).to_have_attribute("data-state", "open")

    ana_context.set_offline(True)
    expect(ana.locator("[data-testid=conn]")).to_have_attribute("data-state", "offline")
    bodies = ["one", "two", "three"]
    for body in bodies:
        write(ana, body)
    expect_once_each(ana, bodies, "sending")
    expect(ana.locator("[data-testid=pending]")).to_have_text("3 messages waiting to be sent")
    assert stored_bodies("lobby") == []

    ana_context.set_offline(False)
    expect(ana.locator("[data-testid=conn]")).to_have_attribute("data-state", "open")
    expect_once_each(ana, bodies, STORED)
    expect(ana.locator("[data-testid=pending]")).to_be_hidden()
    expect_in_order(bob, bodies)
    expect_once_each(bob, bodies)
    assert stored_bodies("lobby") == bodies
    # Bob's copies carry the command ids that Ana's page minted.
    for body in bodies:
        assert bubbles(bob, body).get_attribute("data-msg-id") == bubbles(ana, body).get_attribute("data-msg-id")


def hold_socket(page) -> dict:
    """Route the page's socket to nowhere while `held["on"]`: it opens, nothing answers."""
    held = {"on": True}

    def route(ws):
        if not held["on"]:
            ws.connect_to_server()

    page.route_web_socket(re.compile(r"/ws/$"), route)
    return held


def test_messages_pending_across_a_reload_are_sent_once(server, new_context):
    page = sign_in(new_context(), server.url, "ana")
    join(page, "lobby")
    write(page, "before")
    expect_once_each(page, ["before"], STORED)

    held = hold_socket(page)
    page.reload()
    bodies = ["first", "second"]
    for body in bodies:
        write(page, body)
    expect_once_each(page, bodies, "sending")
    expect(page.locator("[data-testid=pending]")).to_have_text("2 messages waiting to be sent")

    held["on"] = False
    page.reload()
    expect_once_each(page, bodies, STORED)
    expect_in_order(page, ["before", *bodies])
    assert stored_bodies("lobby") == ["before", *bodies]


def test_server_killed_and_restarted_while_sending_loses_and_doubles_nothing(server, new_context):
    ana = sign_in(new_context(), server.url, "ana")
    bob = sign_in(new_context(), server.url, "bob")
    for page in (ana, bob):
        join(page, "lobby")
    bodies = [f"m{n}" for n in range(1, 9)]
    for body in bodies[:4]:
        write(ana, body)
    server.kill()  # SIGKILL, with posts in flight: some may be stored, their acks lost
    expect(ana.locator("[data-testid=conn]")).to_have_attribute("data-state", "reconnecting")
    expect(ana.locator("[data-testid=conn]")).to_contain_text("Reconnecting in")
    for body in bodies[4:]:
        write(ana, body)
    expect_once_each(ana, bodies[4:], "sending")
    server.start()

    expect_once_each(ana, bodies, STORED)
    expect_in_order(ana, bodies)
    expect_in_order(bob, bodies)
    assert stored_bodies("lobby") == bodies


def test_an_ack_lost_on_the_way_is_resent_with_the_same_id_and_stays_one(server, new_context):
    page = sign_in(new_context(), server.url, "ana")
    sent: list[dict] = []
    answers: list[dict] = []
    dropped: list[dict] = []

    def route(ws):
        upstream = ws.connect_to_server()

        def to_server(message):
            sent.append(json.loads(message))
            upstream.send(message)

        def to_page(message):
            frame = json.loads(message)
            answers.append(frame)
            if frame["t"] == "ack" and "seq" in frame.get("d", {}) and not dropped:
                dropped.append(frame)  # the first post's ack never arrives
                return
            ws.send(message)

        ws.on_message(to_server)
        upstream.on_message(to_page)

    page.route_web_socket(re.compile(r"/ws/$"), route)
    page.reload()
    join(page, "lobby")
    write(page, "once")
    bubble = bubbles(page, "once")
    expect(bubble).to_have_attribute("data-state", STORED)  # from the msg broadcast
    # The ack timeout resends the same id; the server answers it as a duplicate.
    id = bubble.get_attribute("data-msg-id")
    expect(page.locator("[data-testid=pending]")).to_be_hidden()
    posts = [f for f in sent if f["t"] == "room.post"]
    assert [f["id"] for f in posts] == [id, id]
    acks = [f for f in answers if f["t"] == "ack" and f["id"] == id]
    assert [a["dup"] for a in acks] == [False, True] and acks[0]["d"] == acks[1]["d"]
    expect(bubbles(page, "once")).to_have_count(1)
    assert stored_bodies("lobby") == ["once"]


def test_an_entry_put_back_after_its_ack_is_resent_and_stays_one(server, new_context):
    page = sign_in(new_context(), server.url, "ana")
    join(page, "lobby")
    write(page, "hello")
    expect(bubbles(page, "hello")).to_have_attribute("data-state", STORED)
    expect(page.locator("[data-testid=pending]")).to_be_hidden()
    id = bubbles(page, "hello").get_attribute("data-msg-id")
    # The outbox forgets an entry once acked; write it back, as a tab that
    # never saw the ack would still hold it, and let the next load resend it.
    page.evaluate(
        """async (id) => {
            const db = await new Promise((ok, no) => {
                const req = indexedDB.open(`messaging-user-${JSON.parse(document.getElementById("messaging-me").textContent)}`);
                req.onsuccess = () => ok(req.result); req.onerror = () => no(req.error);
            });
            const tx = db.transaction("outbox", "readwrite");
            tx.objectStore("outbox").put({id, t: "room.post", d: {room: "lobby", body: "hello"}, state: "sending", order: 1});
            await new Promise((ok) => (tx.oncomplete = ok));
            db.close();
        }""",
        id,
    )
    frames: list[dict] = []
    page.on("websocket", lambda ws: ws.on("framereceived", lambda payload: frames.append(json.loads(payload))))
    page.reload()
    # The pending count is hidden until the reloaded page has read its outbox
    # too, so what says the entry went out is the server's answer to it.
    poll(
        page, lambda: any(f["t"] == "ack" and f["id"] == id and f["dup"] for f in frames), "dup ack of the resent entry"
    )
    expect(page.locator("[data-testid=pending]")).to_be_hidden()
    expect(bubbles(page, "hello")).to_have_count(1)
    expect(bubbles(page, "hello")).to_have_attribute("data-msg-id", id)
    expect(bubbles(page, "hello")).to_have_attribute("data-state", STORED)
    assert stored_bodies("lobby") == ["hello"]


def test_two_tabs_of_one_user_never_show_a_message_twice(server, new_context):
    context = new_context()
    first = sign_in(context, server.url, "ana")
    join(first, "lobby")
    second = context.new_page()
    second.goto(server.url + "/")
    expect(second.locator("#room-title")).to_have_text("# lobby")

    write(first, "from the first tab")
    for page in (first, second):
        expect_once_each(page, ["from the first tab"], STORED)

    # Written in the first tab, whose socket is held: the second tab finds it
    # in the shared outbox after its reload and sends it, same id.
    held = hold_socket(first)
    first.reload()
    write(first, "held back")
    expect_once_each(first, ["held back"], "sending")
    second.reload()
    expect_once_each(second, ["held back"], STORED)
    held["on"] = False
    first.reload()
    for page in (first, second):
        expect_once_each(page, ["from the first tab", "held back"], STORED)
        expect_in_order(page, ["from the first tab", "held back"])
    assert stored_bodies("lobby") == ["from the first tab", "held back"]


def test_a_gap_in_seqs_makes_the_page_rejoin_and_fill_it_in_order(server, new_context):
    # Ana joins first, so Bob's join ack lists her: the gap is the only
    # reason his page has to rejoin.
    ana = sign_in(new_context(), server.url, "ana")
    join(ana, "lobby")
    bob = sign_in(new_context(), server.url, "bob")
    lost: list[dict] = []

    def route(ws):
        upstream = ws.connect_to_server()

        def to_page(message):
            frame = json.loads(message)
            if frame["t"] == "msg" and frame["d"]["body"] == "two" and not lost:
                lost.append(frame)  # the live broadcast of seq 2 goes missing
                return
            ws.send(message)

        upstream.on_message(to_page)

    bob.route_web_socket(re.compile(r"/ws/$"), route)
    bob.reload()
    join(bob, "lobby")
    for body in ("one", "two", "three"):
        write(ana, body)
        expect(bubbles(ana, body)).to_have_attribute("data-state", STORED)
    expect_in_order(bob, ["one", "two", "three"])
    expect_once_each(bob, ["one", "two", "three"])
    assert lost


def test_a_refused_message_shows_failed_with_the_reason_then_retry_or_discard(server, new_context):
    page = sign_in(new_context(), server.url, "ana")
    join(page, "lobby")
    write(page, "ok")
    expect(bubbles(page, "ok")).to_have_attribute("data-state", STORED)
    # Leave the room behind the page's back: the next post is refused with
    # `forbidden`, retry false.
    leave_behind_the_pages_back(room__slug="lobby")
    write(page, "refused")
    failed = bubbles(page, "refused")
    expect(failed).to_have_attribute("data-state", "failed")
    expect(failed).to_contain_text("join the room first")
    expect(page.locator("[data-testid=pending]")).to_be_hidden()
    screenshot(page, "chat-failed")

    # Still failed after a reload; the reload also rejoins, so a retry works.
    page.reload()
    failed = bubbles(page, "refused")
    expect(failed).to_have_attribute("data-state", "failed")
    old_id = failed.get_attribute("data-msg-id")
    failed.get_by_role("button", name="Retry").click()
    expect(bubbles(page, "refused")).to_have_attribute("data-state", STORED)
    assert bubbles(page, "refused").get_attribute("data-msg-id") != old_id

    write(page, "kept")
    expect(bubbles(page, "kept")).to_have_attribute("data-state", STORED)
    leave_behind_the_pages_back(room__slug="lobby")
    write(page, "dropped")
    expect(bubbles(page, "dropped")).to_have_attribute("data-state", "failed")
    bubbles(page, "dropped").get_by_role("button", name="Discard").click()
    expect(bubbles(page, "dropped")).to_have_count(0)
    page.reload()
    expect(bubbles(page, "kept")).to_have_count(1)
    expect(bubbles(page, "dropped")).to_have_count(0)
    assert stored_bodies("lobby") == ["ok", "refused", "kept"]
