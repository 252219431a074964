"""Live fan-out through the hub (messaging/transport/fanout.py), on real Redis."""

from __future__ import annotations

import asyncio
import logging
import os

import pytest
import redis

from messaging.core import pipeline
from messaging.core.claims import reset_claim_store
from messaging.ops import metrics
from messaging.transport import consumers
from messaging.transport.fanout import Hub, RedisHub, get_hub, unpack, unpack_for_user

from ..support.waiting import wait_for
from .conftest import Client, rows

pytestmark = [pytest.mark.django_db(transaction=True)]


class Recorder:
    """A hub member that keeps what it hears."""

    def __init__(self) -> None:
        self.frames: list[tuple[str, int | None, str]] = []
        self.personal_frames: list[tuple[str | None, str]] = []
        self.heard = asyncio.Event()

    async def live(self, room: str, seq: int | None, text: str) -> None:
        self.frames.append((room, seq, text))
        self.heard.set()

    async def personal(self, room: str | None, text: str) -> None:
        self.personal_frames.append((room, text))

    async def next(self, timeout: float = 10) -> tuple[str, int | None, str]:
        await asyncio.wait_for(self.heard.wait(), timeout)
        self.heard.clear()
        return self.frames[-1]


def other_db(url: str) -> str:
    base, _, db = url.rpartition("/")
    return f"{base}/{(int(db or 0) + 1) % 16}"


async def test_a_room_costs_one_subscription_per_process_however_many_sockets(make_user, open_clients, redis_client):
    clients = [await open_clients(await make_user()) for _ in range(3)]
    for client in clients:
        await client.join("lobby")
    hub = get_hub()
    channel = hub.channel("lobby")
    assert redis_client.pubsub_numsub(channel) == [(channel, 1)]
    published = metrics.FANOUT_FRAMES.labels("published")
    before = published._value.get()
    id = await clients[0].send("room.post", {"room": "lobby", "body": "hi"})
    assert (await clients[0].ack(id))["ok"]
    for client in clients:
        [frame] = await client.frames("msg", 1)
        assert frame["d"]["id"] == id
        assert await client.nothing_more()
    # One publish for the room, not one per member.
    assert published._value.get() - before == 1
    for client in clients:
        await client.close()
    await wait_for(
        lambda: redis_client.pubsub_numsub(channel) == [(channel, 0)], timeout=10, what="the subscription to end"
    )
    assert hub.subscriptions.listeners == {}


async def test_frames_published_during_a_join_follow_its_ack_and_backlog(make_user, open_clients, monkeypatch):
    ana, bob = await make_user("ana"), await make_user("bob")
    poster = await open_clients(ana)
    await poster.join("lobby")
    for n in range(2):
        assert (await poster.call("room.post", {"room": "lobby", "body": f"m{n}"}))["ok"]
    reader = await open_clients(bob)
    real = pipeline.run

    async def join_while_the_room_moves(deliveries):
        outcomes = await real(deliveries)
        [first] = deliveries[:1]
        if first.command.t == "room.join" and first.user == bob:
            # Published after bob subscribed and read his backlog (seqs 1-2):
            # a late copy of seq 2, which the backlog had, and a new seq 3.
            hub = get_hub()
            hub.publish("lobby", 2, '{"t":"msg","d":{"room":"lobby","seq":2,"late":true}}')
            hub.publish("lobby", 3, '{"t":"msg","d":{"room":"lobby","seq":3}}')
            socket = next(m for m in hub.members["lobby"] if m.user == bob)
            # The poster's own frames of seqs 1-2 may be held too, if they were
            # still on their way when bob subscribed: all are dropped alike.
            frame = (3, '{"t":"msg","d":{"room":"lobby","seq":3}}')
            await wait_for(lambda: frame in socket.held.get("lobby", ()), timeout=10, what="the frames to reach bob")
        return outcomes

    monkeypatch.setattr(pipeline, "run", join_while_the_room_moves)
    id = await reader.send("room.join", {"room": "lobby"})
    order = [await reader.receive() for _ in range(4)]
    assert [(f["t"], f.get("id") or f["d"]["seq"]) for f in order] == [("ack", id), ("msg", 1), ("msg", 2), ("msg", 3)]
    assert "late" not in order[2]["d"]
    assert await reader.nothing_more()


async def test_live_frames_reach_the_hubs_of_one_redis_db_only():
    url = os.environ["REDIS_URL"]
    publisher, same_db, elsewhere = (
        RedisHub(url, timeout=1),
        RedisHub(url, timeout=1),
        RedisHub(other_db(url), timeout=1),
    )
    here, there = Recorder(), Recorder()
    await same_db.join("lobby", here)
    await elsewhere.join("lobby", there)
    try:
        publisher.publish("lobby", 7, '{"t":"msg"}')
        publisher.publish("lobby", None, '{"t":"status"}')
        await wait_for(lambda: len(here.frames) == 2, timeout=10, what="the frames to arrive")
        assert here.frames == [("lobby", 7, '{"t":"msg"}'), ("lobby", None, '{"t":"status"}')]
        publisher.publish("other-room", 8, '{"t":"msg"}')
        await asyncio.sleep(0.3)
        assert len(here.frames) == 2 and there.frames == []
    finally:
        await same_db.leave("lobby", here)
        await elsewhere.leave("lobby", there)


async def test_the_subscription_comes_back_after_redis_restarts(own_redis, caplog):
    hub, member = RedisHub(own_redis.url, timeout=0.5), Recorder()
    await hub.join("lobby", member)
    try:
        hub.publish("lobby", 1, "before")
        assert await member.next() == ("lobby", 1, "before")
        own_redis.stop()
        hub.publish("lobby", 2, "while down")  # lost: counted and logged, nothing raised
        await wait_for(lambda: hub.pump.done(), timeout=10, what="the failed publish")
        assert "live frames lost" in caplog.text
        own_redis.start()
        # redis-py reconnects the subscription and subscribes again; until it
        # has, publishes reach no one, so keep publishing.
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 20
        while not any(text == "after" for _, _, text in member.frames):
            assert loop.time() < deadline, "the subscription did not come back"
            hub.publish("lobby", 3, "after")
            await asyncio.sleep(0.2)
        assert all(text != "while down" for _, _, text in member.frames)
    finally:
        await hub.leave("lobby", member)


async def test_without_redis_frames_reach_the_sockets_of_the_process(make_user, open_clients, settings):
    settings.MESSAGING = {**settings.MESSAGING, "REDIS_URL": None}
    reset_claim_store()
    assert type(get_hub()) is Hub
    ana, bob = await open_clients(await make_user("ana")), await open_clients(await make_user("bob"))
    await ana.join("lobby")
    await bob.join("lobby")
    id = await ana.send("room.post", {"room": "lobby", "body": "local"})
    assert (await ana.ack(id))["ok"]
    for client in (ana, bob):
        [frame] = await client.frames("msg", 1)
        assert frame["d"]["id"] == id
    assert [r["client_msg_id"] for r in await rows()] == [id]


async def test_a_publish_that_fails_costs_the_frame_not_the_ack(make_user, open_clients, monkeypatch):
    ana, bob = await open_clients(await make_user("ana")), await open_clients(await make_user("bob"))
    await ana.join("lobby")
    await bob.join("lobby")
    hub = get_hub()

    def broken_pipeline(*args, **kwargs):
        raise redis.ConnectionError("publish refused")

    monkeypatch.setattr(hub.client, "pipeline", broken_pipeline)
    ack = await ana.call("room.post", {"room": "lobby", "body": "kept"})
    assert ack["ok"] and ack["d"]["seq"] == 1
    assert await bob.nothing_more()
    monkeypatch.undo()
    # The room goes on, and a client that saw a gap catches up by seq.
    assert (await ana.call("room.post", {"room": "lobby", "body": "next"}))["ok"]
    [frame] = await bob.frames("msg", 1)
    assert frame["d"]["seq"] == 2
    await bob.join("lobby", since=0)
    assert [f["d"]["seq"] for f in await bob.frames("msg", 2)] == [1, 2]


async def test_a_publish_queue_past_its_bound_drops_the_oldest_frames():
    from messaging.transport.hub import PUBLISH_BACKLOG

    hub, member = Hub(), Recorder()
    await hub.join("lobby", member)
    dropped = metrics.FANOUT_FRAMES.labels("dropped")
    before = dropped._value.get()
    # Published faster than the pump can run (no await in between).
    for n in range(PUBLISH_BACKLOG + 3):
        hub.publish("lobby", n, str(n))
    await wait_for(lambda: hub.pump.done(), timeout=10, what="the queue to drain")
    assert dropped._value.get() - before == 3
    assert [seq for _, seq, _ in member.frames] == list(range(3, PUBLISH_BACKLOG + 3))


async def test_a_users_publish_queue_past_its_bound_drops_the_oldest_frames():
    from messaging.transport.hub import PUBLISH_BACKLOG

    hub, socket = Hub(), Recorder()
    await hub.attach(7, socket)
    dropped = metrics.FANOUT_FRAMES.labels("dropped")
    before = dropped._value.get()
    for n in range(PUBLISH_BACKLOG + 3):
        hub.publish_to_user(7, None, str(n))
    await wait_for(lambda: hub.pump.done(), timeout=10, what="the queue to drain")
    assert dropped._value.get() - before == 3
    assert [text for _, text in socket.personal_frames] == [str(n) for n in range(3, PUBLISH_BACKLOG + 3)]


async def test_a_rooms_frames_queued_together_go_as_one_publish_in_their_order(redis_client):
    url = os.environ["REDIS_URL"]
    publisher, listener = RedisHub(url, timeout=1), RedisHub(url, timeout=1)
    member = Recorder()
    await listener.join("lobby", member)
    raw = redis_client.pubsub()
    raw.subscribe(publisher.channel("lobby"))
    try:
        assert raw.get_message(timeout=5)["type"] == "subscribe"
        # Queued with no await in between: one pump batch.
        for n in range(1, 4):
            publisher.publish("lobby", n, f'{{"t":"msg","d":{{"seq":{n}}}}}')
        publisher.publish("other-room", 1, "elsewhere")
        publisher.publish("lobby", None, '{"t":"status"}')
        await wait_for(lambda: len(member.frames) == 4, timeout=10, what="the frames to arrive")
        assert [seq for _, seq, _ in member.frames] == [1, 2, 3, None]
        message = raw.get_message(timeout=5)
        assert [seq for seq, _ in unpack(message["data"])] == [1, 2, 3, None], "the room's four frames in one message"
        assert raw.get_message(timeout=0.3) is None
    finally:
        raw.close()
        await listener.leave("lobby", member)


async def test_a_message_that_is_not_packed_frames_is_dropped_and_the_room_goes_on(redis_client, caplog):
    url = os.environ["REDIS_URL"]
    hub, member = RedisHub(url, timeout=1), Recorder()
    await hub.join("lobby", member)
    try:
        redis_client.publish(hub.channel("lobby"), b'7\n{"t":"msg"}')  # the format of earlier versions
        hub.publish("lobby", 8, "next")
        assert await member.next() == ("lobby", 8, "next")
        assert member.frames == [("lobby", 8, "next")]
        assert "not a packed list of frames" in caplog.text
    finally:
        await hub.leave("lobby", member)


class ClientGoneConsumer(consumers.ChatConsumer):
    """The consumer under a server whose client has gone while its disconnect
    is still on the way: a send raises, as ASGI says, an OSError (uvicorn's
    ClientDisconnected)."""

    gone: set = set()

    async def __call__(self, scope, receive, send) -> None:
        async def send_or_raise(message: dict) -> None:
            if message["type"] == "websocket.send" and self.user.pk in self.gone:
                raise OSError("the client is gone")
            await send(message)

        await super().__call__(scope, receive, send_or_raise)


async def test_a_member_whose_client_is_gone_costs_its_frames_only(make_user, open_clients, caplog):
    ana, bob = await make_user("ana"), await make_user("bob")
    ana_socket = await open_clients(ana)
    bob_socket = await Client(bob, consumer=ClientGoneConsumer).connect()
    try:
        await ana_socket.join("gone")
        await bob_socket.join("gone")
        ClientGoneConsumer.gone = {bob.pk}
        caplog.clear()

        # Ana's post: Bob's copy is lost with his client, hers arrives, nothing is logged as failed.
        ack = await ana_socket.call("room.post", {"room": "gone", "body": "to the room"})
        assert ack["ok"]
        [frame] = await ana_socket.frames("msg", 1)
        assert frame["d"]["body"] == "to the room"
        # Bob's own post, sent before his client went: applied, its ack lost; his socket goes on.
        await bob_socket.send("room.post", {"room": "gone", "body": "from bob"})
        [frame] = await ana_socket.frames("msg", 1)
        assert frame["d"]["body"] == "from bob"
        await bob_socket.send("room.post", {"room": "gone", "body": "and again"})
        [frame] = await ana_socket.frames("msg", 1)
        assert frame["d"]["body"] == "and again"
        assert [(r["seq"], r["body"]) for r in await rows(room__slug="gone")] == [
            (1, "to the room"),
            (2, "from bob"),
            (3, "and again"),
        ]
        # (A busy machine's loop stalls are logged too, by messaging.ops.loopwatch: not failures.)
        failures = [r for r in caplog.records if r.levelno >= logging.WARNING and r.name != "messaging.ops.loopwatch"]
        assert [r.getMessage() for r in failures] == []
    finally:
        ClientGoneConsumer.gone = set()
        await bob_socket.close()


# Frames for one user ----------------------------------------------------------


async def test_a_users_frames_reach_its_sockets_in_every_process_once_and_no_one_else(redis_client):
    url = os.environ["REDIS_URL"]
    a, b, elsewhere = RedisHub(url, timeout=1), RedisHub(url, timeout=1), RedisHub(other_db(url), timeout=1)
    on_a, on_b, other_user, other_db_socket = Recorder(), Recorder(), Recorder(), Recorder()
    await a.attach(7, on_a)
    await b.attach(7, on_b)
    await b.attach(8, other_user)
    await elsewhere.attach(7, other_db_socket)
    try:
        assert redis_client.pubsub_numsub(a.user_channel("7")) == [(a.user_channel("7"), 2)], "one per process"
        # Queued together: one publish per user, the frames in their order.
        a.publish_to_user(7, "lobby", '{"t":"state","n":1}')
        a.publish_to_user(7, None, '{"t":"invited"}')
        a.publish_to_user(7, "lobby", '{"t":"state","n":2}')
        expected = [("lobby", '{"t":"state","n":1}'), (None, '{"t":"invited"}'), ("lobby", '{"t":"state","n":2}')]
        await wait_for(
            lambda: len(on_a.personal_frames) == len(on_b.personal_frames) == 3,
            timeout=10,
            what="the frames to reach both processes",
        )
        await asyncio.sleep(0.3)
        assert on_a.personal_frames == on_b.personal_frames == expected
        assert other_user.personal_frames == other_db_socket.personal_frames == []
        assert on_a.frames == on_b.frames == [], "a user's frames are not a room's"
    finally:
        await a.detach(7, on_a)
        await b.detach(7, on_b)
        await b.detach(8, other_user)
        await elsewhere.detach(7, other_db_socket)
    channel = a.user_channel("7")
    await wait_for(
        lambda: redis_client.pubsub_numsub(channel) == [(channel, 0)], timeout=10, what="the subscription to end"
    )
    assert a.subscriptions.listeners == b.subscriptions.listeners == {}, "no socket left, no subscription"


async def test_a_user_keeps_its_subscription_while_its_rooms_come_and_go(redis_client):
    hub, socket = RedisHub(os.environ["REDIS_URL"], timeout=1), Recorder()
    await hub.attach(7, socket)
    await hub.join("lobby", socket)
    await hub.leave("lobby", socket)
    try:
        assert hub.subscriptions.listeners
        hub.publish_to_user(7, None, "still here")
        await wait_for(lambda: socket.personal_frames == [(None, "still here")], timeout=10, what="the frame")
    finally:
        await hub.detach(7, socket)
    assert hub.subscriptions.listeners == {}


async def test_a_users_frames_queued_together_go_as_one_publish(redis_client):
    hub = RedisHub(os.environ["REDIS_URL"], timeout=1)
    raw = redis_client.pubsub()
    raw.subscribe(hub.user_channel("7"))
    try:
        assert raw.get_message(timeout=5)["type"] == "subscribe"
        for n in range(3):
            hub.publish_to_user(7, "lobby", f"frame {n}")
        hub.publish("lobby", None, "a room's")
        await wait_for(lambda: hub.pump.done(), timeout=10, what="the publish")
        message = raw.get_message(timeout=5)
        assert list(unpack_for_user(message["data"])) == [("lobby", f"frame {n}") for n in range(3)]
        assert raw.get_message(timeout=0.3) is None
    finally:
        raw.close()


async def test_a_message_for_a_user_that_is_not_packed_frames_is_dropped(redis_client, caplog):
    hub, socket = RedisHub(os.environ["REDIS_URL"], timeout=1), Recorder()
    await hub.attach(7, socket)
    try:
        redis_client.publish(hub.user_channel("7"), b"Lobby 2\nhi")  # not a room's slug
        hub.publish_to_user(7, "lobby", "next")
        await wait_for(lambda: socket.personal_frames == [("lobby", "next")], timeout=10, what="the next frame")
        assert "not a packed list of frames" in caplog.text
    finally:
        await hub.detach(7, socket)


async def test_without_redis_a_users_frames_reach_its_sockets_in_the_process():
    hub, socket, other = Hub(), Recorder(), Recorder()
    await hub.attach(7, socket)
    await hub.attach(8, other)
    hub.publish_to_user(7, "lobby", "yours")
    await wait_for(lambda: hub.pump.done(), timeout=10, what="the queue to drain")
    assert socket.personal_frames == [("lobby", "yours")] and other.personal_frames == []
    await hub.detach(7, socket)
    assert 7 not in hub.users and "7" not in hub.users


async def test_a_socket_whose_attach_failed_attaches_at_its_next_join(make_user, open_clients, monkeypatch):
    ana_user = await make_user("ana")
    hub = get_hub()
    real = type(hub).attach
    failures = iter([redis.ConnectionError("Redis went away")])

    async def attach_once_broken(self, user_id, member):
        failure = next(failures, None)
        if failure is not None:
            raise failure
        await real(self, user_id, member)

    monkeypatch.setattr(type(hub), "attach", attach_once_broken)
    ana = await open_clients(ana_user)
    assert not any(ana.user.pk == socket.user.pk for sockets in hub.users.values() for socket in sockets)
    bob = await open_clients(await make_user("bob"))
    await ana.join("lobby")
    await bob.join("lobby")
    assert (await ana.call("room.post", {"room": "lobby", "body": "hi"}))["ok"]
    assert (await bob.call("receipt", {"room": "lobby", "delivered": 1}))["ok"]
    [state] = await ana.frames("state", 1)
    assert state["d"]["seq"] == 1 and state["d"]["state"] == "delivered"
