"""The hub's contract (messaging/transport/hub.py `Hub`), run by every hub the app ships:
`Hub` (one process's sockets), `RedisHub` on Redis and `RedisHub` over a Redis Cluster's sharded Pub/Sub.

From `join`'s return a member gets every frame `publish`ed to the room, in
the order published, until `leave`; from `attach`'s return, every frame
`publish_to_user`ed to its user. A member that fails does not keep a frame
from the others. A hub over a shared service (`shared`) also delivers what
another process's hub published. `aclose` ends it.
"""

from __future__ import annotations

import asyncio

import pytest

from messaging.backends import HUBS, hub_path
from messaging.conf import get_settings
from messaging.transport.fanout import Hub, make_hub

from .conftest import using

# Long enough for a frame that will come; the tests wait for what they expect, never a fixed time.
PATIENCE = 10.0


class Recorder:
    """A socket as the hub sees it (`Member`), keeping what it is sent."""

    def __init__(self, broken: bool = False) -> None:
        self.frames: list[tuple] = []
        self.broken = broken
        self.arrived = asyncio.Event()

    async def live(self, room: str, seq: int | None, text: str) -> None:
        self.got(("live", room, seq, text))

    async def personal(self, room: str | None, text: str) -> None:
        self.got(("personal", room, text))

    def got(self, frame: tuple) -> None:
        self.frames.append(frame)
        self.arrived.set()
        if self.broken:
            raise RuntimeError("this socket is broken")

    async def wait_for(self, count: int) -> list[tuple]:
        async def enough() -> None:
            while len(self.frames) < count:
                self.arrived.clear()
                await self.arrived.wait()

        await asyncio.wait_for(enough(), PATIENCE)
        return self.frames


@pytest.fixture(params=["process", "redis", "cluster"])
def kind(request, settings):
    if request.param == "process":
        using(settings, REDIS_URL=None, REDIS_CLUSTER=False)
    elif request.param == "redis":
        using(settings, REDIS_URL=request.getfixturevalue("redis_url"), REDIS_CLUSTER=False)
    else:
        using(settings, REDIS_URL=request.getfixturevalue("redis_cluster").url, REDIS_CLUSTER=True)
    assert hub_path(get_settings()) == HUBS["process" if request.param == "process" else "redis"]
    return request.param


@pytest.fixture
async def hubs(kind):
    """Hubs as the app makes them (`make_hub`, by the dotted path): call for one more (another process's)."""
    made: list[Hub] = []

    def make() -> Hub:
        made.append(make_hub())
        return made[-1]

    yield make
    for hub in made:
        await hub.aclose()


async def test_a_member_gets_its_rooms_frames_in_the_order_published(hubs):
    hub = hubs()
    ana, bob = Recorder(), Recorder()
    await hub.join("lobby", ana)
    await hub.join("other", bob)
    for n in range(50):
        hub.publish("lobby", n + 1, f"m{n}")
    hub.publish("other", None, "o")
    assert await ana.wait_for(50) == [("live", "lobby", n + 1, f"m{n}") for n in range(50)]
    assert await bob.wait_for(1) == [("live", "other", None, "o")], "only its own room's"


async def test_after_leave_no_frame_of_the_room_reaches_the_member(hubs):
    hub = hubs()
    ana = Recorder()
    await hub.join("lobby", ana)
    await hub.join("other", ana)
    await hub.leave("lobby", ana)
    hub.publish("lobby", 1, "after leave")
    hub.publish("other", 1, "later")
    # Frames of one process leave in the order published: "later" comes after what "lobby" would have sent.
    assert await ana.wait_for(1) == [("live", "other", 1, "later")]


async def test_a_users_frames_reach_each_of_its_attached_members(hubs):
    hub = hubs()
    phone, laptop, other = Recorder(), Recorder(), Recorder()
    await hub.attach(7, phone)
    await hub.attach("7", laptop)  # the same user, its id as text
    await hub.attach(8, other)
    hub.publish_to_user(7, "lobby", "state")
    hub.publish_to_user(7, None, "anywhere")
    hub.publish_to_user(8, None, "for 8")
    expected = [("personal", "lobby", "state"), ("personal", None, "anywhere")]
    assert await phone.wait_for(2) == expected
    assert await laptop.wait_for(2) == expected
    assert await other.wait_for(1) == [("personal", None, "for 8")]


async def test_after_detach_no_frame_of_the_user_reaches_the_member(hubs):
    hub = hubs()
    phone, laptop = Recorder(), Recorder()
    await hub.attach(7, phone)
    await hub.attach(7, laptop)
    await hub.detach(7, phone)
    hub.publish_to_user(7, None, "after")
    # One delivery hands a frame to all of the user's members here: the laptop's says the phone's would have come.
    assert await laptop.wait_for(1) == [("personal", None, "after")]
    assert phone.frames == []


async def test_a_member_attached_twice_gets_each_frame_once_and_a_detach_mid_delivery_spares_the_rest(hubs):
    hub = hubs()
    laptop = Recorder()

    class Phone(Recorder):
        async def personal(self, room: str | None, text: str) -> None:
            await super().personal(room, text)
            await hub.detach(7, laptop)  # a sign-out here closes the user's other socket

    phone = Phone()
    await hub.attach(7, phone)
    await hub.attach(7, phone)  # again: still one socket of the user
    await hub.attach(7, laptop)
    hub.publish_to_user(7, None, "first")
    hub.publish_to_user(7, None, "second")
    assert await phone.wait_for(2) == [("personal", None, "first"), ("personal", None, "second")]
    # The delivery under way when the laptop left still reached it; the next did not.
    assert laptop.frames == [("personal", None, "first")]
    await hub.detach(7, phone)
    await hub.detach(7, phone)  # gone already: nothing to do
    hub.publish_to_user(7, None, "nobody")
    await hub.attach(8, laptop)
    hub.publish_to_user(8, None, "for 8")
    assert await laptop.wait_for(2) == [("personal", None, "first"), ("personal", None, "for 8")]
    assert len(phone.frames) == 2


async def test_a_failing_member_keeps_no_frame_from_the_others(hubs):
    hub = hubs()
    broken, ana = Recorder(broken=True), Recorder()
    await hub.join("lobby", broken)
    await hub.join("lobby", ana)
    await hub.attach(1, broken)
    await hub.attach(1, ana)
    hub.publish("lobby", 1, "m")
    hub.publish_to_user(1, None, "p")
    assert sorted(await ana.wait_for(2)) == [("live", "lobby", 1, "m"), ("personal", None, "p")]


# The shared kinds only: the in-process hub reaches its own process's members only.
@pytest.mark.parametrize("kind", ["redis", "cluster"])
async def test_a_shared_hub_delivers_what_another_processs_hub_published(kind, hubs):
    here, there = hubs(), hubs()
    ana = Recorder()
    await there.join("lobby", ana)
    await there.attach(1, ana)
    here.publish("lobby", 1, "from here")
    here.publish_to_user(1, "lobby", "for you")
    assert sorted(await ana.wait_for(2)) == [("live", "lobby", 1, "from here"), ("personal", "lobby", "for you")]


async def test_a_closed_hub_can_be_closed_again(hubs):
    hub = hubs()
    await hub.join("lobby", Recorder())
    hub.publish("lobby", 1, "m")
    await hub.aclose()
    await hub.aclose()
