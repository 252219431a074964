"""Sign-out against a real daphne: `POST /logout/` from the page's own form
closes every socket of that session with 4401 within
`SESSION_CHECK_INTERVAL`, and another user's socket carries on."""

from __future__ import annotations

import pytest
from asgiref.sync import sync_to_async

from messaging.testing import SocketClient

from ..support.browsing import FormBrowser, close_code

pytestmark = [pytest.mark.e2e]

# Short, so the bounded wait below is far longer than the promise it checks.
CHECK_INTERVAL = "1"


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
