"""Live frames come back after Redis does, without the sockets joining again
(messaging/transport/subscriptions.py): a subscription that failed during a
join, or a connection that dropped, is subscribed again with backoff."""

from __future__ import annotations

import asyncio
import json
import uuid

import pytest
from asgiref.sync import sync_to_async

from messaging.testing import SocketClient
from messaging_client import sign_in

from ..support.servers import RedisServer
from .conftest import FAULT_SETTINGS

pytestmark = [pytest.mark.e2e]


async def live_msgs(ws: SocketClient, room: str, timeout: float) -> list[int]:
    """The seqs of the `msg` frames of `room` that arrive within `timeout`, in arrival order."""
    seqs = []
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while (left := deadline - loop.time()) > 0:
        try:
            frame = json.loads(await asyncio.wait_for(ws.ws.recv(), left))
        except TimeoutError:
            break
        if frame.get("t") == "msg" and frame["d"]["room"] == room:
            seqs.append(frame["d"]["seq"])
    return seqs


async def post(poster: SocketClient, room: str, body: str) -> dict:
    """One post, resent with its id after a `retry: true` refusal, as an outbox does; its ok ack."""
    id = uuid.uuid4().hex
    for _ in range(20):
        ack = await poster.call("room.post", {"room": room, "body": body}, id=id)
        if ack["ok"]:
            return ack
        assert ack["error"]["retry"], ack
        await asyncio.sleep(0.5)
    raise AssertionError(f"{id} was refused 20 times: {ack}")


async def post_until_heard(poster: SocketClient, listener: SocketClient, room: str, attempts: int = 40) -> int:
    """Post until `listener` hears a post live; the seq it heard. Posts made
    before the subscription is back are lost to live delivery (clients fetch
    them by seq), so the first ones may go unheard."""
    for n in range(attempts):
        ack = await post(poster, room, f"probe {n}")
        heard = await live_msgs(listener, room, 1.0)
        if heard:
            # A probe's publish retried meanwhile may come just before: in order, once each.
            assert heard == sorted(set(heard)) and heard[-1] <= ack["d"]["seq"], heard
            return heard[-1]
    raise AssertionError(f"no live frame reached the listener in {attempts} posts")


async def then_every_post_arrives_once_in_order(poster: SocketClient, listener: SocketClient, room: str) -> None:
    seqs = []
    for n in range(5):
        seqs.append((await post(poster, room, f"after {n}"))["d"]["seq"])
    heard: list[int] = []
    while seqs[-1] not in heard:
        more = await live_msgs(listener, room, 10)
        assert more, f"heard {heard} of {seqs}"
        heard += more
    assert heard == sorted(set(heard)), "in order, once each"
    assert [seq for seq in heard if seq >= seqs[0]] == seqs, "every one of them"


async def test_a_join_while_redis_is_down_gets_live_frames_once_it_is_back(start_daphne, tmp_path):
    redis_server = RedisServer(tmp_path).start()
    try:
        a, b = (start_daphne(REDIS_URL=redis_server.url, **FAULT_SETTINGS) for _ in range(2))
        ana = await SocketClient(a.url, await sync_to_async(sign_in)(a.url, "ana")).connect()
        assert (await ana.call("room.join", {"room": "lobby"}))["ok"]
        redis_server.stop()
        # Bob connects and joins while Redis is away: the join itself works
        # (the database path), the subscription cannot be made yet.
        bob = await SocketClient(b.url, await sync_to_async(sign_in)(b.url, "bob")).connect()
        assert (await bob.call("room.join", {"room": "lobby"}))["ok"]
        redis_server.start()
        # No new join: the listener subscribes the wanted channel on its own.
        await post_until_heard(ana, bob, "lobby")
        await then_every_post_arrives_once_in_order(ana, bob, "lobby")
        await ana.close()
        await bob.close()
    finally:
        redis_server.stop()


async def test_live_frames_resume_after_redis_restarts_under_joined_sockets(start_daphne, tmp_path):
    redis_server = RedisServer(tmp_path).start()
    try:
        a, b = (start_daphne(REDIS_URL=redis_server.url, **FAULT_SETTINGS) for _ in range(2))
        ana = await SocketClient(a.url, await sync_to_async(sign_in)(a.url, "ana")).connect()
        bob = await SocketClient(b.url, await sync_to_async(sign_in)(b.url, "bob")).connect()
        for ws in (ana, bob):
            assert (await ws.call("room.join", {"room": "lobby"}))["ok"]
        await post_until_heard(ana, bob, "lobby", attempts=1)
        redis_server.stop()
        ack = await ana.call("room.post", {"room": "lobby", "body": "while redis is away"})
        assert ack["ok"], "commands go on through the database path"
        redis_server.start()  # empty: it knows no subscriber
        await post_until_heard(ana, bob, "lobby")
        await then_every_post_arrives_once_in_order(ana, bob, "lobby")
        # And the other way: bob's process publishes, ana's hears.
        await post_until_heard(bob, ana, "lobby")
        await ana.close()
        await bob.close()
    finally:
        redis_server.stop()
