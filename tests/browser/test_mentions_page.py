"""The mentions badge: a message naming a member shows on that member's page, once, until clicked."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from messaging.events.models import Notification

from ..support.events import Process
from ..support.servers import wait_until
from .conftest import join, sign_in, write

pytestmark = [pytest.mark.e2e]


@pytest.fixture
def downstream(server_env, tmp_path):
    """The relay and the mentions group, as the processes a deployment runs."""
    processes = [
        Process(["messaging_relay"], {**server_env, "MESSAGING_EVENTS_POLL_INTERVAL": "0.05"}, tmp_path / "relay.log"),
        Process(
            ["messaging_consume", "messaging.events.mentions.notify", "--group", "mentions"],
            server_env,
            tmp_path / "mentions.log",
        ),
    ]
    yield processes
    for process in processes:
        process.stop()


def test_a_mention_shows_as_a_badge_until_it_is_clicked(server, new_context, downstream):
    ana, bob = sign_in(new_context(), server.url, "Ana"), sign_in(new_context(), server.url, "Bob")
    for page in (bob, ana):
        join(page, "lobby")
    badge = bob.locator("[data-testid=mentions-badge]")
    expect(badge).to_be_hidden()
    write(ana, "@bob lunch at noon?")
    write(ana, "and @Bob again")
    wait_until(lambda: Notification.objects.count() == 2, 30, "the mentions")
    bob.reload()
    expect(badge).to_be_visible()
    expect(bob.locator("[data-testid=mentions-count]")).to_have_text("2")
    # Ana is not mentioned; Bob, a guest, has no address to e-mail.
    expect(ana.locator("[data-testid=mentions-badge]")).to_be_hidden()
    assert set(Notification.objects.values_list("email", flat=True)) == {"no address"}
    badge.click()
    expect(badge).to_be_hidden()
    wait_until(lambda: not Notification.objects.filter(read_at__isnull=True).exists(), 10, "read marks")
    bob.reload()
    join(bob, "lobby")
    expect(badge).to_be_hidden()
