"""Commands on a room of another deployment are carried to its home and applied there once
(PROTOCOL.md 1.2, "Commands cross exactly once"): two real deployments, a fault proxy between them."""

from __future__ import annotations

import pytest
from asgiref.sync import sync_to_async

from messaging.testing import SocketClient
from messaging_client import sign_in

from . import truth

pytestmark = [pytest.mark.e2e]


async def socket(url: str, name: str) -> SocketClient:
    return await SocketClient(url, await sync_to_async(sign_in)(url, name)).connect()


async def test_a_post_from_a_peers_user_is_acked_with_the_homes_seq_and_stored_there_once(start_pair):
    pair = await sync_to_async(start_pair)()
    ana, bo = await socket(pair.a.url, "ana"), await socket(pair.b.url, "bo")
    try:
        await ana.join("lobby")
        joined = await bo.join("lobby@a")
        assert joined["d"]["room"] == "lobby@a"
        nodes = {entry["name"]: entry["node"] for entry in joined["d"]["members"]}
        assert nodes == {"ana": "a", "bo": "b"}
        first = await ana.call("room.post", {"room": "lobby", "body": "from a"})
        ack = await bo.call("room.post", {"room": "lobby@a", "body": "from b"}, id="bo-post-1")
        assert ack["ok"] and not ack["dup"], ack
        assert ack["d"]["room"] == "lobby@a" and ack["d"]["seq"] == first["d"]["seq"] + 1
        again = await bo.call("room.post", {"room": "lobby@a", "body": "from b"}, id="bo-post-1")
        assert again["ok"] and again["dup"] and again["d"] == ack["d"]
        # a's socket hears it, the sender named with its home.
        [msg] = [f for f in (await ana.frames("msg", 2)) if f["d"]["seq"] == ack["d"]["seq"]]
        assert msg["d"]["sender"]["name"] == "bo" and msg["d"]["sender"]["node"] == "b"
    finally:
        await ana.close()
        await bo.close()
    stored = await sync_to_async(truth.messages)(pair.a.database_url, "lobby")
    assert [(seq, body) for seq, _, body, *_ in stored] == [(1, "from a"), (2, "from b")]
    assert stored[1][5].startswith("b:")
    records = await sync_to_async(truth.scalar)(
        pair.a.database_url, "SELECT count(*) FROM messaging_commandrecord WHERE command_id = %s", "bo-post-1"
    )
    assert records == 1


async def test_the_home_away_is_unavailable_and_a_lost_answer_is_the_original_ack(start_pair):
    pair = await sync_to_async(start_pair)()
    ana, bo = await socket(pair.a.url, "ana"), await socket(pair.b.url, "bo")
    try:
        await ana.join("lobby")
        await bo.join("lobby@a")
        await bo.join("garden")
        await sync_to_async(pair.a.inbound.refuse)(30)
        away = await bo.call("room.post", {"room": "lobby@a", "body": "while away"}, id="bo-away")
        assert not away["ok"] and away["error"]["code"] == "unavailable" and away["error"]["retry"], away
        # b's own rooms are served all the while.
        own = await bo.call("room.post", {"room": "garden", "body": "at home"})
        assert own["ok"], own
        # The request reaches a and applies; its answer is lost on the way back.
        pair.a.inbound.heal()
        pair.a.inbound.plan = {"cut": 1.0}
        lost = await bo.call("room.post", {"room": "lobby@a", "body": "answer lost"}, id="bo-cut")
        assert not lost["ok"] and lost["error"]["code"] == "unavailable", lost
        pair.a.inbound.heal()
        retry = await bo.call("room.post", {"room": "lobby@a", "body": "answer lost"}, id="bo-cut")
        assert retry["ok"] and retry["dup"], retry
        retry_away = await bo.call("room.post", {"room": "lobby@a", "body": "while away"}, id="bo-away")
        assert retry_away["ok"] and not retry_away["dup"], retry_away
        assert retry_away["d"]["seq"] == retry["d"]["seq"] + 1
    finally:
        await ana.close()
        await bo.close()
    stored = await sync_to_async(truth.messages)(pair.a.database_url, "lobby")
    assert [body for _, _, body, *_ in stored] == ["answer lost", "while away"]
    assert pair.a.inbound.counts["cut"] == 1


async def test_a_remote_private_room_is_forbidden(start_pair):
    pair = await sync_to_async(start_pair)()
    ana, bo = await socket(pair.a.url, "ana"), await socket(pair.b.url, "bo")
    try:
        assert (await ana.call("room.create", {"room": "den", "private": True}))["ok"]
        refused = await bo.call("room.join", {"room": "den@a"})
        assert not refused["ok"] and refused["error"]["code"] == "forbidden", refused
        made = await bo.call("room.create", {"room": "yard@a", "private": False})
        assert not made["ok"] and made["error"]["code"] == "forbidden", made
        unknown = await bo.call("room.join", {"room": "lobby@z"})
        assert not unknown["ok"] and unknown["error"]["code"] == "invalid", unknown
        # bo, as a seen from a's lobby, is no one a private room can be shared with.
        await bo.join("lobby@a")
        members = (await ana.join("lobby"))["d"]["members"]
        [bo_at_a] = [m["user"] for m in members if m["node"] == "b"]
        for t, d in (("dm.open", {"user": bo_at_a}), ("room.invite", {"room": "den", "user": bo_at_a})):
            refused = await ana.call(t, d)
            assert not refused["ok"] and refused["error"]["code"] == "forbidden", refused
        # bo leaves: a's room has one member less, b's socket stops hearing it, bo may not post there.
        left = await bo.call("room.leave", {"room": "lobby@a"})
        assert left["ok"] and left["d"] == {"room": "lobby@a"}, left
        [gone] = await bo.frames("room.left", 1)
        assert gone["d"]["room"] == "lobby@a"
        after = await bo.call("room.post", {"room": "lobby@a", "body": "still here?"})
        assert not after["ok"] and after["error"]["code"] == "forbidden", after
    finally:
        await ana.close()
        await bo.close()
    assert (
        await sync_to_async(truth.scalar)(
            pair.a.database_url,
            "SELECT count(*) FROM messaging_membership m JOIN messaging_room r ON r.id = m.room_id WHERE r.slug = 'den'",
        )
        == 1
    )
