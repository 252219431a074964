"""Pages that fit in a frame (PROTOCOL 1.2) through real daphne processes, PostgreSQL and Redis.

A room of messages of control characters (six bytes of JSON each: 24 KB a
message of 4,000) is paged back to its first message in acks that fit in a
frame; a join sends every backlog message, and an ack listing 100 members of
the longest names, whatever daphne's own message size limit; and settings
under which one message cannot fit stop the server as it starts.
"""

from __future__ import annotations

import pytest
from asgiref.sync import sync_to_async

from messaging.conf import MessagingSettings
from messaging.testing import SocketClient
from messaging_client import sign_in

from ..integration.test_pages_fit import scroll_back, sized_answer
from ..support.noisy import BODY_CHARS, CONTROL, noisy_members, noisy_room

pytestmark = [pytest.mark.e2e]

# The largest frame the server sends (`largest_frame`): MAX_SEND_BUFFER.
LARGEST = MessagingSettings().MAX_SEND_BUFFER
# Below a backlog message of control characters, and below a join ack of 100 of the longest names.
DAPHNE_MESSAGE_SIZE = "16384"


async def signed_in(server, name: str) -> SocketClient:
    return await SocketClient(server.url, await sync_to_async(sign_in)(server.url, name)).connect()


@pytest.mark.parametrize("count", [50, 100])
async def test_history_of_control_characters_pages_back_to_the_first_message(count, start_daphne):
    await sync_to_async(noisy_room)("noisy", count)
    server = start_daphne()
    ana = await signed_in(server, "ana")
    try:
        assert (await ana.call("room.join", {"room": "noisy", "since": count}))["ok"]
        pages = await scroll_back(ana, "noisy", count + 1)
        assert len(pages) > 1 and len(pages[0]) < min(count, 100)
        seqs = [m["seq"] for page in reversed(pages) for m in page]
        assert seqs == list(range(1, count + 1))
        assert all(m["body"] == CONTROL * BODY_CHARS for page in pages for m in page)
    finally:
        await ana.close()


async def test_a_join_sends_its_backlog_and_ack_whatever_daphnes_message_size(start_daphne):
    # Autobahn applies --websocket-max-message-size to what the server sends
    # too; the app's own limit is MAX_SEND_BUFFER, under every server.
    await sync_to_async(noisy_room)("noisy", 50)
    # With its poster and ana: 100 members, the most a join ack lists.
    crowd = await sync_to_async(noisy_members)("noisy", 98)
    server = start_daphne(("--websocket-max-message-size", DAPHNE_MESSAGE_SIZE))
    ana = await signed_in(server, "ana")
    try:
        ack, size = await sized_answer(ana, "room.join", {"room": "noisy", "since": 0})
        assert ack["ok"] and int(DAPHNE_MESSAGE_SIZE) < size <= LARGEST
        members = ack["d"]["members"]
        assert len(members) == 100 and ack["d"]["members_total"] == 100
        assert set(crowd) <= {m["user"] for m in members}
        assert ack["d"]["replayed"] == 50
        for seq in range(1, 51):
            frame, size = await ana.receive_sized()
            assert frame["t"] == "msg" and frame["d"]["seq"] == seq, frame.get("error", frame["t"])
            assert int(DAPHNE_MESSAGE_SIZE) < size <= LARGEST
        # And a client still may not send more than daphne takes.
        assert (await ana.call("room.post", {"room": "noisy", "body": "still here"}))["ok"]
    finally:
        await ana.close()


@pytest.mark.parametrize(
    "settings",
    [{"MESSAGING_BODY_MAX_CHARS": "200000"}, {"MESSAGING_MAX_SEND_BUFFER": "20000"}],
    ids=["long-messages", "small-frames"],
)
def test_settings_under_which_one_message_cannot_fit_stop_the_server_as_it_starts(settings, start_daphne):
    with pytest.raises(RuntimeError, match="exited") as refused:
        start_daphne(**settings)
    assert "ImproperlyConfigured" in str(refused.value) and "BODY_MAX_CHARS" in str(refused.value)
