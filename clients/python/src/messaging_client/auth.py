"""Signing a client in: the demo's guest form, or a session cookie or API token the caller has."""

from __future__ import annotations

import asyncio
import http.cookiejar
import urllib.error
import urllib.parse
import urllib.request

from .redirects import opener


class SignInFailed(Exception):
    """The server did not sign the client in."""


def sign_in(base_url: str, name: str, *, timeout: float = 10) -> str:
    """Sign in through the guest form at `/login/` as a new guest called `name`;
    return the session cookie's value (the `session` of a `Client`).

    No redirect is followed. The form's GET must answer itself (a redirect
    fails the sign-in); its POST answers a sign-in with the 302 PROTOCOL.md
    describes, whose cookie is taken from that answer, and its `Location` is
    not visited.
    """
    jar = http.cookiejar.CookieJar()
    browser = opener(urllib.request.HTTPCookieProcessor(jar))
    try:
        browser.open(base_url + "/login/", timeout=timeout).read()
    except urllib.error.HTTPError as exc:
        if not 300 <= exc.code < 400:
            raise
        location = exc.headers.get("Location")
        raise SignInFailed(f"the sign-in form answered {exc.code}, a redirect to {location!r}") from None
    csrf = next((c.value for c in jar if c.name == "csrftoken"), None)
    if csrf is None:
        raise SignInFailed("the sign-in form set no CSRF cookie")
    form = urllib.parse.urlencode({"name": name, "csrfmiddlewaretoken": csrf}).encode()
    try:
        browser.open(
            urllib.request.Request(base_url + "/login/", form, headers={"Referer": base_url + "/login/"}),
            timeout=timeout,
        ).read()
    except urllib.error.HTTPError as exc:
        if exc.code not in (302, 303):
            raise SignInFailed(f"the sign-in form answered {exc.code}") from None
    session = next((c.value for c in jar if c.name == "sessionid"), None)
    if session is None:
        raise SignInFailed("the sign-in form set no session cookie")
    return session


async def asign_in(base_url: str, name: str, *, timeout: float = 10) -> str:
    """`sign_in` from async code, on a thread."""
    return await asyncio.to_thread(sign_in, base_url, name, timeout=timeout)


def handshake_headers(
    base_url: str, *, session: str | None = None, token: str | None = None, origin: str | None = None
) -> dict[str, str]:
    """The headers of a WebSocket handshake signed in as the caller says.

    The `Origin` is the server's own by default: the server refuses a
    handshake from another origin (PROTOCOL.md).
    """
    headers = {"Origin": origin or base_url}
    if session is not None:
        headers["Cookie"] = f"sessionid={session}"
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    return headers
