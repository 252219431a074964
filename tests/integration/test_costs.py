"""What a command costs, counted, not timed: SQL queries and Redis round trips.

The counts are the regression guard of docs/PERFORMANCE.md: the benchmark
shows what a round trip costs, these tests keep the number of them from
creeping up. Each ceiling is the count the hot path has today, counted on
the pipeline as the server runs it (messaging/core/pipeline.py): statements
on the event loop's connections and on database threads, the thread hops,
and round trips to the claim store's Redis; fan-out is the hub's one
`PUBLISH`, outside the pipeline.
"""

from __future__ import annotations

import asyncio
import uuid

import pytest
from asgiref.sync import sync_to_async
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext

from messaging.chat.receipts import move_watermarks_portably
from messaging.core import handlers, pipeline
from messaging.core.claims import get_claim_store
from messaging.core.gateway import Gateway, LoopConnections
from messaging.core.outcomes import Delivery
from messaging.core.protocol import Command
from messaging.models import CommandRecord, Message

# A one-statement post (membership, seq, message and record); the claim, then the result.
POST_QUERIES, POST_REDIS = 1, 2
# Answered by Redis. Its statement went out beside the claims (`EARLY_STATEMENT`), found
# the record and changed nothing; after a batch of mostly known duplicates, or with
# `EARLY_STATEMENT` off, there is none.
KNOWN_DUPLICATE_QUERIES, KNOWN_DUPLICATE_REDIS = 1, 1
KNOWN_DUPLICATE_QUERIES_AFTER_DUPLICATES = 0
# Redis forgot it: the post's statement finds the record, which answers; Redis learns it again.
FORGOTTEN_DUPLICATE_HOPS, FORGOTTEN_DUPLICATE_QUERIES, FORGOTTEN_DUPLICATE_REDIS = 0, 1, 2
# Where a handler has no one-statement form: BEGIN, membership, seq (and the
# event's position), message, its event (messaging/events/outbox.py), record, COMMIT.
PORTABLE_POST_QUERIES = 7
# A batch of commands (`run_batch`): one script call for all claims, one for all results.
BATCH = 10
# Posts: one statement for all of them.
BATCH_POST_QUERIES, BATCH_POST_REDIS = 1, 2
# Duplicates Redis knows: the claims' round trip answers them all (the statement beside
# it, as for one, unless the batch before was mostly known duplicates).
BATCH_KNOWN_DUPLICATE_QUERIES, BATCH_KNOWN_DUPLICATE_REDIS = 1, 1
# Redis and the posts' statement from the event loop, no database thread hop;
# with the loop's connections turned off (LOOP_DATABASE), one hop for the posts.
BATCH_POST_HOPS, BATCH_KNOWN_DUPLICATE_HOPS, BATCH_POST_HOPS_WITHOUT_LOOP_DATABASE = 0, 0, 1
# Without the loop's connections: the move (one call of its function, migration 0008) on a thread.
RECEIPT_QUERIES, RECEIPT_REDIS, RECEIPT_HOPS = 1, 0, 1
# That call from the event loop, its own transaction.
LOOP_RECEIPT_QUERIES, LOOP_RECEIPT_HOPS = 1, 0
# Receipts of several senders that arrive together, and one sender's pipelined
# receipts: one call of the function for all of them (migration 0016). A batch
# starts without waiting, so the first may run alone and the rest in the next.
GATHERED_RECEIPTS, GATHERED_RECEIPT_CALLS = 8, 2
# The ORM's form, for databases without the function: BEGIN, the room's state
# lock (with the room's id and last seq), lock the membership, move it, record the move, advance the message states
# per watermark that moved and read back the messages it moved (for their
# senders' `state` frames: the ORM has no UPDATE ... RETURNING), count the
# members up to one past MEMBERS_ON_JOIN (whether to broadcast `status`),
# COMMIT. Eight before `state` frames; the function's call stays one. Then
# the events of the messages it moved: the room's event counter and one
# INSERT of them all (the read-back reads all the moved, in the same query).
PORTABLE_RECEIPT_QUERIES = 13

pytestmark = [pytest.mark.django_db(transaction=True)]


class Within(tuple):
    """Counts that compare with ceilings one by one (a tuple compares its first difference only)."""

    def __le__(self, ceilings: tuple) -> bool:  # type: ignore[override]
        return all(n <= most for n, most in zip(self, ceilings, strict=True))


@pytest.fixture
def counted(monkeypatch):
    """Count, from the event loop, round trips to the claim store's Redis, database
    thread hops, and the SQL statements run on those threads and on the loop.
    `counted.reset()` forgets what was counted so far."""

    class Counts:
        calls: list = []
        hops: list = []
        queries: list = []

        def reset(self) -> None:
            del self.calls[:], self.hops[:], self.queries[:]

        def of(self) -> Within:
            return Within((len(self.hops), len(self.queries), len(self.calls)))

    counts = Counts()
    counts.calls, counts.hops, counts.queries = [], [], []
    store = get_claim_store()
    real_scripts = type(store)._loop_scripts

    def scripts(self):
        claim_many, finish = real_scripts(self)
        client = claim_many.registered_client
        if not getattr(client, "counted", False):
            send = client.execute_command

            async def counting(*args, **kwargs):
                counts.calls.append(args[0])
                return await send(*args, **kwargs)

            client.execute_command = counting
            client.counted = True
        return claim_many, finish

    run = Gateway.run

    async def counting_run(gateway, func, *args):
        counts.hops.append(getattr(func, "__name__", func))

        def captured(*args):
            with CaptureQueriesContext(connection) as queries:
                try:
                    return func(*args)
                finally:
                    counts.queries.extend(q["sql"] for q in queries.captured_queries)

        return await run(gateway, captured, *args)

    fetch = LoopConnections.fetch

    async def counting_fetch(database, sql, params):
        counts.queries.append(sql)
        return await fetch(database, sql, params)

    monkeypatch.setattr(type(store), "_loop_scripts", scripts)
    monkeypatch.setattr(Gateway, "run", counting_run)
    monkeypatch.setattr(LoopConnections, "fetch", counting_fetch)
    return counts


async def submit(user, t: str, d: dict, id: str | None = None):
    return await pipeline.submit(user, Command(id=id or uuid.uuid4().hex, t=t, d=d))


def prepared(user, t: str, d: dict, id: str | None = None) -> Delivery:
    return pipeline.prepare(user, Command(id=id or uuid.uuid4().hex, t=t, d=d))


@pytest.fixture
async def member(django_user_model):
    user = await sync_to_async(django_user_model.objects.create_user)(username=f"u-{uuid.uuid4().hex[:8]}")
    await submit(user, "room.join", {"room": "lobby"})
    # Warm the claim store: the first script call loads the script.
    await submit(user, "room.post", {"room": "lobby", "body": "warm-up"})
    return user


@sync_to_async
def count(model, **filters) -> int:
    return model.objects.filter(**filters).count()


async def test_a_post_costs_one_statement_no_hop_and_two_redis_round_trips(member, counted):
    outcome = await submit(member, "room.post", {"room": "lobby", "body": "hello"}, id="p1")
    assert outcome.data["seq"] == 2 and not outcome.dup
    assert await count(Message, client_msg_id="p1") == 1 and await count(CommandRecord, command_id="p1") == 1
    assert counted.of() <= (0, POST_QUERIES, POST_REDIS), (counted.hops, counted.queries, counted.calls)


async def test_a_duplicate_redis_knows_is_answered_by_redis_beside_a_statement_that_changes_nothing(member, counted):
    first = await submit(member, "room.post", {"room": "lobby", "body": "hello"}, id="d1")
    counted.reset()
    again = await submit(member, "room.post", {"room": "lobby", "body": "hello"}, id="d1")
    assert again.dup and again.source == "redis" and again.data == first.data
    assert await count(Message, client_msg_id="d1") == 1
    assert counted.of() <= (0, KNOWN_DUPLICATE_QUERIES, KNOWN_DUPLICATE_REDIS), (counted.queries, counted.calls)


async def test_after_mostly_known_duplicates_a_duplicate_redis_knows_costs_no_query(member, counted):
    first = await submit(member, "room.post", {"room": "lobby", "body": "hello"}, id="d2")
    await submit(member, "room.post", {"room": "lobby", "body": "hello"}, id="d2")
    counted.reset()
    again = await submit(member, "room.post", {"room": "lobby", "body": "hello"}, id="d2")
    assert again.dup and again.source == "redis" and again.data == first.data
    assert counted.of() <= (0, KNOWN_DUPLICATE_QUERIES_AFTER_DUPLICATES, KNOWN_DUPLICATE_REDIS), (
        counted.queries,
        counted.calls,
    )
    # The next first-time post goes out beside its claims again; what follows it too.
    fresh = await submit(member, "room.post", {"room": "lobby", "body": "new"})
    counted.reset()
    await submit(member, "room.post", {"room": "lobby", "body": "hello"}, id="d2")
    assert not fresh.dup and len(counted.queries) == KNOWN_DUPLICATE_QUERIES


async def test_without_early_statements_a_duplicate_redis_knows_costs_no_query(member, counted, settings):
    settings.MESSAGING = {**settings.MESSAGING, "EARLY_STATEMENT": False}
    first = await submit(member, "room.post", {"room": "lobby", "body": "hello"}, id="d3")
    counted.reset()
    again = await submit(member, "room.post", {"room": "lobby", "body": "hello"}, id="d3")
    assert again.dup and again.source == "redis" and again.data == first.data
    assert counted.of() <= (0, KNOWN_DUPLICATE_QUERIES_AFTER_DUPLICATES, KNOWN_DUPLICATE_REDIS), (
        counted.queries,
        counted.calls,
    )


async def test_a_duplicate_redis_forgot_is_answered_by_the_record(member, counted, redis_client):
    first = await submit(member, "room.post", {"room": "lobby", "body": "hello"}, id="f1")
    redis_client.flushdb()
    counted.reset()
    again = await submit(member, "room.post", {"room": "lobby", "body": "hello"}, id="f1")
    assert again.dup and again.data == first.data
    assert await count(Message, client_msg_id="f1") == 1
    assert again.source == "database"
    assert counted.of() <= (FORGOTTEN_DUPLICATE_HOPS, FORGOTTEN_DUPLICATE_QUERIES, FORGOTTEN_DUPLICATE_REDIS), (
        counted.hops,
        counted.queries,
        counted.calls,
    )


@pytest.fixture
async def members(member, django_user_model):
    """Three users in `lobby` and `side`."""
    create = sync_to_async(django_user_model.objects.create_user)
    users = [member, *[await create(username=f"u-{uuid.uuid4().hex[:8]}") for _ in range(2)]]
    for user in users:
        for room in ("lobby", "side"):
            await submit(user, "room.join", {"room": room})
    return users


def posts(users, t: str = "room.post", count: int = BATCH) -> list[Delivery]:
    return [
        prepared(users[n % len(users)], t, {"room": ("lobby", "side")[n % 2], "body": f"m{n}"}) for n in range(count)
    ]


async def test_a_batch_of_posts_costs_no_hop_one_statement_and_two_round_trips(members, counted):
    batch = posts(members)
    outcomes = await pipeline.run_batch(batch)
    assert [o.dup for o in outcomes] == [False] * BATCH
    assert sorted(o.data["seq"] for o in outcomes if o.data["room"] == "side") == list(range(1, BATCH // 2 + 1))
    assert await count(CommandRecord, command_id__in=[d.command.id for d in batch]) == BATCH
    assert counted.of() <= (BATCH_POST_HOPS, BATCH_POST_QUERIES, BATCH_POST_REDIS), (
        counted.hops,
        counted.queries,
        counted.calls,
    )


async def test_without_the_loops_connections_a_batch_of_posts_costs_one_hop_and_one_statement(
    members, counted, settings
):
    settings.MESSAGING = {**settings.MESSAGING, "LOOP_DATABASE": False}
    outcomes = await pipeline.run_batch(posts(members))
    assert [o.dup for o in outcomes] == [False] * BATCH
    assert counted.of() <= (BATCH_POST_HOPS_WITHOUT_LOOP_DATABASE, BATCH_POST_QUERIES, BATCH_POST_REDIS), (
        counted.hops,
        counted.queries,
        counted.calls,
    )


async def test_known_duplicates_cost_one_round_trip_no_thread_and_after_a_storm_of_them_no_statement(members, counted):
    batch = posts(members)
    first = await pipeline.run_batch(batch)
    counted.reset()
    again = await pipeline.run_batch(batch)
    assert all(o.dup and o.source == "redis" for o in again)
    assert [o.data for o in again] == [o.data for o in first]
    assert counted.of() <= (BATCH_KNOWN_DUPLICATE_HOPS, BATCH_KNOWN_DUPLICATE_QUERIES, BATCH_KNOWN_DUPLICATE_REDIS), (
        counted.hops,
        counted.queries,
        counted.calls,
    )
    counted.reset()
    # A storm of retries: after a batch of mostly known duplicates, Redis alone answers.
    third = await pipeline.run_batch(batch)
    assert [o.data for o in third] == [o.data for o in first]
    assert counted.of() <= (
        BATCH_KNOWN_DUPLICATE_HOPS,
        KNOWN_DUPLICATE_QUERIES_AFTER_DUPLICATES,
        BATCH_KNOWN_DUPLICATE_REDIS,
    ), (counted.hops, counted.queries, counted.calls)


@pytest.fixture
def portable_post():
    """room.post without its batch form, as on databases other than PostgreSQL."""
    post = handlers.lookup("room.post")
    handlers.register(handlers.Handler(type="test.portable-post", apply=post.apply, validate=post.validate))
    yield
    handlers._registry.pop("test.portable-post")


async def test_the_portable_post_path_stays_within_its_ceiling(member, portable_post, counted):
    outcome = await submit(member, "test.portable-post", {"room": "lobby", "body": "hello"}, id="q1")
    assert outcome.data["seq"] == 2
    assert await count(CommandRecord, command_id="q1") == 1
    assert counted.of() <= (1, PORTABLE_POST_QUERIES, POST_REDIS), (counted.hops, counted.queries, counted.calls)


async def test_a_batch_without_a_batch_form_runs_one_by_one_in_one_hop_within_the_two_round_trips(
    members, portable_post, counted
):
    outcomes = await pipeline.run_batch(posts(members, "test.portable-post", count=4))
    assert [o.dup for o in outcomes] == [False] * 4
    assert counted.of() <= (1, 4 * PORTABLE_POST_QUERIES, POST_REDIS), (counted.hops, counted.queries, counted.calls)


@pytest.fixture
async def reader(member, django_user_model):
    """A member of the lobby, behind `member`'s post (seq 2)."""
    user = await sync_to_async(django_user_model.objects.create_user)(username=f"r-{uuid.uuid4().hex[:8]}")
    await submit(user, "room.join", {"room": "lobby"})
    await submit(member, "room.post", {"room": "lobby", "body": "read me"})
    return user


async def test_on_the_event_loop_a_receipt_costs_one_statement_and_no_database_thread(reader, counted):
    outcome = await submit(reader, "receipt", {"room": "lobby", "delivered": 2, "read": 2})
    assert outcome.data == {"room": "lobby", "delivered": 2, "read": 2}
    assert await sync_to_async(lambda: Message.objects.get(seq=2).state)() == "read"
    assert counted.of() <= (LOOP_RECEIPT_HOPS, LOOP_RECEIPT_QUERIES, RECEIPT_REDIS), (
        counted.hops,
        counted.queries,
        counted.calls,
    )


async def test_without_the_loops_connections_a_receipt_costs_one_hop_and_one_statement(reader, counted, settings):
    settings.MESSAGING = {**settings.MESSAGING, "LOOP_DATABASE": False}
    outcome = await submit(reader, "receipt", {"room": "lobby", "delivered": 2, "read": 2})
    assert outcome.data == {"room": "lobby", "delivered": 2, "read": 2}
    assert counted.of() <= (RECEIPT_HOPS, RECEIPT_QUERIES, RECEIPT_REDIS), (
        counted.hops,
        counted.queries,
        counted.calls,
    )


async def test_receipts_that_arrive_together_cost_one_call_of_the_function(reader, member, django_user_model, counted):
    create = sync_to_async(django_user_model.objects.create_user)
    readers = [reader, *[await create(username=f"r-{uuid.uuid4().hex[:8]}") for _ in range(GATHERED_RECEIPTS - 1)]]
    for user in readers[1:]:
        await submit(user, "room.join", {"room": "lobby"})
    counted.reset()
    outcomes = await asyncio.gather(*(submit(user, "receipt", {"room": "lobby", "delivered": 2}) for user in readers))
    assert [o.data["delivered"] for o in outcomes] == [2] * GATHERED_RECEIPTS
    calls = [q for q in counted.queries if "move_watermarks" in q]
    assert len(calls) <= GATHERED_RECEIPT_CALLS, calls

    # One sender's receipts, pipelined, stay together: one call, answered in order.
    counted.reset()
    results = await pipeline.submit_many(
        reader,
        [
            Command(id=uuid.uuid4().hex, t="receipt", d={"room": "lobby", "read": 1}),
            Command(id=uuid.uuid4().hex, t="receipt", d={"room": "elsewhere", "read": 1}),
            Command(id=uuid.uuid4().hex, t="receipt", d={"room": "lobby", "read": 2}),
        ],
    )
    assert results[0].data["read"] == 1 and results[2].data["read"] == 2
    assert type(results[1]).__name__ == "Forbidden"
    assert len([q for q in counted.queries if "move_watermarks" in q]) == 1, counted.queries


def test_the_portable_receipt_path_stays_within_its_ceiling(django_user_model):
    from asgiref.sync import async_to_sync

    async def setup():
        member = await sync_to_async(django_user_model.objects.create_user)(username=f"u-{uuid.uuid4().hex[:8]}")
        await submit(member, "room.join", {"room": "lobby"})
        await submit(member, "room.post", {"room": "lobby", "body": "warm-up"})
        user = await sync_to_async(django_user_model.objects.create_user)(username=f"r-{uuid.uuid4().hex[:8]}")
        await submit(user, "room.join", {"room": "lobby"})
        await submit(member, "room.post", {"room": "lobby", "body": "read me"})
        return user

    reader = async_to_sync(setup)()
    with CaptureQueriesContext(connection) as queries, transaction.atomic():
        move = move_watermarks_portably(reader, "lobby", 2, 2)
    assert move.moved and Message.objects.get(seq=2).state == "read"
    assert len(queries) <= PORTABLE_RECEIPT_QUERIES, [q["sql"] for q in queries]


# An edit (PROTOCOL 1.1), one hop to its transaction: BEGIN, the membership
# with its room, the message's row lock, the room's next rev, the new body
# and version, the version's record, the `message.edited` event's row (its
# position comes with the rev: docs/EVENTS.md), the command record, COMMIT;
# the claim and the result in Redis, as for a post.
EDIT_HOPS, EDIT_QUERIES, EDIT_REDIS = 1, 9, 2
# A join with since_rev, as a reconnect sends it, one hop: BEGIN, the room,
# the membership's watermark, the members' page, the unread count, the five
# range scans of the replay (posted, changed, threads, emoji counts, the
# reactions app's counts), the posted messages' emoji counts (one query for
# all; a second, the viewer's own, only where one has any), COMMIT. No
# Redis: a join is not exactly-once.
SINCE_REV_JOIN_HOPS, SINCE_REV_JOIN_QUERIES, SINCE_REV_JOIN_REDIS = 1, 12, 0


async def test_an_edit_costs_one_hop_to_a_transaction_of_a_few_statements_and_two_redis_round_trips(member, counted):
    outcome = await submit(member, "message.edit", {"room": "lobby", "seq": 1, "body": "warmed up"}, id="e1")
    assert outcome.data["version"] == 2 and not outcome.dup
    assert await sync_to_async(lambda: Message.objects.get(seq=1).body)() == "warmed up"
    assert counted.of() <= (EDIT_HOPS, EDIT_QUERIES, EDIT_REDIS), (counted.hops, counted.queries, counted.calls)


async def test_a_resume_by_since_rev_costs_a_few_bounded_queries_whatever_changed(member, counted):
    for n in range(5):
        await submit(member, "room.post", {"room": "lobby", "body": f"m{n}"})
    await submit(member, "message.edit", {"room": "lobby", "seq": 1, "body": "edited"})
    await submit(member, "message.delete", {"room": "lobby", "seq": 2})
    await submit(member, "reaction.add", {"room": "lobby", "seq": 3})
    counted.reset()
    outcome = await submit(member, "room.join", {"room": "lobby", "since_rev": 1})
    assert outcome.data["last_rev"] == 9
    # The warm-up post is seq 1 (rev 1); seq 2, deleted, comes as its tombstone.
    assert [f["t"] for f in outcome.replies] == ["msg"] * 5 + ["msg.edit", "reaction"]
    assert outcome.replies[0]["d"]["deleted"] is True
    assert counted.of() <= (SINCE_REV_JOIN_HOPS, SINCE_REV_JOIN_QUERIES, SINCE_REV_JOIN_REDIS), (
        counted.hops,
        counted.queries,
        counted.calls,
    )
