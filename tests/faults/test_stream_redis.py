"""An event stream (`GET /api/stream`) while Redis is away, as a socket is (test_resubscribe.py):
the stream starts and stays open, and live frames come back with Redis, once each, in order."""

from __future__ import annotations

import asyncio
import json

import pytest
from asgiref.sync import sync_to_async

from messaging.testing import SocketClient

from ..e2e.test_event_stream import Stream, user_with_token
from ..support.servers import RedisServer
from .conftest import FAULT_SETTINGS
from .test_resubscribe import post

pytestmark = [pytest.mark.e2e]


async def stream_msgs(stream: Stream, timeout: float) -> list[int]:
    """The seqs of the `msg` events that arrive within `timeout`."""
    seqs = []
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while (left := deadline - loop.time()) > 0:
        try:
            fields = await stream.event(left)
        except TimeoutError:
            break
        assert fields is not None, "the stream ended"
        if fields["event"] == "msg":
            seqs.append(json.loads(fields["data"])["d"]["seq"])
    return seqs


async def test_a_stream_opened_while_redis_is_down_starts_and_hears_the_room_once_it_is_back(start_daphne, tmp_path):
    redis_server = RedisServer(tmp_path).start()
    try:
        a, b = (start_daphne(REDIS_URL=redis_server.url, **FAULT_SETTINGS) for _ in range(2))
        ana_token, bob_token = await sync_to_async(user_with_token)("ana"), await sync_to_async(user_with_token)("bob")
        ana = await SocketClient(a.url, token=ana_token).connect()
        assert (await ana.call("room.join", {"room": "lobby"}))["ok"]
        redis_server.stop()
        stream = await Stream.open(b.url, "/api/stream?rooms=lobby", bob_token)
        assert stream.status == 200 and (await stream.event())["event"] == "ready"
        redis_server.start()
        heard: list[int] = []
        for n in range(40):
            seq = (await post(ana, "lobby", f"probe {n}"))["d"]["seq"]
            heard = await stream_msgs(stream, 1.0)
            if heard:
                break
        assert heard, "no live event reached the stream"
        seqs = [(await post(ana, "lobby", f"after {n}"))["d"]["seq"] for n in range(5)]
        more: list[int] = []
        while seqs[-1] not in more:
            got = await stream_msgs(stream, 10)
            assert got, f"heard {more} of {seqs}"
            more += got
        assert [s for s in more if s >= seqs[0]] == seqs and seq < seqs[0]
        stream.close()
        await ana.close()
    finally:
        redis_server.stop()
