"""Per-client-address limits on real Redis: WebSocket handshakes (`CONNECT_RATE`) and guest sign-ins (`SIGNIN_RATE`)."""

from __future__ import annotations

import pytest
from asgiref.sync import async_to_sync
from channels.testing import WebsocketCommunicator
from django.contrib.auth import get_user_model
from django.test import Client as HttpClient
from prometheus_client import REGISTRY

from messaging.transport.ratelimit import RedisWindow
from project.asgi import application

pytestmark = [pytest.mark.django_db(transaction=True)]

# A window so long that it never rolls over during a test.
NO_ROLLOVER = 10**7


def throttled(limit: str) -> float:
    return REGISTRY.get_sample_value("messaging_address_throttled_total", {"limit": limit}) or 0.0


async def test_hits_now_share_one_exact_count_between_processes(settings):
    # Two windows on one Redis stand for two server processes.
    first = RedisWindow(settings.REDIS_URL, limit=3, window=NO_ROLLOVER, prefix="messaging:test:")
    second = RedisWindow(settings.REDIS_URL, limit=3, window=NO_ROLLOVER, prefix="messaging:test:")
    assert [await first.ahit_now("a"), await second.ahit_now("a"), await first.ahit_now("a")] == [0, 0, 0]
    assert await second.ahit_now("a") > 0 and await first.ahit_now("a") > 0
    assert await second.ahit_now("b") == 0
    # Another prefix is another window: the per-user one keeps its own keys.
    user_window = RedisWindow(settings.REDIS_URL, limit=2, window=NO_ROLLOVER)
    assert await user_window.ahit_now("a") == 0


def test_hits_now_from_a_sync_view_share_the_count_with_the_event_loop(settings):
    # The sign-in view counts from its thread through the same coroutine.
    first = RedisWindow(settings.REDIS_URL, limit=2, window=NO_ROLLOVER, prefix="messaging:test:")
    second = RedisWindow(settings.REDIS_URL, limit=2, window=NO_ROLLOVER, prefix="messaging:test:")
    assert async_to_sync(first.ahit_now)("a") == 0
    assert async_to_sync(second.ahit_now)("a") == 0
    assert async_to_sync(first.ahit_now)("a") > 0


async def test_hits_now_from_the_event_loop_count_in_the_process_while_redis_is_down(own_redis):
    window = RedisWindow(own_redis.url, limit=2, window=NO_ROLLOVER, timeout=0.2)
    assert await window.ahit_now("a") == 0
    own_redis.stop()
    assert [await window.ahit_now("a"), await window.ahit_now("a")] == [0, 0]
    assert await window.ahit_now("a") > 0


async def handshake(address: str, port: int = 40000) -> bool:
    """One WebSocket handshake through the deployed middleware stack from `address`; whether it was accepted."""
    comm = WebsocketCommunicator(
        application, "/ws/", headers=[(b"origin", b"http://127.0.0.1"), (b"host", b"127.0.0.1")]
    )
    comm.scope["client"] = [address, port]
    connected, _ = await comm.connect()
    await comm.disconnect()
    return connected


async def test_handshakes_past_the_connect_rate_are_refused_per_address(settings):
    settings.MESSAGING = {**settings.MESSAGING, "CONNECT_RATE": 3, "CONNECT_RATE_WINDOW": NO_ROLLOVER}
    before = throttled("connect")
    assert [await handshake("198.51.100.7") for _ in range(5)] == [True, True, True, False, False]
    assert throttled("connect") - before == 2
    # Another address has a window of its own; an IPv6 host counts as its /64.
    assert await handshake("198.51.100.8")
    assert [await handshake(f"2001:db8::{n}") for n in range(1, 5)] == [True, True, True, False]


async def test_a_connect_rate_of_0_is_off(settings):
    settings.MESSAGING = {**settings.MESSAGING, "CONNECT_RATE": 0}
    assert all([await handshake("198.51.100.9") for _ in range(10)])


def sign_in(http: HttpClient, name: str, address: str):
    return http.post("/login/", {"name": name}, REMOTE_ADDR=address)


def test_sign_ins_past_the_rate_get_429_and_create_no_account(settings):
    settings.SIGNIN_RATE, settings.SIGNIN_RATE_WINDOW = 3, NO_ROLLOVER
    users = get_user_model().objects
    before = throttled("signin")
    answers = [sign_in(HttpClient(), f"guest{n}", "203.0.113.5") for n in range(5)]
    assert [a.status_code for a in answers] == [302, 302, 302, 429, 429]
    refused = answers[3]
    assert refused["Content-Type"] == "text/plain; charset=utf-8"
    assert 0 < int(refused["Retry-After"]) <= NO_ROLLOVER
    assert (
        refused.content.decode()
        == f"Too many sign-ins from your address. Try again in {refused['Retry-After']} seconds.\n"
    )
    assert users.count() == 3 and throttled("signin") - before == 2
    # The form itself is not counted, and another address signs in.
    assert HttpClient().get("/login/", REMOTE_ADDR="203.0.113.5").status_code == 200
    assert sign_in(HttpClient(), "elsewhere", "203.0.113.6").status_code == 302
    assert users.count() == 4


def test_a_signin_rate_of_0_is_off(settings):
    settings.SIGNIN_RATE = 0
    assert {sign_in(HttpClient(), f"guest{n}", "203.0.113.9").status_code for n in range(40)} == {302}
