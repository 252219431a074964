"""Rooms one user (`ROOMS_CREATED_PER_HOUR`) and one client address (`ROOMS_CREATED_PER_ADDRESS_PER_HOUR`)
may create per hour, counted in the database."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable
from datetime import timedelta

import pytest
from asgiref.sync import async_to_sync
from channels.db import database_sync_to_async
from django.db import connections
from django.utils import timezone

from messaging import submit
from messaging.core import pipeline
from messaging.core.exceptions import RateLimited
from messaging.core.protocol import Command
from messaging.models import Membership, Room

from .conftest import apply_command

pytestmark = [pytest.mark.django_db(transaction=True)]


def room_exists(slug: str) -> bool:
    return Room.objects.filter(slug=slug).exists()


async def test_joins_that_would_create_a_room_past_the_limit_are_rate_limited(make_user, open_clients, settings):
    settings.MESSAGING = {**settings.MESSAGING, "ROOMS_CREATED_PER_HOUR": 3}
    ana = await open_clients(await make_user())
    for n in range(3):
        await ana.join(f"ana-{n}")
    refused = await ana.call("room.join", {"room": "ana-3"})
    assert refused["error"]["code"] == "rate_limited" and refused["error"]["retry"] is True
    assert refused["error"]["message"] == "you created 3 rooms in the last hour"
    assert 3500 < refused["error"]["retry_after"] <= 3600
    # It created nothing: no room, no membership.
    assert not await database_sync_to_async(room_exists)("ana-3")
    assert not await Membership.objects.filter(user=ana.user, room__slug="ana-3").aexists()

    # Rooms that exist are joined past it, hers or another's; another user has a count of her own.
    bob = await open_clients(await make_user())
    await bob.join("bobs-room")
    assert (await ana.call("room.join", {"room": "bobs-room"}))["ok"]
    assert (await ana.call("room.join", {"room": "ana-0", "since": 0}))["ok"]
    assert (await bob.call("room.join", {"room": "ana-3"}))["ok"]
    assert await Room.objects.filter(created_by=bob.user).acount() == 2


def at_once(creations: list[Callable[[], object]]) -> list[str]:
    """Each creation on a thread with its own database connection, as each server
    process has, all released together: per creation "ok" or "rate_limited"."""
    start = threading.Barrier(len(creations))
    outcomes: list[str] = []

    def create(creation: Callable[[], object]) -> None:
        start.wait(timeout=10)
        try:
            creation()
            outcomes.append("ok")
        except RateLimited:
            outcomes.append("rate_limited")
        finally:
            connections.close_all()

    threads = [threading.Thread(target=create, args=(creation,)) for creation in creations]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return outcomes


def test_a_room_may_be_created_again_once_the_oldest_counted_is_an_hour_old(django_user_model, settings):
    settings.MESSAGING = {**settings.MESSAGING, "ROOMS_CREATED_PER_HOUR": 2}
    ana = django_user_model.objects.create_user(username="ana")
    apply_command(ana, "room.join", {"room": "first"})
    apply_command(ana, "room.join", {"room": "second"})
    with pytest.raises(RateLimited):
        apply_command(ana, "room.join", {"room": "third"})
    Room.objects.filter(slug="first").update(created_at=timezone.now() - timedelta(minutes=61))
    apply_command(ana, "room.join", {"room": "third"})
    with pytest.raises(RateLimited) as refused:
        apply_command(ana, "room.join", {"room": "fourth"})
    # Now "second" is the oldest of the two counted: free again when it is an hour old.
    assert refused.value.extra["retry_after"] > 3500


def test_a_limit_of_0_is_off(django_user_model, settings):
    settings.MESSAGING = {**settings.MESSAGING, "ROOMS_CREATED_PER_HOUR": 0}
    ana = django_user_model.objects.create_user(username="ana")
    for n in range(60):
        apply_command(ana, "room.join", {"room": f"room-{n}"})
    assert Room.objects.filter(created_by=ana).count() == 60


def test_the_limit_is_exact_for_joins_at_once_on_several_connections(django_user_model, settings):
    # Each thread has its own database connection, as each server process
    # does: the user's row lock puts their counts one after another.
    settings.MESSAGING = {**settings.MESSAGING, "ROOMS_CREATED_PER_HOUR": 5}
    ana = django_user_model.objects.create_user(username="ana")
    outcomes = at_once(
        [lambda n=n: apply_command(ana, "room.join", {"room": f"race-{n}-{uuid.uuid4().hex[:6]}"}) for n in range(12)]
    )
    assert sorted(outcomes) == ["ok"] * 5 + ["rate_limited"] * 7
    assert Room.objects.filter(created_by=ana).count() == 5


async def test_a_socket_past_its_rooms_is_refused_and_nothing_changes(make_user, open_clients, settings):
    settings.MESSAGING = {**settings.MESSAGING, "ROOMS_PER_SOCKET": 3}
    ana = await make_user()
    first = await open_clients(ana)
    for n in range(3):
        await first.join(f"room-{n}")
    refused = await first.call("room.join", {"room": "room-3"})
    assert refused["error"] == {"code": "invalid", "message": "this socket has joined 3 rooms", "retry": False}
    # No room, no membership, no subscription.
    assert not await database_sync_to_async(room_exists)("room-3")
    assert not await Membership.objects.filter(user=ana, room__slug="room-3").aexists()
    # A room it has joined is joined again; another socket has rooms of its own.
    assert (await first.call("room.join", {"room": "room-1", "since": 0}))["ok"]
    second = await open_clients(ana)
    await second.join("room-3")
    bob = await open_clients(await make_user())
    await bob.join("room-3")
    assert (await bob.call("room.post", {"room": "room-3", "body": "hello"}))["ok"]
    await second.frames("msg", 1)
    assert await first.nothing_more()


async def test_rooms_per_socket_of_0_is_off(make_user, open_clients, settings):
    settings.MESSAGING = {**settings.MESSAGING, "ROOMS_PER_SOCKET": 0}
    client = await open_clients(await make_user())
    for n in range(30):
        await client.join(f"room-{n}")


def create_from(user, address: str | None, t: str, d: dict):
    """A command of `user` as a transport hands it over, from the client `address`."""
    return async_to_sync(pipeline.submit)(user, Command(id=uuid.uuid4().hex, t=t, d=d), address)


def test_rooms_past_the_address_limit_are_refused_whoever_creates_them(django_user_model, settings):
    settings.MESSAGING = {**settings.MESSAGING, "ROOMS_CREATED_PER_ADDRESS_PER_HOUR": 3}
    users = [django_user_model.objects.create_user(username=f"guest{n}") for n in range(5)]
    create_from(users[0], "203.0.113.7", "room.join", {"room": "one"})
    create_from(users[1], "203.0.113.7", "room.create", {"room": "two"})
    create_from(users[2], "203.0.113.7", "dm.open", {"user": users[3].pk})
    for t, d in [
        ("room.join", {"room": "four"}),
        ("room.create", {"room": "five"}),
        ("dm.open", {"user": users[0].pk}),
    ]:
        with pytest.raises(RateLimited) as refused:
            create_from(users[4], "203.0.113.7", t, d)
        assert refused.value.message == "3 rooms were created from your address in the last hour"
        assert 3500 < refused.value.extra["retry_after"] <= 3600
    assert Room.objects.count() == 3 and not Membership.objects.filter(user=users[4]).exists()
    # Another address, and server code (no address), are not counted with it.
    create_from(users[4], "2001:db8::/64", "room.join", {"room": "four"})
    assert submit(users[4], "room.create", {"room": "five"}, id="from-code")["ok"]
    assert dict(Room.objects.values_list("slug", "created_from")) == {
        "one": "203.0.113.7",
        "two": "203.0.113.7",
        Room.objects.get(direct__isnull=False).slug: "203.0.113.7",
        "four": "2001:db8::/64",
        "five": None,
    }


def test_an_address_limit_of_0_is_off(django_user_model, settings):
    settings.MESSAGING = {**settings.MESSAGING, "ROOMS_CREATED_PER_ADDRESS_PER_HOUR": 0}
    users = [django_user_model.objects.create_user(username=f"guest{n}") for n in range(3)]
    for n in range(30):
        create_from(users[n % 3], "203.0.113.7", "room.join", {"room": f"room-{n}"})
    assert Room.objects.filter(created_from="203.0.113.7").count() == 30


def test_the_address_limit_is_exact_for_creations_at_once_on_several_connections(django_user_model, settings):
    # Twelve fresh users, each under its own limit, on connections of their own
    # as on separate processes: the address's lock puts their counts one after another.
    settings.MESSAGING = {**settings.MESSAGING, "ROOMS_CREATED_PER_ADDRESS_PER_HOUR": 5}
    users = [django_user_model.objects.create_user(username=f"guest{n}") for n in range(12)]
    outcomes = at_once(
        [lambda n=n: create_from(users[n], "203.0.113.7", "room.join", {"room": f"race-{n}"}) for n in range(12)]
    )
    assert sorted(outcomes) == ["ok"] * 5 + ["rate_limited"] * 7
    assert Room.objects.filter(created_from="203.0.113.7").count() == 5
