"""A browser's HTTP side for tests against a real server (forms, cookies, commands with the session), and a socket's close code."""

from __future__ import annotations

import asyncio
import http.client
import json
import re
import urllib.parse
from http.cookies import SimpleCookie

from websockets.exceptions import ConnectionClosed

from messaging.testing import SocketClient


class FormBrowser:
    """Plain HTTP with a cookie jar of one: forms submitted as a browser would, redirects not followed."""

    def __init__(self, server) -> None:
        self.server = server
        self.cookies: dict[str, str] = {}

    def request(
        self,
        method: str,
        path: str,
        form: dict | None = None,
        *,
        body: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> tuple[int, dict[str, str], str]:
        headers = {"Cookie": "; ".join(f"{k}={v}" for k, v in self.cookies.items()), **(headers or {})}
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

    def command(self, t: str, d: dict) -> tuple[int, dict]:
        """`POST /api/commands` signed in by the session, with its CSRF token as the page sends it."""
        status, _, text = self.request(
            "POST",
            "/api/commands",
            body=json.dumps({"t": t, "d": d}),
            headers={
                "Content-Type": "application/json",
                "X-CSRFToken": self.cookies.get("csrftoken", ""),
                "Origin": self.server.url,
            },
        )
        return status, json.loads(text) if text else {}

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
