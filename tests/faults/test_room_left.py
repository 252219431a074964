"""`room.left` delivered reliably: a member removed from a private room stops hearing it on every
process, even when Redis Pub/Sub loses the `room.left` frame on its way.

Two daphne processes on a Redis of the test's own, each signed in to it as a
Redis user of its own (ACL), so that one process alone can be cut off: its
user disabled and its connections killed (`CLIENT KILL USER`), as a network
partition between it and Redis would. While one process is cut off, the
other removes bob from a private room and publishes his `room.left`:

- the process holding bob's socket was cut off: its subscription was down
  when the frame went out. When it is back, it checks its sockets' private
  rooms against the database before it hands on anything it hears;
- the process publishing it was cut off: the publish fails, and is tried
  again before anything queued after it.

Either way bob's socket gets `room.left`, and no frame of the room posted
after the removal (before: every one of them, until bob reconnected).
"""

from __future__ import annotations

import asyncio
import json
import uuid

import pytest
import redis
from asgiref.sync import sync_to_async

from messaging.testing import SocketClient
from messaging_client import sign_in

from ..support.servers import wait_until
from .conftest import FAULT_SETTINGS
from .test_resubscribe import post, post_until_heard

pytestmark = [pytest.mark.e2e]

PASSWORD = "fault-secret"


class RedisUsers:
    """Redis users of the fault Redis, one per process, each of which can be cut off and let back."""

    def __init__(self, server) -> None:
        self.server = server
        self.admin = redis.Redis(port=server.port, socket_timeout=5)

    def url(self, name: str) -> str:
        self.admin.execute_command("ACL", "SETUSER", name, "on", f">{PASSWORD}", "~*", "&*", "+@all")
        return f"redis://{name}:{PASSWORD}@127.0.0.1:{self.server.port}/0"

    def cut_off(self, name: str) -> None:
        self.admin.execute_command("ACL", "SETUSER", name, "off")
        self.admin.execute_command("CLIENT", "KILL", "USER", name)

    def let_back(self, name: str) -> None:
        self.admin.execute_command("ACL", "SETUSER", name, "on")

    def close(self) -> None:
        self.admin.close()


@pytest.fixture
def redis_users(fault_redis):
    users = RedisUsers(fault_redis)
    yield users
    users.close()


async def signed_in(server, name: str) -> SocketClient:
    return await SocketClient(server.url, await sync_to_async(sign_in)(server.url, name)).connect()


@pytest.fixture
async def sockets(start_daphne, redis_users):
    """Ana on process A (Redis user `process-a`); bob and cat on process B (`process-b`)."""
    a = start_daphne(REDIS_URL=redis_users.url("process-a"), **FAULT_SETTINGS)
    b = start_daphne(REDIS_URL=redis_users.url("process-b"), **FAULT_SETTINGS)
    opened = [await signed_in(a, "ana"), await signed_in(b, "bob"), await signed_in(b, "cat")]
    yield a, *opened
    for ws in opened:
        await ws.close()


async def frames_within(ws: SocketClient, seconds: float) -> list[dict]:
    """Every frame that arrives within `seconds` (after those already in the inbox)."""
    frames, ws.inbox = ws.inbox, []
    loop = asyncio.get_running_loop()
    deadline = loop.time() + seconds
    while (left := deadline - loop.time()) > 0:
        try:
            frames.append(json.loads(await asyncio.wait_for(ws.ws.recv(), left)))
        except TimeoutError:
            break
    return frames


async def private_room_with_bob(ana: SocketClient, bob: SocketClient, room: str) -> int:
    """A private room of ana's that bob has joined and hears live; bob's user id."""
    bob_id = (await bob.call("room.join", {"room": f"own-{uuid.uuid4().hex[:8]}"}))["d"]["members"][0]["user"]
    assert (await ana.call("room.create", {"room": room, "private": True}))["ok"]
    assert (await ana.call("room.invite", {"room": room, "user": bob_id}))["ok"]
    assert (await bob.call("room.join", {"room": room}))["ok"]
    await post_until_heard(ana, bob, room, attempts=10)
    return bob_id


async def last_message_before_removal(ana: SocketClient, listeners: tuple[SocketClient, ...], room: str) -> int:
    """Ana posts once more, the listeners hear it; its seq. Bob's inbox is emptied: what comes next is after."""
    seq = (await post(ana, room, "the last bob may read"))["d"]["seq"]
    for ws in listeners:
        await ws.messages_until(room, seq)
    listeners[0].inbox.clear()
    return seq


def room_frames_after_removal(frames: list[dict], room: str, seq: int) -> list[dict]:
    """The frames of `room` a removed member got: its messages after `seq`, and anything of it but `room.left`."""
    return [
        f
        for f in frames
        if f.get("d", {}).get("room") == room
        and f["t"] != "room.left"
        and not (f["t"] == "msg" and f["d"]["seq"] <= seq)
    ]


async def test_a_process_whose_subscription_was_down_finds_the_removal_before_it_hands_on_a_frame(sockets, redis_users):
    _, ana, bob, cat = sockets
    bob_id = await private_room_with_bob(ana, bob, "secret")
    # Cat, on bob's process, hears a public room: a witness of its subscription.
    for ws in (ana, cat):
        assert (await ws.call("room.join", {"room": "probe"}))["ok"]
    await post_until_heard(ana, cat, "probe", attempts=10)
    removed_at = await last_message_before_removal(ana, (bob,), "secret")

    redis_users.cut_off("process-b")
    assert (await ana.call("room.remove", {"room": "secret", "user": bob_id}))["ok"]
    assert (await ana.call("typing", {"room": "secret", "typing": True}))["ok"]
    await post(ana, "secret", "while bob's process is away")
    redis_users.let_back("process-b")

    # Once cat hears the probe room again, bob's process is subscribed again.
    await post_until_heard(ana, cat, "probe", attempts=40)
    for n in range(3):
        await post(ana, "secret", f"after the removal {n}")
    assert (await ana.call("typing", {"room": "secret", "typing": True}))["ok"]
    # In order on one connection: once cat hears this, bob heard all the above.
    await post_until_heard(ana, cat, "probe", attempts=10)
    frames = await frames_within(bob, 1.0)
    assert [f["d"] for f in frames if f["t"] == "room.left"] == [{"room": "secret", "user": bob_id, "by": None}]
    assert room_frames_after_removal(frames, "secret", removed_at) == []
    assert (await bob.call("room.history", {"room": "secret", "before": 100}))["error"]["code"] == "forbidden"


async def test_a_room_left_whose_publish_failed_goes_out_before_the_rooms_next_frames(sockets, redis_users):
    a, ana, bob, cat = sockets
    bob_id = await private_room_with_bob(ana, bob, "secret")
    # Cat, a member on bob's process, witnesses what that process hears of the room.
    cat_id = (await cat.call("room.join", {"room": "own-cat"}))["d"]["members"][0]["user"]
    assert (await ana.call("room.invite", {"room": "secret", "user": cat_id}))["ok"]
    assert (await cat.call("room.join", {"room": "secret"}))["ok"]
    removed_at = await last_message_before_removal(ana, (bob, cat), "secret")

    # Ana's process cannot publish: the removal commits, its room.left waits.
    redis_users.cut_off("process-a")
    assert (await ana.call("room.remove", {"room": "secret", "user": bob_id}))["ok"]
    await sync_to_async(wait_until)(lambda: "Redis publish failed" in a.log(), 15, "the failed publish")
    redis_users.let_back("process-a")
    for n in range(3):
        await post(ana, "secret", f"after the removal {n}")
    # In order on one connection: once cat heard them, so did bob's socket.
    await cat.messages_until("secret", removed_at + 3, timeout=30)
    frames = await frames_within(bob, 1.0)
    left = [f["d"] for f in frames if f["t"] == "room.left"]
    assert len(left) == 1, f"the room.left, published once Redis took it: {frames}"
    assert left[0]["user"] == bob_id and left[0]["by"]["name"] == "ana"
    assert room_frames_after_removal(frames, "secret", removed_at) == []
