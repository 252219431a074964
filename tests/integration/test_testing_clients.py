"""messaging.testing's Communicator speaks the protocol to the real consumer, and a type
registered for one test goes through the whole exactly-once path."""

from __future__ import annotations

import pytest

from messaging.testing import Communicator, override_command

pytestmark = [pytest.mark.django_db(transaction=True)]


async def test_a_type_registered_for_the_test_is_exactly_once_through_the_consumer(make_user):
    calls = []

    def count(ctx, data):
        calls.append(data)
        return {"n": len(calls)}

    with override_command("test.count", count):
        client = await Communicator(await make_user()).connect()
        try:
            first = await client.call("test.count", {"x": 1}, id="once")
            again = await client.call("test.count", {"x": 1}, id="once")
        finally:
            await client.close()
    assert first == {"id": "once", "t": "ack", "ok": True, "dup": False, "d": {"n": 1}}
    assert again["dup"] is True and again["d"] == {"n": 1} and calls == [{"x": 1}]


async def test_frames_read_past_while_waiting_stay_in_the_inbox(make_user):
    ana, bob = (
        await Communicator(await make_user("ana")).connect(),
        await Communicator(await make_user("bob")).connect(),
    )
    try:
        await ana.join("lobby")
        await bob.join("lobby")
        # Ana's post, then a join: the room's `msg` frame of the post arrives before the join's ack.
        posted = await ana.send("room.post", {"room": "lobby", "body": "hi"})
        await ana.call("room.join", {"room": "lobby"})
        assert any(f["t"] == "ack" and f["id"] == posted for f in ana.inbox)
        [msg] = await bob.frames("msg", 1)
        assert msg["d"]["body"] == "hi"
        bad = await bob.call("room.nope", {})
        assert bad["error"]["code"] == "unknown_type"
        await bob.send_raw("{")
        assert (await bob.receive())["error"]["code"] == "bad_frame"
        assert await bob.nothing_more()
    finally:
        await ana.close()
        await bob.close()
