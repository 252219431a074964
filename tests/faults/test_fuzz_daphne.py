"""Fuzzing a real daphne process: the deployed stack answers every frame or closes as defined.

The consumer fuzz (tests/integration/test_hostile_fuzz.py) runs in the test
harness, which passes any close code through; daphne did not (it turned the
protocol's 1003 and 1008 into 1011), so the same oracle runs here, over TCP.
"""

from __future__ import annotations

import asyncio
import json

import pytest
import websockets
from websockets.exceptions import ConnectionClosed

from messaging_client import sign_in

from ..support.hostile import BROADCASTS, REFUSALS, Oracle, over_hostile_sequences

pytestmark = [pytest.mark.e2e]


@pytest.fixture
def server(cluster):
    (server,) = cluster(1, MESSAGING_USER_RATE_LIMIT=str(10**6))
    return server, sign_in(server.url, "fuzzer")


async def next_answer(ws, id: str | None) -> dict:
    """The ack of `id`, or the next answer of any kind when `id` is None; broadcasts skipped."""
    while True:
        frame = json.loads(await asyncio.wait_for(ws.recv(), 10))
        if frame.get("t") in BROADCASTS:
            continue
        if id is None or (frame.get("t") == "ack" and frame.get("id") == id):
            return frame


async def answers_every_frame(url: str, session: str, sequence: list) -> None:
    async with websockets.connect(
        url.replace("http", "ws") + "/ws/",
        additional_headers={"Cookie": f"sessionid={session}", "Origin": url},
    ) as ws:
        await ws.send(json.dumps({"id": "join", "t": "room.join", "d": {"room": "lobby"}}))
        assert (await next_answer(ws, "join"))["ok"]
        oracle = Oracle(bad_frame_limit=10)
        for frame in sequence:
            await ws.send(frame)
            expected, value = oracle.expect(frame)
            if expected == "ack":
                ack = await next_answer(ws, value)
                assert ack["ok"] or ack["error"]["code"] in REFUSALS, ack
                continue
            if expected == "bad_frame":
                answer = await next_answer(ws, None)
                assert answer["t"] == "error" and answer["error"]["code"] == "bad_frame", answer
            if value is not None:
                with pytest.raises(ConnectionClosed) as closed:
                    await next_answer(ws, None)
                assert closed.value.rcvd is not None and closed.value.rcvd.code == value
                return


@over_hostile_sequences(max_examples=40)
def test_daphne_answers_every_hostile_frame_and_never_sends_1011(server, sequence):
    url, session = server[0].url, server[1]
    asyncio.run(answers_every_frame(url, session, sequence))
