"""The consumer's send path with the real consumer, PostgreSQL and Redis: frames it cannot
send become error frames, and what it holds back for a socket counts against `MAX_SEND_BUFFER`.

Host command types registered here stand for a host project's own: one
whose result cannot be encoded, one whose replies are large, and a slow one
that subscribes its socket to a room (as `room.join` does).
"""

from __future__ import annotations

import threading

import pytest
from prometheus_client import REGISTRY

import messaging
from messaging.testing import override_registry

from .conftest import Client

pytestmark = [pytest.mark.django_db(transaction=True)]

SMALL_BUFFER = 20_000


def unsendable(reason: str) -> float:
    return REGISTRY.get_sample_value("messaging_unsendable_frames_total", {"reason": reason}) or 0.0


def overflows() -> float:
    return REGISTRY.get_sample_value("messaging_send_buffer_overflows_total") or 0.0


@pytest.fixture
def host_types():
    """`host_types(type, apply, **options)` registers a type that is not exactly-once, for this test."""
    with override_registry():

        def register(type: str, apply, **options) -> str:
            messaging.command(type, exactly_once=False, **options)(apply)
            return type

        yield register


@pytest.fixture
def small_send_buffer(settings):
    settings.MESSAGING = {**settings.MESSAGING, "MAX_SEND_BUFFER": SMALL_BUFFER}


async def test_a_result_that_cannot_be_encoded_is_an_error_frame_naming_its_command(make_user, host_types):
    host_types("test.sets", lambda ctx, data: {"members": {1, 2}})
    client = await Client(await make_user()).connect()
    before = unsendable("unencodable")
    id = await client.send("test.sets", {})
    frame = await client.receive()
    assert frame["t"] == "error" and frame["error"]["code"] == "frame_unencodable" and frame["error"]["id"] == id
    assert unsendable("unencodable") - before == 1
    assert (await client.call("room.join", {"room": "lobby"}))["ok"], "the socket lives on"
    await client.close()


async def test_a_reply_over_the_send_buffer_is_an_error_frame_and_the_others_are_sent(
    make_user, host_types, small_send_buffer
):
    def apply(ctx, data):
        ctx.reply({"t": "note", "d": {"text": "small"}})
        ctx.reply({"t": "note", "d": {"text": "x" * SMALL_BUFFER}})
        ctx.reply({"t": "note", "d": {"text": "small again"}})
        return {}

    host_types("test.notes", apply)
    client = await Client(await make_user()).connect()
    before = unsendable("too_large")
    id = await client.send("test.notes", {})
    assert (await client.ack(id))["ok"]
    first, error, last = [await client.receive() for _ in range(3)]
    assert first["d"]["text"] == "small" and last["d"]["text"] == "small again"
    assert error["t"] == "error" and error["error"]["code"] == "frame_too_large" and error["error"]["id"] == id
    assert str(SMALL_BUFFER) in error["error"]["message"]
    assert unsendable("too_large") - before == 1
    await client.close()


async def test_live_frames_held_behind_a_slow_subscribing_command_count_against_the_send_buffer(
    make_user, host_types, small_send_buffer
):
    """A room's frames wait while a command that subscribes to it runs (its ack and
    replies go first): past MAX_SEND_BUFFER the socket is closed with 1008."""
    release = threading.Event()

    def slow_join(ctx, data):
        # A host's slow command, on a database thread; bounded, never a hang.
        assert release.wait(30)
        return {"room": data["room"]}

    host_types("test.slow-join", slow_join, subscribes_to=lambda data: data["room"])
    poster = await Client(await make_user()).connect()
    await poster.join("busy")
    slow = await Client(await make_user()).connect()
    assert (await slow.call("room.join", {"room": "busy"}))["ok"]
    before = overflows()
    await slow.send("test.slow-join", {"room": "busy"})
    try:
        # Each live msg frame is some 4 KB: five of them pass 20,000 bytes.
        for _ in range(6):
            assert (await poster.call("room.post", {"room": "busy", "body": "y" * 4000}))["ok"]
        closed = await slow.comm.receive_output(timeout=10)
        assert closed == {"type": "websocket.close", "code": 1008}
        assert overflows() - before == 1
    finally:
        release.set()
    assert (await poster.call("room.post", {"room": "busy", "body": "the room lives on"}))["ok"]
    await poster.close()
