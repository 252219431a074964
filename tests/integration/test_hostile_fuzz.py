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
import json

import pytest
from channels.layers import channel_layers
from django.contrib.auth import get_user_model

from messaging.conf import get_settings
from messaging.core.claims import reset_claim_store

from ..support.hostile import BROADCASTS, REFUSALS, Oracle, over_hostile_sequences
from .conftest import Client

pytestmark = [pytest.mark.django_db(transaction=True)]


async def next_output(client: Client) -> dict:
    """The next output that answers a frame: the join's backlog and live broadcasts skipped."""
    while True:
        output = await client.comm.receive_output(timeout=10)
        if output["type"] != "websocket.send" or json.loads(output["text"])["t"] not in BROADCASTS:
            return output


async def answers_every_frame(user, sequence: list) -> None:
    client = await Client(user).connect()
    oracle = Oracle(get_settings().BAD_FRAME_LIMIT)
    try:
        # A room to post to, so some fuzzed posts get past "forbidden".
        await client.join("lobby")
        for frame in sequence:
            kind = "bytes" if isinstance(frame, bytes) else "text"
            await client.comm.send_input({"type": "websocket.receive", kind: frame})
            expected, value = oracle.expect(frame)
            if expected == "ack":
                ack = await client.ack(value)  # msg and status frames on the way are kept aside
                assert ack["ok"] or ack["error"]["code"] in REFUSALS, ack
                continue
            if expected == "bad_frame":
                answer = json.loads((await next_output(client))["text"])
                assert answer["t"] == "error" and answer["error"]["code"] == "bad_frame"
            if value is not None:
                assert await next_output(client) == {"type": "websocket.close", "code": value}
                return
    finally:
        await client.close()


@over_hostile_sequences(max_examples=60)
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
