"""Rooms of thousands of members through real daphne processes, two where it matters."""
from __future__ import annotations

import pytest
from asgiref.sync import sync_to_async

from ..support.crowds import crowd
from ..support.wsclient import WsClient, sign_in

pytestmark = [pytest.mark.e2e]


async def test_a_room_of_8000_members_is_joined_over_daphne(start_daphne):
    # Before, the ack listed all of them: 1.7 MB, over autobahn's 1 MiB
    # server-frame limit, and every join closed with 1011.
    await sync_to_async(crowd)("crowd", 8000)
    server = start_daphne()
    ana = await WsClient(server.url, await sync_to_async(sign_in)(server.url, "ana")).connect()
    try:
        ack = await ana.call("room.join", {"room": "crowd"})
        assert ack["ok"] and ack["d"]["members_total"] == 8001 and len(ack["d"]["members"]) == 100
        page = await ana.call("room.members", {"room": "crowd", "after": ack["d"]["members"][98]["user"]})
        assert page["ok"] and len(page["d"]["members"]) == 100 and page["d"]["more"] is True
    finally:
        await ana.close()

