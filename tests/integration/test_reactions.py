"""The "+1" reaction: a custom command type that is not idempotent by nature, applied exactly once."""

from __future__ import annotations

import asyncio

import pytest
from channels.db import database_sync_to_async

from messaging.contrib.reactions.models import ReactionCount
from messaging.core.claims import reset_claim_store
from messaging.models import CommandRecord, Membership
from messaging.testing import SocketClient
from messaging_client import sign_in

pytestmark = [pytest.mark.django_db(transaction=True)]


@database_sync_to_async
def count_of(seq: int, room: str = "lobby") -> int:
    row = ReactionCount.objects.filter(message__room__slug=room, message__seq=seq).first()
    return row.count if row else 0


async def room_with_a_message(open_clients, user, n: int = 1):
    clients = [await open_clients(user) for _ in range(n)]
    for client in clients:
        await client.join("lobby")
    assert (await clients[0].call("room.post", {"room": "lobby", "body": "like me"}))["ok"]
    for client in clients:
        await client.frames("msg", 1)
    return clients


async def test_same_reaction_from_several_sockets_at_once_counts_once(make_user, open_clients):
    clients = await room_with_a_message(open_clients, await make_user(), n=6)
    await asyncio.gather(*(c.send("reaction.add", {"room": "lobby", "seq": 1}, id="plus-1") for c in clients))
    acks = await asyncio.gather(*(c.ack("plus-1") for c in clients))
    assert all(a["ok"] for a in acks), acks
    assert sorted(a["dup"] for a in acks) == [False] + [True] * 5
    # One text in every copy: the keys in the order of the record (jsonb's).
    assert {str(a["d"]) for a in acks} == {str({"seq": 1, "room": "lobby", "count": 1})}
    assert await count_of(1) == 1
    # One broadcast, so every socket sees the count move once.
    for client in clients:
        assert await client.frames("reaction", 1) == [
            {"t": "reaction", "d": {"room": "lobby", "seq": 1, "count": 1, "rev": 2}}
        ]
        assert await client.nothing_more()


async def test_each_new_reaction_counts(make_user, open_clients):
    ana = (await room_with_a_message(open_clients, await make_user("ana")))[0]
    bob = await open_clients(await make_user("bob"))
    await bob.join("lobby")
    assert (await ana.call("reaction.add", {"room": "lobby", "seq": 1}))["d"]["count"] == 1
    assert (await ana.call("reaction.add", {"room": "lobby", "seq": 1}))["d"]["count"] == 2
    assert (await bob.call("reaction.add", {"room": "lobby", "seq": 1}))["d"]["count"] == 3
    assert await count_of(1) == 3


async def test_concurrent_duplicates_without_a_redis_window_count_once(make_user, open_clients, settings):
    # The database alone: every copy runs the handler, the record's unique
    # constraint lets one commit and rolls the others' increments back.
    settings.MESSAGING = {**settings.MESSAGING, "REDIS_URL": None}
    reset_claim_store()
    clients = await room_with_a_message(open_clients, await make_user(), n=4)
    await asyncio.gather(*(c.send("reaction.add", {"room": "lobby", "seq": 1}, id="plus-db") for c in clients))
    acks = await asyncio.gather(*(c.ack("plus-db") for c in clients))
    assert sorted(a["dup"] for a in acks) == [False, True, True, True]
    assert {a["d"]["count"] for a in acks} == {1}
    assert await count_of(1) == 1


async def test_duplicate_after_redis_lost_it_is_answered_from_the_database(make_user, open_clients, redis_client):
    client = (await room_with_a_message(open_clients, await make_user()))[0]
    first = await client.call("reaction.add", {"room": "lobby", "seq": 1}, id="plus-2")
    redis_client.flushdb()
    again = await client.call("reaction.add", {"room": "lobby", "seq": 1}, id="plus-2")
    assert again["dup"] is True and again["d"] == first["d"]
    assert await count_of(1) == 1
    reused = await client.call("reaction.add", {"room": "lobby", "seq": 2}, id="plus-2")
    assert reused["error"]["code"] == "id_reused"


@pytest.mark.parametrize(
    "d, message",
    [
        ({"room": "lobby"}, "seq must be an integer >= 1"),
        ({"room": "lobby", "seq": 0}, "seq must be an integer >= 1"),
        ({"room": "lobby", "seq": -1}, "seq must be an integer >= 0"),
        ({"room": "lobby", "seq": "1"}, "seq must be an integer >= 0"),
        ({"room": "lobby", "seq": True}, "seq must be an integer >= 0"),
        ({"room": "lobby", "seq": 1.0}, "seq must be an integer >= 0"),
        ({"room": "Lobby", "seq": 1}, "room must match ^[a-z0-9][a-z0-9-]{0,63}$"),
        ({"room": "lobby", "seq": 2}, "no message 2 in room lobby"),
    ],
)
async def test_bad_reactions_are_invalid_change_nothing_and_are_not_remembered(make_user, open_clients, d, message):
    client = (await room_with_a_message(open_clients, await make_user()))[0]
    ack = await client.call("reaction.add", d, id="bad-1")
    assert ack["error"] == {"code": "invalid", "message": message, "retry": False}
    assert await count_of(1) == 0
    fixed = await client.call("reaction.add", {"room": "lobby", "seq": 1}, id="bad-1")
    assert fixed["ok"] and fixed["dup"] is False and fixed["d"]["count"] == 1


async def test_reacting_outside_ones_rooms_is_forbidden(make_user, open_clients):
    await room_with_a_message(open_clients, await make_user("ana"))
    stranger = await open_clients(await make_user("eve"))
    ack = await stranger.call("reaction.add", {"room": "lobby", "seq": 1})
    assert ack["error"]["code"] == "forbidden" and ack["error"]["retry"] is False
    assert await count_of(1) == 0
    assert await database_sync_to_async(CommandRecord.objects.filter(type="reaction.add").count)() == 0


async def test_join_backlog_carries_the_counts(make_user, open_clients):
    ana = (await room_with_a_message(open_clients, await make_user("ana")))[0]
    assert (await ana.call("room.post", {"room": "lobby", "body": "no likes"}))["ok"]
    for _ in range(2):
        assert (await ana.call("reaction.add", {"room": "lobby", "seq": 1}))["ok"]
    bob = await open_clients(await make_user("bob"))
    await bob.join("lobby")
    assert [f["d"]["seq"] for f in await bob.frames("msg", 2)] == [1, 2]
    assert await bob.frames("reaction", 1) == [
        {"t": "reaction", "d": {"room": "lobby", "seq": 1, "count": 2, "rev": 4}}
    ]
    assert await bob.nothing_more()


async def room_with_reactions(make_user, open_clients):
    """Ana posted 1-5 in `lobby`; Bob gave 1 two "+1"s, 3 one and 5 one. Ana's first socket."""
    ana, bob = await open_clients(await make_user("ana")), await open_clients(await make_user("bob"))
    for client in (ana, bob):
        await client.join("lobby")
    for n in range(1, 6):
        assert (await ana.call("room.post", {"room": "lobby", "body": f"message {n}"}))["ok"]
    for seq in (1, 1, 3, 5):
        assert (await bob.call("reaction.add", {"room": "lobby", "seq": seq}))["ok"]
    # Every live frame has reached the room's sockets: a socket that joins
    # from here on hears none of them, only what its join sends.
    await ana.frames("msg", 5)
    await ana.frames("reaction", 4)
    return ana


async def test_a_rejoin_with_reactions_from_brings_the_counts_of_messages_the_client_shows(make_user, open_clients):
    ana = await room_with_reactions(make_user, open_clients)
    # Ana's page showed 2-3 when it lost its socket: its rejoin asks for what
    # came after 3, and for the counts from 2 on.
    again = await open_clients(ana.user)
    await again.join("lobby", since=3, reactions_from=2)
    frames = [await again.receive() for _ in range(4)]
    assert [(f["t"], f["d"]["seq"]) for f in frames] == [("msg", 4), ("msg", 5), ("reaction", 3), ("reaction", 5)]
    assert [f["d"]["count"] for f in frames[2:]] == [1, 1]
    assert await again.nothing_more()

    # Up to date, it still learns every count from where it asks.
    latest = await open_clients(ana.user)
    await latest.join("lobby", since=5, reactions_from=1)
    frames = await latest.frames("reaction", 3)
    assert [(f["d"]["seq"], f["d"]["count"]) for f in frames] == [(1, 2), (3, 1), (5, 1)]
    assert await latest.nothing_more()


async def test_without_reactions_from_a_rejoin_brings_only_the_backlogs_counts(make_user, open_clients):
    ana = await room_with_reactions(make_user, open_clients)
    again = await open_clients(ana.user)
    await again.join("lobby", since=3)
    assert [f["d"]["seq"] for f in await again.frames("msg", 2)] == [4, 5]
    assert [f["d"]["seq"] for f in await again.frames("reaction", 1)] == [5]
    assert await again.nothing_more()


async def test_the_counts_below_the_backlog_are_the_newest_replay_limit(make_user, open_clients, settings):
    ana = await room_with_reactions(make_user, open_clients)
    settings.MESSAGING = {**settings.MESSAGING, "REPLAY_LIMIT": 2}
    again = await open_clients(ana.user)
    await again.join("lobby", since=5, reactions_from=1)
    assert [f["d"]["seq"] for f in await again.frames("reaction", 2)] == [3, 5]
    assert await again.nothing_more()


@pytest.mark.parametrize("reactions_from", [-1, "1", 1.5, True, [1]])
async def test_a_bad_reactions_from_is_invalid_and_joins_nobody(make_user, open_clients, reactions_from):
    eve = await make_user("eve")
    client = await open_clients(eve)
    ack = await client.call("room.join", {"room": "lobby", "reactions_from": reactions_from})
    assert ack["ok"] is False and ack["error"]["code"] == "invalid" and ack["error"]["retry"] is False
    assert not await database_sync_to_async(Membership.objects.filter(user=eve).exists)()
    assert await client.nothing_more()


async def test_same_reaction_through_two_server_processes_counts_once(start_daphne):
    a, b = start_daphne(), start_daphne()
    session = sign_in(a.url, "ana")
    sockets = [await SocketClient(server.url, session).connect() for server in (a, b) for _ in range(3)]
    try:
        for ws in sockets:
            assert (await ws.call("room.join", {"room": "lobby"}))["ok"]
        assert (await sockets[0].call("room.post", {"room": "lobby", "body": "like me"}))["ok"]
        acks = await asyncio.gather(
            *(ws.call("reaction.add", {"room": "lobby", "seq": 1}, id="cross") for ws in sockets)
        )
    finally:
        await asyncio.gather(*(ws.close() for ws in sockets))
    assert sorted(ack["dup"] for ack in acks) == [False] + [True] * 5
    assert {ack["d"]["count"] for ack in acks} == {1}
    assert await count_of(1) == 1
