"""Hostile clients: rate limits, revoked sessions, foreign origins, anonymous sockets."""

from __future__ import annotations

import asyncio
from importlib import import_module

import pytest
from channels.db import database_sync_to_async
from channels.testing import WebsocketCommunicator
from django.conf import settings as django_settings
from django.core.exceptions import ImproperlyConfigured
from django.test import Client as HttpClient

from messaging.conf import get_settings
from messaging.models import CommandRecord
from messaging.transport.ratelimit import RedisWindow
from messaging.transport.sessions import session_still_signs_in
from project.asgi import application

from .conftest import rows

pytestmark = [pytest.mark.django_db(transaction=True)]

# A window so long that it never rolls over during a test: fixed windows
# restart their count at each boundary.
NO_ROLLOVER = 10**7


async def test_socket_over_its_burst_is_rate_limited_and_nothing_is_remembered(make_user, open_clients, settings):
    settings.MESSAGING = {**settings.MESSAGING, "RATE_BURST": 3, "RATE_PER_SECOND": 2.0}
    client = await open_clients(await make_user())
    await client.join("lobby")  # one of the three
    ids = [await client.send("room.post", {"room": "lobby", "body": f"m{n}"}, id=f"p{n}") for n in range(4)]
    acks = [await client.ack(id) for id in ids]
    assert [a["ok"] for a in acks] == [True, True, False, False]
    for refused in acks[2:]:
        error = refused["error"]
        assert error["code"] == "rate_limited" and error["retry"] is True and error["message"]
        assert 0 < error["retry_after"] <= 0.5  # one token at 2 per second
    assert sorted(r["client_msg_id"] for r in await rows()) == ["p0", "p1"]
    assert await database_sync_to_async(CommandRecord.objects.count)() == 2

    # Not remembered: after the hint, the same id runs afresh.
    await asyncio.sleep(acks[2]["error"]["retry_after"])
    again = await client.call("room.post", {"room": "lobby", "body": "m2"}, id="p2")
    assert again["ok"] and again["dup"] is False and again["d"]["seq"] == 3


async def test_a_user_is_limited_over_all_sockets(make_user, open_clients, settings):
    settings.MESSAGING = {**settings.MESSAGING, "USER_RATE_LIMIT": 4, "USER_RATE_WINDOW": NO_ROLLOVER}
    ana = await make_user()
    first, second = await open_clients(ana), await open_clients(ana)
    await first.join("lobby")
    await second.join("lobby")
    await first.call("room.post", {"room": "lobby", "body": "one"})
    await second.call("room.post", {"room": "lobby", "body": "two"})
    refused = await first.call("room.post", {"room": "lobby", "body": "three"})
    assert refused["error"]["code"] == "rate_limited" and refused["error"]["retry_after"] > 0
    assert (await second.call("receipt", {"room": "lobby", "read": 1}))["error"]["code"] == "rate_limited"
    # Another user has a budget of their own.
    bob = await open_clients(await make_user())
    assert (await bob.join("lobby"))["ok"]
    assert len(await rows()) == 2


async def test_the_user_window_is_shared_between_processes_through_redis(settings):
    # Two windows on one Redis stand for two server processes.
    first = RedisWindow(settings.REDIS_URL, limit=3, window=NO_ROLLOVER)
    second = RedisWindow(settings.REDIS_URL, limit=3, window=NO_ROLLOVER)
    assert [await first.ahit(7), await second.ahit(7), await first.ahit(7)] == [0, 0, 0]
    assert await second.ahit(7) > 0 and await first.ahit(7) > 0
    assert await second.ahit(8) == 0


async def test_the_user_window_counts_per_process_while_redis_is_down(own_redis):
    window = RedisWindow(own_redis.url, limit=2, window=NO_ROLLOVER, timeout=0.2)
    assert await window.ahit(1) == 0
    own_redis.stop()
    # The Redis count is lost with it; this process's own count takes over.
    assert [await window.ahit(1), await window.ahit(1)] == [0, 0]
    assert await window.ahit(1) > 0


async def signed_in_socket(user, origin: str = "http://127.0.0.1") -> tuple[WebsocketCommunicator, str]:
    """A socket through the deployed middleware stack, with the cookie of a real login."""
    session_key = await database_sync_to_async(signed_in_session)(user)
    comm = WebsocketCommunicator(
        application,
        "/ws/",
        headers=[
            (b"origin", origin.encode()),
            (b"host", b"127.0.0.1"),
            (b"cookie", f"{django_settings.SESSION_COOKIE_NAME}={session_key}".encode()),
        ],
    )
    return comm, session_key


async def test_socket_is_closed_with_4401_soon_after_logout_elsewhere(make_user, settings):
    settings.MESSAGING = {**settings.MESSAGING, "SESSION_CHECK_INTERVAL": 0.2}
    comm, session_key = await signed_in_socket(await make_user())
    connected, _ = await comm.connect()
    assert connected
    # Valid all along: several checks pass and commands work.
    assert await comm.receive_nothing(timeout=0.7)
    await comm.send_json_to({"id": "j1", "t": "room.join", "d": {"room": "lobby"}})
    assert (await comm.receive_json_from(timeout=5))["ok"]

    store = import_module(settings.SESSION_ENGINE).SessionStore(session_key)
    await database_sync_to_async(store.delete)()  # what logout in another tab does
    # Bounded: one interval plus a check; the wait here is only an upper bound.
    assert await comm.receive_output(timeout=5) == {"type": "websocket.close", "code": 4401}
    await comm.disconnect()


async def test_socket_is_closed_after_a_password_change(make_user, settings):
    settings.MESSAGING = {**settings.MESSAGING, "SESSION_CHECK_INTERVAL": 0.2}
    user = await make_user()
    comm, _ = await signed_in_socket(user)
    assert (await comm.connect())[0]

    def change_password():
        user.set_password("a new one")
        user.save()

    await database_sync_to_async(change_password)()
    assert await comm.receive_output(timeout=5) == {"type": "websocket.close", "code": 4401}
    await comm.disconnect()


async def test_foreign_origin_with_valid_cookies_is_refused(make_user):
    comm, _ = await signed_in_socket(await make_user(), origin="https://evil.example")
    connected, _ = await comm.connect()
    assert not connected
    assert await rows() == []


def signed_in_session(user) -> str:
    http = HttpClient()
    http.force_login(user)
    return http.cookies[django_settings.SESSION_COOKIE_NAME].value


def session_exists(key: str) -> bool:
    return import_module(django_settings.SESSION_ENGINE).SessionStore().exists(key)


def test_the_session_check_only_reads(django_user_model):
    user = django_user_model.objects.create_user(username="reader", password="old")
    key = signed_in_session(user)
    assert session_still_signs_in(key, user)
    user.set_password("new")
    user.save()
    assert not session_still_signs_in(key, user)
    # django.contrib.auth.get_user would have deleted it; the next HTTP request still may.
    assert session_exists(key)


def test_a_session_signed_under_a_fallback_secret_stays_valid_and_unrotated(django_user_model, settings):
    user = django_user_model.objects.create_user(username="rotated")
    key = signed_in_session(user)
    settings.SECRET_KEY_FALLBACKS = [settings.SECRET_KEY]
    settings.SECRET_KEY = "a-new-secret"
    assert session_still_signs_in(key, user)
    # get_user would have cycled the key, logging the socket's browser out.
    assert session_exists(key)


def test_limits_that_refuse_everything_fail_at_startup(settings):
    settings.MESSAGING = {**settings.MESSAGING, "RATE_PER_SECOND": 0}
    with pytest.raises(ImproperlyConfigured, match="RATE_PER_SECOND"):
        get_settings()
