"""The page on a network that refuses WebSockets: the stream (`GET /api/stream`) and `POST /api/commands`
instead, with the same outbox and screen (PROTOCOL.md 1.2, "Server-sent events")."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from messaging.models import Message

from .conftest import bubbles, join, sign_in, write

pytestmark = [pytest.mark.e2e]


def stored_bodies(room: str) -> list[str]:
    return list(Message.objects.filter(room__slug=room).order_by("seq").values_list("body", flat=True))


def test_a_page_whose_websockets_are_refused_sends_receives_and_survives_a_reload(server, new_context):
    ana_context, bob_context = new_context(), new_context()
    # Every WebSocket of ana's page is closed before anything reaches it.
    ana_context.route_web_socket(re.compile(r"/ws/$"), lambda ws: ws.close())
    ana, bob = sign_in(ana_context, server.url, "ana"), sign_in(bob_context, server.url, "bob")
    conn = ana.locator("[data-testid=conn]")
    expect(conn).to_have_attribute("data-transport", "sse")
    expect(conn).to_have_attribute("data-state", "open")
    expect(bob.locator("[data-testid=conn]")).to_have_attribute("data-transport", "ws")
    for page in (ana, bob):
        join(page, "lobby")

    write(ana, "over http")
    expect(bubbles(bob, "over http")).to_have_count(1)
    expect(bubbles(ana, "over http")).to_have_attribute("data-state", re.compile(r"^(sent|delivered|read)$"))
    write(bob, "to the stream")
    expect(bubbles(ana, "to the stream")).to_have_count(1)

    ana.reload()
    expect(conn).to_have_attribute("data-transport", "sse")
    expect(conn).to_have_attribute("data-state", "open")
    expect(bubbles(ana, "over http")).to_have_count(1)
    expect(bubbles(ana, "to the stream")).to_have_count(1)
    write(ana, "after the reload")
    expect(bubbles(bob, "after the reload")).to_have_count(1)
    assert stored_bodies("lobby") == ["over http", "to the stream", "after the reload"]
