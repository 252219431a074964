"""Sign-out against a real daphne: `POST /logout/` from the page's own form
closes every socket of that session with 4401 within
`SESSION_CHECK_INTERVAL`, and another user's socket carries on."""
from __future__ import annotations

import asyncio
import http.client
import re
import urllib.parse
from http.cookies import SimpleCookie

import pytest
from asgiref.sync import sync_to_async
from websockets.exceptions import ConnectionClosed

from messaging.testing import SocketClient


pytestmark = [pytest.mark.e2e]

# Short, so the bounded wait below is far longer than the promise it checks.
CHECK_INTERVAL = "1"


class FormBrowser:
    """Plain HTTP with a cookie jar of one: forms submitted as a browser would, redirects not followed."""

    def __init__(self, server) -> None:
        self.server = server
        self.cookies: dict[str, str] = {}

    def request(self, method: str, path: str, form: dict | None = None) -> tuple[int, dict[str, str], str]:
        headers = {"Cookie": "; ".join(f"{k}={v}" for k, v in self.cookies.items())}
        body = None
        if form is not None:
            body = urllib.parse.urlencode(form)
            headers |= {"Content-Type": "application/x-www-form-urlencoded", "Origin": self.server.url}
        conn = http.client.HTTPConnection("127.0.0.1", self.server.port, timeout=10)
        try:
            conn.request(method, path, body=body, headers=headers)
            response = conn.getresponse()
            text = response.read().decode()
            jar = SimpleCookie()
            for header in response.headers.get_all("Set-Cookie") or ():
                jar.load(header)
            for name, morsel in jar.items():
                if morsel.value:
                    self.cookies[name] = morsel.value
                else:
                    self.cookies.pop(name, None)
            return response.status, {k.lower(): v for k, v in response.getheaders()}, text
        finally:
            conn.close()

    def sign_in(self, name: str) -> str:
        self.request("GET", "/login/")
        status, _, _ = self.request("POST", "/login/", {"name": name, "csrfmiddlewaretoken": self.cookies["csrftoken"]})
        assert status == 302
        return self.cookies["sessionid"]

    def sign_out_from_the_page(self) -> tuple[int, dict[str, str]]:
        _, _, page = self.request("GET", "/")
        form = re.search(r'<form class="logout" method="post" action="/logout/">(.*?)</form>', page, re.S).group(1)
        token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', form).group(1)
        status, headers, _ = self.request("POST", "/logout/", {"csrfmiddlewaretoken": token})
        return status, headers


async def close_code(ws: SocketClient, timeout: float = 30) -> int | None:
    """Read until the server closes, at most `timeout` seconds; its close code."""
    try:
        async with asyncio.timeout(timeout):
            while True:
                await ws.ws.recv()
    except ConnectionClosed as closed:
        return closed.rcvd.code if closed.rcvd else None


async def test_sign_out_closes_the_sessions_sockets_with_4401_and_no_others(start_daphne):
    server = start_daphne(MESSAGING_SESSION_CHECK_INTERVAL=CHECK_INTERVAL)
    ana, bob = FormBrowser(server), FormBrowser(server)
    ana_session = await sync_to_async(ana.sign_in)("ana")
    bob_session = await sync_to_async(bob.sign_in)("bob")
    tabs = [await SocketClient(server.url, ana_session).connect() for _ in range(2)]
    other = await SocketClient(server.url, bob_session).connect()
    try:
        for ws in (*tabs, other):
            assert (await ws.call("room.join", {"room": "lobby"}))["ok"]

        status, headers = await sync_to_async(ana.sign_out_from_the_page)()
        assert status == 302 and headers["location"] == "/login/"
        assert [await close_code(ws) for ws in tabs] == [4401, 4401]

        assert (await other.call("room.post", {"room": "lobby", "body": "still here"}))["ok"]
        # A socket opened with the ended session is turned away as one without a user.
        late = await SocketClient(server.url, ana_session).connect()
        assert await close_code(late) == 4401
    finally:
        for ws in (*tabs, other):
            await ws.close()
