"""What presence and typing cost, counted: Redis commands per socket per minute, and
frames per typing burst. The ceilings are the figures of docs/PERFORMANCE.md."""

from __future__ import annotations

import asyncio
import math
import time

import pytest
import redis

from messaging.transport import presence as presence_module
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


OWN = {"PING", "HELLO", "CLIENT"}


def sent_commands(server, during):
    """The commands clients sent `server` while `during()` ran (MONITOR; those a script ran are not sent)."""
    import threading

    client = redis.Redis(port=server.port)
    sent: list[list[str]] = []
    ready, stop = threading.Event(), threading.Event()

    def listen():
        with client.monitor() as monitor:
            ready.set()
            for command in monitor.listen():
                if stop.is_set() and command["command"] == "PING":
                    return
                words = command["command"].split(" ")
                # Not the script's commands, nor what a connection says of itself.
                if command.get("client_type") != "lua" and words[0].strip('"').upper() not in OWN:
                    sent.append(words)

    thread = threading.Thread(target=listen, daemon=True)
    thread.start()
    ready.wait(5)

    async def run():
        await during()
        # MONITOR relays in order: once our PING comes through, so has everything before it.
        stop.set()
        client.ping()
        await asyncio.to_thread(thread.join, 5)
        return sent

    return run()


@pytest.mark.parametrize("users", [10, 2000])
async def test_a_heartbeat_sends_the_same_few_commands_however_many_users(own_redis, users):
    presence = Presence(own_redis.url, timeout=0.5, ttl=30, beat=10, rooms=10)
    presence.send_presence = no_rooms
    await asyncio.gather(*(presence.opened(user) for user in range(users)))
    presence.beating.cancel()
    await presence.heartbeat()  # loads the script
    check = redis.Redis(port=own_redis.port)
    before = {user: check.zscore(presence.user_set(str(user)), presence.process) for user in range(users)}
    sent = await sent_commands(own_redis, presence.heartbeat)
    # The process's own entry and set, and one script call for every user's.
    assert sorted(command[0].strip('"').lower() for command in sent) == ["evalsha", "expire", "zadd"]
    after = {user: check.zscore(presence.user_set(str(user)), presence.process) for user in range(users)}
    assert all(after[user] > before[user] for user in range(users)), "every user's entry is renewed"
    assert all(0 < check.ttl(presence.user_set(str(user))) <= 31 for user in range(users))


async def test_a_heartbeat_calls_the_script_once_per_chunk_in_one_pipeline(own_redis, monkeypatch):
    monkeypatch.setattr(presence_module, "RENEW_CHUNK", 40)
    presence = Presence(own_redis.url, timeout=0.5, ttl=30, beat=10, rooms=10)
    presence.send_presence = no_rooms
    for user in range(100):
        await presence.opened(user)
    presence.beating.cancel()
    await presence.heartbeat()
    round_trips = 0
    real_execute = redis.asyncio.client.Pipeline.execute

    async def counting_execute(self, *args, **kwargs):
        nonlocal round_trips
        round_trips += 1
        return await real_execute(self, *args, **kwargs)

    monkeypatch.setattr(redis.asyncio.client.Pipeline, "execute", counting_execute)
    sent = await sent_commands(own_redis, presence.heartbeat)
    assert [c[0].strip('"').lower() for c in sent].count("evalsha") == 3
    assert round_trips == 1
    keys = {key.strip('"') for command in sent if command[0].strip('"').lower() == "evalsha" for key in command[3:-3]}
    assert keys == {presence.user_set(str(user)) for user in range(100)}


async def test_a_user_whose_last_socket_closed_leaves_the_heartbeat(own_redis):
    presence = Presence(own_redis.url, timeout=0.5, ttl=30, beat=10, rooms=10)
    presence.send_presence = no_rooms
    for user in (1, 2, 2, 3):
        await presence.opened(user)
    presence.beating.cancel()
    await presence.closed(2)
    await presence.heartbeat()
    check = redis.Redis(port=own_redis.port)
    assert check.zscore(presence.user_set("2"), presence.process) is not None, "one of the user's sockets is open"
    await presence.closed(2)
    sent = await sent_commands(own_redis, presence.heartbeat)
    [script] = [c for c in sent if c[0].strip('"').lower() == "evalsha"]
    assert {key.strip('"') for key in script[3:-3]} == {presence.user_set("1"), presence.user_set("3")}
    assert check.zscore(presence.user_set("2"), presence.process) is None
    assert presence.sockets == {"1": 1, "3": 1}


async def test_a_redis_that_forgot_the_script_is_given_it_again(own_redis):
    presence = Presence(own_redis.url, timeout=0.5, ttl=30, beat=10, rooms=10)
    presence.send_presence = no_rooms
    await presence.opened(1)
    presence.beating.cancel()
    await presence.heartbeat()
    check = redis.Redis(port=own_redis.port)
    check.script_flush()
    check.zadd(presence.user_set("1"), {presence.process: 0})
    await presence.heartbeat()
    assert check.zscore(presence.user_set("1"), presence.process) > time.time()
