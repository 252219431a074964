"""Per-address limits across two real daphne processes sharing PostgreSQL and Redis (issue 19, finding 5):
a flood of handshakes or guest sign-ins from one address gets the limit once, not once per process."""
from __future__ import annotations

import asyncio
import http.cookiejar
import urllib.error
import urllib.parse
import urllib.request

import pytest
import websockets
from asgiref.sync import sync_to_async
from django.contrib.auth import get_user_model
from websockets.exceptions import InvalidStatus

pytestmark = [pytest.mark.e2e]

# A window so long that it never rolls over during a test.
NO_ROLLOVER = str(10**7)


async def handshake(url: str, source: str = "127.0.0.1") -> int:
    """The HTTP status of one WebSocket handshake from `source`: 101 when accepted."""
    try:
        ws = await websockets.connect(url.replace("http", "ws") + "/ws/", additional_headers={"Origin": url},
                                      local_addr=(source, 0))
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


def guest_sign_in(url: str, name: str) -> tuple[int, str | None]:
    """GET the form, POST a name: the POST's status (302 signed in) and its Retry-After."""
    jar = http.cookiejar.CookieJar()
    opener = urllib.request.build_opener(
        urllib.request.HTTPCookieProcessor(jar), NoRedirects(),
    )
    opener.open(url + "/login/", timeout=10).read()
    csrf = next(c.value for c in jar if c.name == "csrftoken")
    form = urllib.parse.urlencode({"name": name, "csrfmiddlewaretoken": csrf}).encode()
    try:
        response = opener.open(url + "/login/", form, timeout=10)
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
    answers = await asyncio.gather(*(
        sync_to_async(guest_sign_in, thread_sensitive=False)(server.url, f"flood{n}")
        for n, server in enumerate([a, b] * 25)
    ))
    # 25 on each: counted per process, every one would get an account.
    statuses = [status for status, _ in answers]
    assert sorted(statuses) == [302] * 30 + [429] * 20
    assert all(int(retry) > 0 for status, retry in answers if status == 429)
    assert await sync_to_async(get_user_model().objects.count)() - users_before == 30
