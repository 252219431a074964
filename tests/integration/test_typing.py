"""Typing (PROTOCOL.md 1.1): ephemeral frames to the room's other members, with a
real clock: a `true` lapses after 6 s, at most one goes out per 2 s, a post ends it."""

from __future__ import annotations

import asyncio
import time

import pytest
from channels.db import database_sync_to_async

from messaging.models import CommandRecord, Message

pytestmark = [pytest.mark.django_db(transaction=True)]


async def room_of_two(open_clients, make_user):
    ana, bob = await open_clients(await make_user("ana")), await open_clients(await make_user("bob"))
    for client in (ana, bob):
        await client.join("lobby")
    return ana, bob


async def typing(client, value: bool = True) -> None:
    ack = await client.call("typing", {"room": "lobby", "typing": value})
    assert ack["ok"] and ack["d"] == {"room": "lobby"}, ack


async def test_the_others_hear_it_and_the_typist_does_not(make_user, open_clients):
    ana, bob = await room_of_two(open_clients, make_user)
    ana_elsewhere = await open_clients(ana.user)
    await ana_elsewhere.join("lobby")
    await typing(ana)
    [frame] = await bob.frames("typing", 1)
    assert frame["d"] == {"user": ana.user.pk, "room": "lobby", "name": "ana", "typing": True}
    await typing(ana, False)
    [frame] = await bob.frames("typing", 1)
    assert frame["d"]["typing"] is False
    assert await ana.nothing_more() and await ana_elsewhere.nothing_more()
    # Never stored, never deduplicated: the same id twice is two commands, no record.
    for _ in range(2):
        assert (await ana.call("typing", {"room": "lobby", "typing": False}, id="same"))["dup"] is False
    assert await database_sync_to_async(CommandRecord.objects.count)() == 0


async def test_a_burst_sends_one_frame_per_two_seconds(make_user, open_clients):
    ana, bob = await room_of_two(open_clients, make_user)
    started = time.monotonic()
    for _ in range(10):
        await typing(ana)
    elapsed = time.monotonic() - started
    heard = await bob.frames("typing", 1)
    if elapsed < 2:
        # The whole burst within the throttle: one frame, nothing more.
        assert await bob.nothing_more(0.5)
    assert heard[0]["d"]["typing"] is True
    await asyncio.sleep(2.1)
    await typing(ana)
    [again] = await bob.frames("typing", 1)
    assert again["d"]["typing"] is True


async def test_it_lapses_after_six_seconds_with_a_false(make_user, open_clients):
    ana, bob = await room_of_two(open_clients, make_user)
    await typing(ana)
    await bob.frames("typing", 1)
    started = time.monotonic()
    [lapsed] = await bob.frames("typing", 1, timeout=15)
    assert lapsed["d"]["typing"] is False and lapsed["d"]["user"] == ana.user.pk
    assert time.monotonic() - started > 5


async def test_repeating_it_keeps_it_alive(make_user, open_clients):
    ana, bob = await room_of_two(open_clients, make_user)
    await typing(ana)
    await bob.frames("typing", 1)
    for _ in range(3):
        await asyncio.sleep(3)
        await typing(ana)
    # 9 s after the first, still typing: every frame heard says so.
    frames = await bob.frames("typing", 3)
    assert all(f["d"]["typing"] for f in frames)


async def test_a_post_ends_it(make_user, open_clients):
    ana, bob = await room_of_two(open_clients, make_user)
    await typing(ana)
    await bob.frames("typing", 1)
    assert (await ana.call("room.post", {"room": "lobby", "body": "done typing"}))["ok"]
    [ended] = await bob.frames("typing", 1, timeout=3)
    assert ended["d"]["typing"] is False
    # Ended: no lapse follows.
    assert await bob.frames("msg", 1)
    await asyncio.sleep(6.5)
    assert await bob.nothing_more()


async def test_non_members_and_bad_data_are_refused(make_user, open_clients):
    ana, bob = await room_of_two(open_clients, make_user)
    eve = await open_clients(await make_user("eve"))
    assert (await eve.call("typing", {"room": "lobby", "typing": True}))["error"]["code"] == "forbidden"
    for d in ({"room": "lobby"}, {"room": "lobby", "typing": 1}, {"room": "Lobby", "typing": True}):
        assert (await ana.call("typing", d))["error"]["code"] == "invalid"
    assert await bob.nothing_more()
    assert await database_sync_to_async(Message.objects.count)() == 0


async def test_past_the_limit_of_states_it_is_rate_limited(make_user, open_clients, settings):
    settings.MESSAGING = {**settings.MESSAGING, "TYPING_STATES": 1}
    ana, bob = await room_of_two(open_clients, make_user)
    await typing(ana)
    ack = await bob.call("typing", {"room": "lobby", "typing": True})
    assert ack["error"]["code"] == "rate_limited" and ack["error"]["retry"] is True
    # The one typing still works.
    await typing(ana, False)
    await typing(bob)
