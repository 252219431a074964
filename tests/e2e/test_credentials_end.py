"""PROTOCOL.md 1.2, "Credentials end everywhere", against real daphne processes.

A socket opened with an API token is closed with 4401 within
`SESSION_CHECK_INTERVAL` of the token's revocation or expiry; every socket
of a user made inactive is, whatever signed it in; that user's HTTP
commands get 401 at once. Each process closes its own sockets, and other
users' sockets carry on. (A session's logout: tests/e2e/test_sign_out.py.)
"""

from __future__ import annotations

import asyncio
from datetime import timedelta

import pytest
from asgiref.sync import sync_to_async
from django.contrib.auth import get_user_model
from django.utils import timezone

from messaging.models import ApiToken
from messaging.testing import SocketClient
from messaging.transport.tokens import create_token, digest
from messaging_client import ahttp_command

from ..support.browsing import FormBrowser, close_code

pytestmark = [pytest.mark.e2e]

# Short, so the bounded waits below are far longer than the promise they check.
CHECK_INTERVAL = "1"


def new_user_with_token(name: str, expires_at=None) -> str:
    user = get_user_model().objects.create_user(username=name, first_name=name)
    return create_token(user, "e2e", expires_at=expires_at)[1]


def token_of_guest(name: str) -> str:
    """A new token of the guest the sign-in form made as `name` (its username is the form's own)."""
    return create_token(get_user_model().objects.get(first_name=name), "e2e")[1]


def revoke(token: str) -> None:
    ApiToken.objects.get(digest=digest(token)).revoke()


def make_inactive(name: str) -> None:
    get_user_model().objects.filter(first_name=name).update(is_active=False)


async def opened(url: str, **credential: str) -> SocketClient:
    """A socket signed in by `session=` or `token=` that has joined the lobby."""
    ws = await SocketClient(url, **credential).connect()
    assert (await ws.call("room.join", {"room": "lobby"}))["ok"]
    return ws


async def still_posts(ws: SocketClient, body: str) -> bool:
    return (await ws.call("room.post", {"room": "lobby", "body": body}))["ok"]


async def refused(url: str, **credential: str) -> bool:
    """A new handshake with this credential is turned away as one without a user."""
    return await close_code(await SocketClient(url, **credential).connect()) == 4401


async def test_a_revoked_tokens_sockets_are_closed_with_4401_and_no_others(start_daphne):
    server = start_daphne(MESSAGING_SESSION_CHECK_INTERVAL=CHECK_INTERVAL)
    ana_token = await sync_to_async(new_user_with_token)("ana")
    bob_token = await sync_to_async(new_user_with_token)("bob")
    _, ana_other_token = await sync_to_async(create_token)(await get_user_model().objects.aget(username="ana"))
    bots = [await opened(server.url, token=ana_token) for _ in range(2)]
    other = await opened(server.url, token=ana_other_token)
    bob = await opened(server.url, token=bob_token)

    await sync_to_async(revoke)(ana_token)
    assert [await close_code(ws) for ws in bots] == [4401, 4401]
    # The same user's other token, and another user's, sign in as before.
    assert await still_posts(other, "still here") and await still_posts(bob, "me too")
    assert await refused(server.url, token=ana_token)
    assert (await ahttp_command(server.url, "room.join", {"room": "lobby"}, token=ana_token))[0] == 401


async def test_an_expired_tokens_sockets_are_closed_and_it_signs_nobody_in(start_daphne):
    server = start_daphne(MESSAGING_SESSION_CHECK_INTERVAL=CHECK_INTERVAL)
    # Long enough for the socket to open first on a loaded machine.
    expires_at = timezone.now() + timedelta(seconds=10)
    token = await sync_to_async(new_user_with_token)("ana", expires_at)
    lasting = await sync_to_async(new_user_with_token)("bob", timezone.now() + timedelta(days=1))
    ws = await opened(server.url, token=token)
    bob = await opened(server.url, token=lasting)
    # The handshake counts as a use.
    row = await ApiToken.objects.aget(digest=digest(token))
    assert row.last_used_at is not None

    assert await close_code(ws, timeout=60) == 4401
    assert timezone.now() >= expires_at
    assert await still_posts(bob, "not expired")
    assert await refused(server.url, token=token)
    status, answer = await ahttp_command(server.url, "room.join", {"room": "lobby"}, token=token)
    assert status == 401 and answer["error"]["code"] == "unauthenticated"


async def test_every_socket_of_a_user_made_inactive_is_closed_and_http_refused_at_once(start_daphne):
    server = start_daphne(MESSAGING_SESSION_CHECK_INTERVAL=CHECK_INTERVAL)
    ana, bob = FormBrowser(server), FormBrowser(server)
    ana_session = await sync_to_async(ana.sign_in)("ana")
    bob_session = await sync_to_async(bob.sign_in)("bob")
    ana_token = await sync_to_async(token_of_guest)("ana")
    sockets = [await opened(server.url, session=ana_session), await opened(server.url, token=ana_token)]
    others = [await opened(server.url, session=bob_session)]
    assert (await sync_to_async(ana.command)("room.join", {"room": "lobby"}))[0] == 200
    assert (await ahttp_command(server.url, "room.join", {"room": "lobby"}, token=ana_token))[0] == 200

    await sync_to_async(make_inactive)("ana")
    # HTTP at once, with either credential: no interval to wait out.
    assert (await sync_to_async(ana.command)("room.join", {"room": "lobby"}))[0] == 401
    assert (await ahttp_command(server.url, "room.join", {"room": "lobby"}, token=ana_token))[0] == 401
    assert [await close_code(ws) for ws in sockets] == [4401, 4401]
    assert await still_posts(others[0], "still here")
    assert (await sync_to_async(bob.command)("room.join", {"room": "lobby"}))[0] == 200
    assert await refused(server.url, session=ana_session) and await refused(server.url, token=ana_token)


async def test_two_processes_each_close_their_own_sockets(start_daphne):
    a, b = (start_daphne(MESSAGING_SESSION_CHECK_INTERVAL=CHECK_INTERVAL) for _ in range(2))
    ana, bob = FormBrowser(a), FormBrowser(a)
    ana_session = await sync_to_async(ana.sign_in)("ana")
    bob_session = await sync_to_async(bob.sign_in)("bob")
    ana_token = await sync_to_async(token_of_guest)("ana")
    by_token = [await opened(server.url, token=ana_token) for server in (a, b)]
    by_session = [await opened(server.url, session=ana_session) for server in (a, b)]
    others = [await opened(server.url, session=bob_session) for server in (a, b)]

    await sync_to_async(revoke)(ana_token)
    assert [await close_code(ws) for ws in by_token] == [4401, 4401]
    for n, ws in enumerate((*by_session, *others)):
        assert await still_posts(ws, f"open {n}")

    await sync_to_async(make_inactive)("ana")
    assert [await close_code(ws) for ws in by_session] == [4401, 4401]
    await asyncio.sleep(2 * float(CHECK_INTERVAL))  # a round or two more on each process
    for n, ws in enumerate(others):
        assert await still_posts(ws, f"still open {n}")
