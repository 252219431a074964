"""What presence and typing cost, counted: Redis commands per socket per minute, and
frames per typing burst. The ceilings are the figures of docs/PERFORMANCE.md."""

from __future__ import annotations

import asyncio
import math
import time

import pytest
import redis

from messaging.transport.presence import Presence

# Per socket per minute, with one socket per user: six beats of two commands
# each (ZADD, EXPIRE), plus each beat's share of the process's own three
# (its ZADD and EXPIRE, the ZRANGEBYSCORE that looks for dead processes).
PRESENCE_COMMANDS_PER_SOCKET_PER_MINUTE = 12.5
# Round trips per process per beat, whatever its users: the renewal, the look for dead processes.
PRESENCE_ROUND_TRIPS_PER_BEAT = 2
# A socket's open and close: the write and the count, each one pipeline.
OPEN_COMMANDS, CLOSE_COMMANDS = 5, 3

pytestmark = [pytest.mark.django_db(transaction=True)]


async def no_rooms(user_id, online, at) -> None:
    pass


def commands(server) -> int:
    """Commands the private Redis server has processed: INFO's count, but for its own
    INFO calls and what each new connection says of itself (HELLO, CLIENT SETINFO)."""
    info = redis.Redis(port=server.port).info("commandstats")
    return sum(
        v["calls"]
        for k, v in info.items()
        if k not in ("cmdstat_info", "cmdstat_hello") and not k.startswith("cmdstat_client")
    )


async def test_presence_costs_a_bounded_number_of_redis_commands_per_socket_per_minute(own_redis):
    users = 100
    presence = Presence(own_redis.url, timeout=0.5, ttl=30, beat=10, rooms=10)
    presence.send_presence = no_rooms  # the frames are the hub's cost, not presence's
    before = commands(own_redis)
    for user in range(users):
        await presence.opened(user)
    opened = commands(own_redis)
    assert opened - before <= OPEN_COMMANDS * users
    presence.beating.cancel()
    round_trips = 0
    real_execute = redis.asyncio.client.Pipeline.execute

    async def counting_execute(self, *args, **kwargs):
        nonlocal round_trips
        round_trips += 1
        return await real_execute(self, *args, **kwargs)

    redis.asyncio.client.Pipeline.execute = counting_execute
    try:
        for _ in range(6):  # a minute of beats
            await presence.heartbeat()
            await presence.reap()
    finally:
        redis.asyncio.client.Pipeline.execute = real_execute
    per_socket = (commands(own_redis) - opened) / users
    assert per_socket <= PRESENCE_COMMANDS_PER_SOCKET_PER_MINUTE, per_socket
    # The pipelined renewal, and the reap's lookup (a plain call, not a pipeline): one a beat.
    assert round_trips <= 6 * (PRESENCE_ROUND_TRIPS_PER_BEAT - 1)
    closing = commands(own_redis)
    for user in range(users):
        await presence.closed(user)
    assert commands(own_redis) - closing <= CLOSE_COMMANDS * users


async def test_a_member_list_asks_redis_once_whatever_its_length(own_redis):
    writer = Presence(own_redis.url, timeout=0.5, ttl=30, beat=10, rooms=10)
    writer.send_presence = no_rooms
    for user in range(0, 100, 2):
        await writer.opened(user)
    writer.beating.cancel()
    # Another process's users: only Redis knows them.
    reader = Presence(own_redis.url, timeout=0.5, ttl=30, beat=10, rooms=10)
    round_trips = 0
    real_execute = redis.asyncio.client.Pipeline.execute

    async def counting_execute(self, *args, **kwargs):
        nonlocal round_trips
        round_trips += 1
        return await real_execute(self, *args, **kwargs)

    redis.asyncio.client.Pipeline.execute = counting_execute
    try:
        online = await reader.online(list(range(100)))
    finally:
        redis.asyncio.client.Pipeline.execute = real_execute
    assert online == {str(u) for u in range(0, 100, 2)}
    assert round_trips == 1


async def test_a_typing_burst_costs_a_frame_per_two_seconds(make_user, open_clients):
    ana, bob = await open_clients(await make_user("ana")), await open_clients(await make_user("bob"))
    for client in (ana, bob):
        await client.join("lobby")
    started = time.monotonic()
    sent = 0
    while time.monotonic() - started < 4.5:
        assert (await ana.call("typing", {"room": "lobby", "typing": True}))["ok"]
        sent += 1
        await asyncio.sleep(0.25)
    duration = time.monotonic() - started
    assert (await ana.call("typing", {"room": "lobby", "typing": False}))["ok"]
    # A post after it: the room's frames keep their order, so once it is here every typing frame is.
    assert (await ana.call("room.post", {"room": "lobby", "body": "sent"}))["ok"]
    await bob.frames("msg", 1)
    heard = [f for f in bob.inbox if f["t"] == "typing"]
    ceiling = math.ceil(duration / 2) + 1  # the trues, one per 2 s, and the false
    assert sent >= 15 and len(heard) <= ceiling, (sent, len(heard))
    assert heard[-1]["d"]["typing"] is False
