"""Fuzzing the live consumer: every frame gets an answer or a defined close.

Hypothesis sends short sequences of hostile frames (arbitrary text, arbitrary
JSON, command-shaped objects, binary) to the real consumer on real PostgreSQL
and Redis. The consumer must never die (an exception would surface here, and
daphne would send 1011); each frame with a valid id gets its ack, each
without one gets `bad_frame`, a binary frame closes with 1003 and the tenth
malformed frame in a row with 1008.
"""
from __future__ import annotations

import asyncio

import pytest
from channels.layers import channel_layers
from django.contrib.auth import get_user_model
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from messaging.conf import get_settings
from messaging.exceptions import BadFrame
from messaging.idempotency import reset_claim_store
from messaging.protocol import parse_command

from ..unit.test_fuzz_protocol import frames
from .conftest import Client

pytestmark = [pytest.mark.django_db(transaction=True)]

hostile = st.one_of(frames, frames, st.binary(max_size=64))


async def answers_every_frame(user, sequence: list) -> None:
    client = await Client(user).connect()
    bad_in_a_row = 0
    try:
        # A room to post to, so some fuzzed posts get past "forbidden".
        await client.join("lobby")
        for frame in sequence:
            if isinstance(frame, bytes):
                await client.comm.send_input({"type": "websocket.receive", "bytes": frame})
                assert await client.comm.receive_output(timeout=10) == {"type": "websocket.close", "code": 1003}
                return
            await client.send_raw(frame)
            try:
                command = parse_command(frame)
            except BadFrame:
                bad_in_a_row += 1
                answer = await client.receive()
                assert answer["t"] == "error" and answer["error"]["code"] == "bad_frame"
                if bad_in_a_row == get_settings().BAD_FRAME_LIMIT:
                    assert await client.comm.receive_output(timeout=10) == {"type": "websocket.close", "code": 1008}
                    return
                continue
            bad_in_a_row = 0
            ack = await client.ack(command.id)  # msg and status frames on the way are kept aside
            assert set(ack) >= {"t", "id", "ok"}
            if not ack["ok"]:
                assert ack["error"]["code"] in {"invalid", "unknown_type", "forbidden", "id_reused"}, ack
    finally:
        await client.close()


@given(sequence=st.lists(hostile, min_size=1, max_size=12))
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
def test_the_consumer_answers_every_hostile_frame_and_never_dies(sequence, settings_override):
    user = get_user_model().objects.create_user(username=f"fuzz-{get_user_model().objects.count()}")
    try:
        asyncio.run(answers_every_frame(user, sequence))
    finally:
        # Each example runs in its own event loop; the layer's connections belong to one.
        channel_layers.backends.clear()
        reset_claim_store()


@pytest.fixture
def settings_override(settings):
    # Fuzzing sends more commands than a person would: keep the rate limits out of the way.
    settings.MESSAGING = {**settings.MESSAGING, "USER_RATE_LIMIT": 10**6}
