"""The page in a host project whose users are keyed by UUID (tests/package's
host project, on PostgreSQL, the app from this checkout): it tells its own
messages from others' and keeps each user's outbox to that user."""

from __future__ import annotations

import re
import sys

import psycopg
import pytest
from playwright.sync_api import expect

from ..support.hostproject import HOST, host_env, migrate, postgres_database, uuid_users_env
from ..support.servers import ROOT, Daphne, RedisServer
from .conftest import bubbles, join, sign_in, write

pytestmark = [pytest.mark.e2e]

STORED = re.compile(r"^(sent|delivered|read)$")


@pytest.fixture(scope="module")
def uuid_host(tmp_path_factory):
    """(the host's daphne, its database URL)."""
    redis_server = RedisServer(tmp_path_factory.mktemp("redis")).start()
    # The app from this checkout, not from a wheel.
    env = host_env(redis_server.url, PYTHONPATH=str(ROOT))
    try:
        with postgres_database("host_uuid_page") as database_url:
            env = uuid_users_env(env, database_url)
            migrate(sys.executable, HOST, env)
            server = Daphne(
                env, log_dir=tmp_path_factory.mktemp("logs"), app="hostsite.asgi:application", cwd=HOST, base_env={}
            ).start()
            try:
                yield server, database_url
            finally:
                server.stop()
    finally:
        redis_server.stop()


def stored(database_url: str) -> list[tuple[str, str]]:
    """(sender's username, body) of every message, in the order stored."""
    with psycopg.connect(database_url.replace("postgres://", "postgresql://", 1)) as conn:
        return conn.execute(
            "SELECT u.first_name, m.body FROM messaging_message m JOIN accounts_user u ON u.id = m.sender_id ORDER BY m.id"
        ).fetchall()


def test_own_messages_are_own_and_each_users_outbox_stays_theirs(uuid_host, new_context):
    server, database_url = uuid_host
    context = new_context()
    ana = sign_in(context, server.url, "ana")
    join(ana, "uuid-page")
    write(ana, "mine")
    # Her own, once: the room's frame of it lands on the bubble her outbox made.
    expect(bubbles(ana, "mine")).to_have_attribute("data-state", STORED)
    expect(bubbles(ana, "mine")).to_have_count(1)
    expect(bubbles(ana, "mine").locator(".sender")).to_have_text("You")

    # Offline, a message waits in her outbox; she leaves before it is sent.
    context.set_offline(True)
    expect(ana.locator("[data-testid=conn]")).to_have_attribute("data-state", "offline")
    write(ana, "ana's, never sent")
    expect(bubbles(ana, "ana's, never sent")).to_have_attribute("data-state", "sending")
    ana.close()
    context.set_offline(False)
    # Signed out (her session cookie gone); the browser keeps its storage.
    context.clear_cookies()

    # Bea signs in on the same browser: her page must not send Ana's outbox as hers.
    bea = sign_in(context, server.url, "bea")
    join(bea, "uuid-page")
    write(bea, "bea's")
    expect(bubbles(bea, "bea's")).to_have_attribute("data-state", STORED)
    expect(bubbles(bea, "bea's").locator(".sender")).to_have_text("You")
    expect(bubbles(bea, "mine").locator(".sender")).to_have_text("ana")
    expect(bubbles(bea, "ana's, never sent")).to_have_count(0)
    assert stored(database_url) == [("ana", "mine"), ("bea", "bea's")]
