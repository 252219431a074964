"""Who hears a private room, checked against the database (messaging/transport/memberships.py),
with the real consumer, PostgreSQL and Redis: a membership that ends without a
`room.left` reaching its sockets (an admin's delete, a frame lost on its way)
is found, and its sockets hear no more of the room."""

from __future__ import annotations

import asyncio
import os
import time

import pytest
from channels.db import database_sync_to_async

from messaging.models import Membership
from messaging.transport import memberships
from messaging.transport.fanout import RedisHub
from messaging.transport.memberships import MembershipWatch

from ..support.waiting import wait_for

pytestmark = [pytest.mark.django_db(transaction=True)]


@pytest.fixture
def check_often(settings):
    settings.MESSAGING = {**settings.MESSAGING, "MEMBERSHIP_CHECK_INTERVAL": 0.2}


async def private_room_of_ana_and_bob(make_user, open_clients, slug: str = "secret"):
    ana, bob = [await open_clients(await make_user(name)) for name in ("ana", "bob")]
    return await private_room(ana, bob, slug)


async def private_room(ana, bob, slug: str):
    """A private room of ana's, which bob was invited to; both sockets joined to it."""
    assert (await ana.call("room.create", {"room": slug, "private": True}))["ok"]
    assert (await ana.call("room.invite", {"room": slug, "user": bob.user.pk}))["ok"]
    for client in (ana, bob):
        await client.join(slug)
    return ana, bob


@database_sync_to_async
def delete_membership(slug: str, user) -> None:
    """What an admin's delete of the membership does: no command, no frame."""
    Membership.objects.filter(room__slug=slug, user=user).delete()


async def test_a_membership_deleted_without_a_frame_is_found_within_the_interval(make_user, open_clients, check_often):
    ana, bob = await private_room_of_ana_and_bob(make_user, open_clients)
    await private_room(ana, bob, "other")
    for client in (ana, bob):
        await client.join("lobby")
    assert (await ana.call("room.post", {"room": "secret", "body": "before"}))["ok"]
    await bob.messages_until("secret", 1)
    bob.inbox.clear()
    await delete_membership("secret", bob.user)
    await delete_membership("lobby", bob.user)  # public: anyone may join it again, and hear it
    (left,) = await bob.frames("room.left", 1, timeout=15)
    assert left["d"] == {"room": "secret", "user": bob.user.pk, "by": None}
    assert (await ana.call("room.post", {"room": "secret", "body": "after"}))["ok"]
    assert (await ana.call("typing", {"room": "secret", "typing": True}))["ok"]
    await ana.messages_until("secret", 2)
    # Several checks later, what bob still may hear he hears, and nothing more of the room he left.
    await asyncio.sleep(1.0)
    for room in ("other", "lobby"):
        assert (await ana.call("room.post", {"room": room, "body": f"still in {room}"}))["ok"]
        assert (await bob.messages_until(room, 1))[1]["d"]["body"] == f"still in {room}"
    assert [f for f in bob.inbox if f.get("d", {}).get("room") == "secret"] == []
    assert await bob.comm.receive_nothing(timeout=0.5)


class Socket:
    """A socket as the watch sees one, with what it was told."""

    def __init__(self, user) -> None:
        self.user = user
        self.ended: list[str] = []

    async def membership_ended(self, room: str, text: str) -> None:
        self.ended.append(room)


async def test_a_check_in_batches_tells_exactly_the_sockets_of_ended_memberships(make_user, open_clients, monkeypatch):
    monkeypatch.setattr(memberships, "CHECK_BATCH", 3)
    ana, bob = await private_room_of_ana_and_bob(make_user, open_clients, "one")
    await private_room(ana, bob, "two")
    watch = MembershipWatch(interval=0)
    sockets = {
        (room, who): Socket(client.user)
        for room in ("one", "two")
        for who, client in (("ana", ana), ("bob", bob), ("bob again", bob), ("ana again", ana))
    }
    for (room, _), socket in sockets.items():
        watch.watch(room, socket)
    assert watch.pairs() == 8, "three queries of at most 3 pairs"
    await delete_membership("two", bob.user)
    assert await watch.check() == 2
    assert {key for key, socket in sockets.items() if socket.ended} == {("two", "bob"), ("two", "bob again")}
    assert watch.pairs() == 6 and await watch.check() == 0


async def test_a_socket_that_joined_again_while_its_check_ran_is_not_told(make_user, open_clients):
    ana, bob = await private_room_of_ana_and_bob(make_user, open_clients)
    watch, socket = MembershipWatch(interval=0), Socket(bob.user)
    watch.watch("secret", socket)
    await delete_membership("secret", bob.user)
    checking = asyncio.ensure_future(watch.check())
    started = time.monotonic()
    # The check reads the database on a thread; meanwhile the socket joins again (a new invitation).
    while not watch.checking or not watch.checking.locked():
        await asyncio.sleep(0)
        assert time.monotonic() - started < 10
    watch.watch("secret", socket)
    assert await checking == 0 and socket.ended == []


class Heard:
    """A hub member in a room and attached to its user, that keeps what it hears in one order."""

    def __init__(self) -> None:
        self.heard: list[str] = []

    async def live(self, room: str, seq: int | None, text: str) -> None:
        self.heard.append(text)

    async def personal(self, room: str | None, text: str) -> None:
        self.heard.append(text)


async def test_a_batch_publishes_the_users_room_left_before_the_rooms_frames_queued_after_it():
    url = os.environ["REDIS_URL"]
    publisher, listener, socket = RedisHub(url, timeout=1), RedisHub(url, timeout=1), Heard()
    await listener.join("secret", socket)
    await listener.attach(7, socket)
    left = '{"t":"room.left","d":{"room":"secret","user":7,"by":null}}'
    try:
        # Queued in one tick: one batch, one pipeline.
        publisher.publish_to_user(7, None, left)
        publisher.publish("secret", 9, '{"t":"msg"}')
        await wait_for(lambda: len(socket.heard) == 2, timeout=10, what="both frames")
        assert socket.heard == [left, '{"t":"msg"}']
    finally:
        await listener.leave("secret", socket)
        await listener.detach(7, socket)
        for hub in (publisher, listener):
            await hub.aclose()
