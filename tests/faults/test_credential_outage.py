"""A database outage is not a logout (PROTOCOL.md 1.2, "Credentials end everywhere").

While the server's database refuses every connection, its rounds of
credential checks fail: its sockets, signed in by a session or a token, stay
open, and once the database is back a credential that ends is noticed as
before.
"""

from __future__ import annotations

import asyncio

import pytest
from asgiref.sync import sync_to_async
from django.contrib.auth import get_user_model
from django.contrib.sessions.models import Session

from messaging.models import ApiToken
from messaging.testing import SocketClient
from messaging.transport.tokens import create_token
from messaging_client import sign_in

from ..support.browsing import close_code
from .conftest import database_down, database_time

pytestmark = [pytest.mark.e2e]

INTERVAL = 0.5


def bot_token() -> str:
    return create_token(get_user_model().objects.create_user(username="bot"), "e2e")[1]


def revoke_and_log_out(session: str) -> None:
    for row in ApiToken.objects.filter(user__username="bot"):
        row.revoke()
    Session.objects.filter(session_key=session).delete()  # what logout does


async def joined(ws: SocketClient) -> bool:
    answer = await ws.call("room.join", {"room": "lobby"})
    # The first command after the outage may meet a connection that died: `unavailable`, retried as clients do.
    if not answer["ok"] and answer["error"]["code"] == "unavailable":
        answer = await ws.call("room.join", {"room": "lobby"})
    return answer["ok"]


async def test_sockets_stay_open_through_a_database_outage_and_end_after_it(start_daphne):
    # The test's own connections first: the outage ends only those opened since `before` (the server's).
    token = await sync_to_async(bot_token)()
    before = await sync_to_async(database_time)()
    server = start_daphne(MESSAGING_SESSION_CHECK_INTERVAL=str(INTERVAL))
    session = await sync_to_async(sign_in)(server.url, "ana")
    sockets = [await SocketClient(server.url, session).connect(), await SocketClient(server.url, token=token).connect()]
    for ws in sockets:
        assert await joined(ws)

    with database_down(before) as ended:
        assert ended >= 1
        # Rounds enough to close them several times over, had a failed round counted as an ending.
        await asyncio.sleep(8 * INTERVAL)
        assert [ws.ws.close_code for ws in sockets] == [None, None]
    assert "checking the credentials of 2 sockets failed" in server.log(tail=1_000_000)

    for ws in sockets:
        assert await joined(ws)
    await sync_to_async(revoke_and_log_out)(session)
    assert [await close_code(ws) for ws in sockets] == [4401, 4401]
