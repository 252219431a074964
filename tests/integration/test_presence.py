"""Presence (PROTOCOL.md 1.1): `presence` frames on a user's first socket's open and
last one's close, `online` in member lists, a dead process's users taken offline."""

from __future__ import annotations

import asyncio

import pytest
from channels.db import database_sync_to_async

from messaging.models import Membership, Room
from messaging.transport.presence import WRITE_CHUNK, Presence

pytestmark = [pytest.mark.django_db(transaction=True)]


@database_sync_to_async
def make_member(user, *rooms: str) -> None:
    """Membership without a socket, so no presence frame comes of it."""
    for slug in rooms:
        room, _ = Room.objects.get_or_create(slug=slug)
        Membership.objects.get_or_create(room=room, user=user)


async def member_of_lobby(open_clients, make_user, name: str):
    """A user who is a member of the lobby, and has no socket open."""
    user = await make_user(name)
    await make_member(user, "lobby")
    return user


async def watcher(open_clients, make_user):
    bob = await open_clients(await make_user("bob"))
    await bob.join("lobby")
    return bob


async def test_first_open_and_last_close_are_told_once(make_user, open_clients):
    ana = await member_of_lobby(open_clients, make_user, "ana")
    bob = await watcher(open_clients, make_user)
    first = await open_clients(ana)
    [online] = await bob.frames("presence", 1)
    assert online["d"] == {"room": "lobby", "user": ana.pk, "online": True}
    second = await open_clients(ana)
    await second.close()
    assert await bob.nothing_more(0.5)
    members = (await bob.call("room.members", {"room": "lobby"}))["d"]["members"]
    assert {m["user"]: m["online"] for m in members} == {ana.pk: True, bob.user.pk: True}
    await first.close()
    [offline] = await bob.frames("presence", 1)
    assert offline["d"] == {"room": "lobby", "user": ana.pk, "online": False}
    members = (await bob.call("room.members", {"room": "lobby"}))["d"]["members"]
    assert {m["user"]: m["online"] for m in members} == {ana.pk: False, bob.user.pk: True}
    ack = await bob.join("lobby")
    assert {m["user"]: m["online"] for m in ack["d"]["members"]} == {ana.pk: False, bob.user.pk: True}


async def test_without_redis_presence_holds_within_the_process(make_user, open_clients, settings):
    settings.MESSAGING = {**settings.MESSAGING, "REDIS_URL": None}
    ana = await member_of_lobby(open_clients, make_user, "ana")
    bob = await watcher(open_clients, make_user)
    socket = await open_clients(ana)
    assert (await bob.frames("presence", 1))[0]["d"]["online"] is True
    assert {m["user"]: m["online"] for m in (await bob.join("lobby"))["d"]["members"]}[ana.pk] is True
    await socket.close()
    assert (await bob.frames("presence", 1))[0]["d"]["online"] is False


async def test_a_user_on_two_processes_stays_online_until_the_last_closes(make_user, open_clients, settings):
    # Two processes' presences on one Redis; the hub carries their frames.
    ana = await member_of_lobby(open_clients, make_user, "ana")
    bob = await watcher(open_clients, make_user)
    url = settings.MESSAGING["REDIS_URL"]
    a, b = (Presence(url, timeout=0.5, ttl=30, beat=10, rooms=10) for _ in range(2))
    await a.opened(ana.pk)
    assert (await bob.frames("presence", 1))[0]["d"]["online"] is True
    await b.opened(ana.pk)
    await a.closed(ana.pk)
    assert await bob.nothing_more(0.5)
    assert await a.online([ana.pk]) == {str(ana.pk)}
    await b.closed(ana.pk)
    assert (await bob.frames("presence", 1))[0]["d"]["online"] is False
    assert await a.online([ana.pk]) == set()


async def test_a_process_that_stops_beating_takes_its_users_offline(make_user, open_clients, settings):
    ana = await member_of_lobby(open_clients, make_user, "ana")
    bob = await watcher(open_clients, make_user)
    url = settings.MESSAGING["REDIS_URL"]
    dead = Presence(url, timeout=0.5, ttl=2, beat=0.5, rooms=10)
    alive = Presence(url, timeout=0.5, ttl=2, beat=0.5, rooms=10)
    await dead.opened(ana.pk)
    assert (await bob.frames("presence", 1))[0]["d"]["online"] is True
    await dead.heartbeat()
    # It dies: no beat, no close, its memory gone. A living process's beats find it.
    dead.beating.cancel()
    dead.sockets.clear()
    await alive.opened(bob.user.pk)
    [offline] = await bob.frames("presence", 1, timeout=10)
    assert offline["d"] == {"room": "lobby", "user": ana.pk, "online": False}
    assert await alive.online([ana.pk]) == set()
    alive.beating.cancel()


async def test_presence_frames_go_to_at_most_presence_rooms(make_user, open_clients, settings):
    settings.MESSAGING = {**settings.MESSAGING, "PRESENCE_ROOMS": 2}
    ana_user = await make_user("ana")
    for room in ("r1", "r2", "r3"):
        await make_member(ana_user, room)
    bob = await open_clients(await make_user("bob"))
    for room in ("r1", "r2", "r3"):
        await bob.join(room)
    await open_clients(ana_user)
    frames = await bob.frames("presence", 2)
    # The newest two rooms ana joined.
    assert sorted(f["d"]["room"] for f in frames) == ["r2", "r3"]
    assert await bob.nothing_more(0.5)


async def test_member_lists_from_code_and_over_http_say_who_is_online(make_user, open_clients):
    from messaging import asubmit

    ana = await member_of_lobby(open_clients, make_user, "ana")
    bob = await watcher(open_clients, make_user)
    for t in ("room.members", "room.join"):
        ack = await asubmit(ana, t, {"room": "lobby"}, id=t.replace(".", "-"))
        assert ack["ok"], ack
        assert {m["user"]: m["online"] for m in ack["d"]["members"]} == {ana.pk: False, bob.user.pk: True}


async def test_with_redis_failing_presence_answers_from_the_process(make_user):
    # Nothing listens on port 1: every call fails, as a Redis that is gone does.
    ana, bob = await make_user("ana"), await make_user("bob")
    failing = Presence("redis://127.0.0.1:1/0", timeout=0.2, ttl=30, beat=10, rooms=10)
    await failing.opened(ana.pk)
    assert await failing.online([ana.pk, bob.pk]) == {str(ana.pk)}, "this process's own sockets answer"
    assert await failing.write(str(bob.pk), add=True) == 0
    failing.close()


async def test_a_storm_of_opens_and_closes_is_written_whole(settings, caplog):
    """2,500 users' first sockets open at once on a process, then close (a
    restart's reconnects, a mass disconnect): more than the loop's pool of 100
    Redis connections, more than `WRITE_CHUNK` users a pipeline. Each user's
    entry is written and then taken out, as another process reads them."""
    url = settings.MESSAGING["REDIS_URL"]
    here, elsewhere = (Presence(url, timeout=2, ttl=30, beat=10, rooms=10) for _ in range(2))
    # Ids no user has: their presence frames go to no room.
    users = list(range(10**9, 10**9 + 2500))
    assert len(users) > 2 * WRITE_CHUNK
    await asyncio.gather(*(here.opened(user) for user in users))
    assert await elsewhere.online(users) == {str(user) for user in users}
    await asyncio.gather(*(here.closed(user) for user in users))
    assert await elsewhere.online(users) == set()
    assert "not written to Redis" not in caplog.text
    here.close()


async def test_a_user_opening_and_closing_in_one_storm_ends_offline(settings):
    """A user's close queues behind their open (in turn), even while other
    users' writes fill the pipelines: the last entry Redis holds is the close."""
    url = settings.MESSAGING["REDIS_URL"]
    here, elsewhere = (Presence(url, timeout=2, ttl=30, beat=10, rooms=10) for _ in range(2))
    others = list(range(10**9, 10**9 + WRITE_CHUNK + 10))
    flickering = 10**9 + 5000
    await asyncio.gather(*(here.opened(user) for user in others), here.opened(flickering), here.closed(flickering))
    assert await elsewhere.online([flickering, *others]) == {str(user) for user in others}
    await asyncio.gather(*(here.closed(user) for user in others))
    here.close()
