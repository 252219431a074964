"""Per-address limits across two real daphne processes sharing PostgreSQL and Redis: a flood of
handshakes or guest sign-ins from one address gets the limit once, not once per process; the address is
the peer's, or behind a trusted proxy the right-most untrusted X-Forwarded-For entry (PROTOCOL.md 1.2)."""

from __future__ import annotations

import asyncio
import http.cookiejar
import ipaddress
import urllib.error
import urllib.parse
import urllib.request

import pytest
import redis
import websockets
from asgiref.sync import sync_to_async
from django.contrib.auth import get_user_model
from websockets.exceptions import InvalidStatus

pytestmark = [pytest.mark.e2e]

# A window so long that it never rolls over during a test.
NO_ROLLOVER = str(10**7)


async def handshake(url: str, source: str = "127.0.0.1", forwarded_for: str | None = None) -> int:
    """The HTTP status of one WebSocket handshake from `source`: 101 when accepted."""
    headers = {"Origin": url} if forwarded_for is None else {"Origin": url, "X-Forwarded-For": forwarded_for}
    try:
        ws = await websockets.connect(
            url.replace("http", "ws") + "/ws/", additional_headers=headers, local_addr=(source, 0)
        )
    except InvalidStatus as refused:
        return refused.response.status_code
    await ws.close()
    return 101


async def test_a_handshake_flood_gets_the_connect_rate_once_over_two_processes(start_daphne):
    env = {"CONNECT_RATE": "10", "MESSAGING_CONNECT_RATE_WINDOW": NO_ROLLOVER}
    a, b = start_daphne(**env), start_daphne(**env)
    # 8 on each: counted per process, every one would be let in.
    statuses = await asyncio.gather(*(handshake(server.url) for server in [a, b] * 8))
    assert sorted(statuses) == [101] * 10 + [403] * 6
    # Another address is not affected, on either process.
    assert [await handshake(server.url, source="127.0.0.2") for server in (a, b)] == [101, 101]


def guest_sign_in(url: str, name: str, forwarded_for: str | None = None) -> tuple[int, str | None]:
    """GET the form, POST a name (each with `forwarded_for` as X-Forwarded-For):
    the POST's status (302 signed in) and its Retry-After."""
    jar = http.cookiejar.CookieJar()
    opener = urllib.request.build_opener(
        urllib.request.HTTPCookieProcessor(jar),
        NoRedirects(),
    )
    headers = {} if forwarded_for is None else {"X-Forwarded-For": forwarded_for}
    opener.open(urllib.request.Request(url + "/login/", headers=headers), timeout=10).read()
    csrf = next(c.value for c in jar if c.name == "csrftoken")
    form = urllib.parse.urlencode({"name": name, "csrfmiddlewaretoken": csrf}).encode()
    try:
        response = opener.open(urllib.request.Request(url + "/login/", form, headers=headers), timeout=10)
    except urllib.error.HTTPError as answer:
        return answer.code, answer.headers.get("Retry-After")
    return response.status, None


class NoRedirects(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):
        return None


async def test_a_sign_in_flood_gets_30_accounts_over_two_processes(start_daphne):
    env = {"SIGNIN_RATE": "30", "SIGNIN_RATE_WINDOW": NO_ROLLOVER}
    a, b = start_daphne(**env), start_daphne(**env)
    users_before = await sync_to_async(get_user_model().objects.count)()
    answers = await asyncio.gather(
        *(
            sync_to_async(guest_sign_in, thread_sensitive=False)(server.url, f"flood{n}")
            for n, server in enumerate([a, b] * 25)
        )
    )
    # 25 on each: counted per process, every one would get an account.
    statuses = [status for status, _ in answers]
    assert sorted(statuses) == [302] * 30 + [429] * 20
    assert all(int(retry) > 0 for status, retry in answers if status == 429)
    assert await sync_to_async(get_user_model().objects.count)() - users_before == 30


async def sign_ins(servers, forwarded_for: list[str | None]) -> list[int]:
    """One guest sign-in per entry of `forwarded_for`, all at once, spread over `servers`: their statuses."""
    answers = await asyncio.gather(
        *(
            sync_to_async(guest_sign_in, thread_sensitive=False)(servers[n % len(servers)].url, f"g{n}", header)
            for n, header in enumerate(forwarded_for)
        )
    )
    return [status for status, _ in answers]


def rotating(n: int) -> list[str]:
    """`n` X-Forwarded-For values a client writes itself: a new first entry each time."""
    return [f"198.51.100.{i % 250 + 1}, 192.0.2.{i // 250 + 1}" for i in range(n)]


SIGNIN_30 = {"SIGNIN_RATE": "30", "SIGNIN_RATE_WINDOW": NO_ROLLOVER}


async def test_a_rotating_x_forwarded_for_from_an_untrusted_peer_makes_no_new_address(start_daphne):
    # The peer, 127.0.0.1, is no trusted proxy: what it writes in the header is its own.
    env = {**SIGNIN_30, "TRUSTED_PROXIES": "10.0.0.0/8"}
    a, b = start_daphne(**env), start_daphne(**env)
    statuses = await sign_ins([a, b], rotating(40))
    assert sorted(statuses) == [302] * 30 + [429] * 10


async def test_behind_a_trusted_proxy_the_right_most_untrusted_entry_is_the_client(start_daphne):
    env = {**SIGNIN_30, "TRUSTED_PROXIES": "127.0.0.1, 10.0.0.0/8"}
    a, b = start_daphne(**env), start_daphne(**env)
    # What the client wrote, then its own address as the proxy appended it,
    # then a second trusted proxy: only 203.0.113.7 counts.
    headers = [f"{first}, 203.0.113.7, 10.1.2.3" for first in rotating(40)]
    assert sorted(await sign_ins([a, b], headers)) == [302] * 30 + [429] * 10
    # Another client behind the same proxy has a window of its own.
    assert await sign_ins([a, b], ["198.51.100.1, 203.0.113.8", "203.0.113.8"]) == [302, 302]


async def test_an_ipv6_client_behind_a_trusted_proxy_counts_as_its_64(start_daphne):
    env = {**SIGNIN_30, "TRUSTED_PROXIES": "127.0.0.1"}
    a, b = start_daphne(**env), start_daphne(**env)
    # One host walking through its /64, an address a sign-in, in the forms proxies write.
    headers = [f"[2001:db8:1:2::{n:x}]:4{n:03}" if n % 2 else f"2001:db8:1:2:{n:x}::1" for n in range(1, 41)]
    assert sorted(await sign_ins([a, b], headers)) == [302] * 30 + [429] * 10
    assert await sign_ins([a], ["2001:db8:1:3::1", "::ffff:203.0.113.9"]) == [302, 302]


async def test_a_value_that_is_not_an_ip_address_is_never_a_key(start_daphne, server_env):
    env = {**SIGNIN_30, "TRUSTED_PROXIES": "127.0.0.1"}
    server = start_daphne(**env)
    junk = [
        "evil",
        "unknown",
        "messaging:rate:1",
        "203.0.113.7:http",
        "[2001:db8::1",
        "x" * 200,
        "_hidden",
        "203.0.113.7/24",
        "1.2.3.4.5",
    ]
    statuses = await sign_ins([server], junk + [f"{value}, 203.0.113.20" for value in junk])
    assert statuses == [302] * (2 * len(junk))
    keys = redis.Redis.from_url(server_env["REDIS_URL"]).keys("messaging:signin:*")
    counted = {key.decode().removeprefix("messaging:signin:").rsplit(":", 1)[0] for key in keys}
    # Junk counts as the proxy that passed it on; the client behind it as itself.
    assert counted == {"127.0.0.1", "203.0.113.20"}
    assert all(ipaddress.ip_network(key) for key in counted)


async def test_handshakes_are_counted_per_client_behind_a_trusted_proxy(start_daphne):
    env = {"CONNECT_RATE": "10", "MESSAGING_CONNECT_RATE_WINDOW": NO_ROLLOVER, "TRUSTED_PROXIES": "127.0.0.1"}
    a, b = start_daphne(**env), start_daphne(**env)
    headers = [f"{first}, 203.0.113.7" for first in rotating(16)]
    statuses = await asyncio.gather(
        *(handshake(server.url, forwarded_for=header) for server, header in zip([a, b] * 8, headers))
    )
    assert sorted(statuses) == [101] * 10 + [403] * 6
    # Another client behind the proxy gets in, on either process.
    assert [await handshake(server.url, forwarded_for="203.0.113.8") for server in (a, b)] == [101, 101]
    # An untrusted peer is counted as itself, whatever it writes: 127.0.0.2
    # naming 203.0.113.8 neither uses that client's window nor escapes its own.
    statuses = [await handshake(a.url, source="127.0.0.2", forwarded_for=header) for header in rotating(12)]
    assert statuses == [101] * 10 + [403] * 2
    assert await handshake(b.url, forwarded_for="203.0.113.8") == 101
