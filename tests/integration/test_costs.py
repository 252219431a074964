"""What a command costs, counted, not timed: SQL queries and Redis round trips.

The counts are the regression guard of docs/PERFORMANCE.md: the benchmark
shows what a round trip costs, these tests keep the number of them from
creeping up. Each ceiling is the count the hot path has today. The Redis
count covers the exactly-once path (the claim store); fan-out is the hub's one
`PUBLISH`, outside `execute`.
"""
from __future__ import annotations

import uuid
from contextlib import contextmanager

import pytest
from asgiref.sync import sync_to_async
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext

from messaging.core import handlers, idempotency, loopdb
from messaging.core.idempotency import Delivery, execute, execute_async, execute_many, execute_many_async, get_claim_store
from messaging.models import CommandRecord, Message
from messaging.core.protocol import Command
from messaging.chat.receipts import move_watermarks_portably

# A one-statement post (membership, seq, message and record); the claim, then the result.
POST_QUERIES, POST_REDIS = 1, 2
# Answered from Redis alone.
KNOWN_DUPLICATE_QUERIES, KNOWN_DUPLICATE_REDIS = 0, 1
# Redis forgot it: the post's statement fails on the unique constraint, the record answers, Redis learns it again.
FORGOTTEN_DUPLICATE_QUERIES, FORGOTTEN_DUPLICATE_REDIS = 2, 2
# Where a handler has no one-statement form: BEGIN, membership, seq, message, record, COMMIT.
PORTABLE_POST_QUERIES = 6
# A batch of commands (execute_many): one script call for all claims, one for all results.
BATCH = 10
# Posts: one statement for all of them.
BATCH_POST_QUERIES, BATCH_POST_REDIS = 1, 2
# Duplicates Redis knows: the claims' round trip answers them all.
BATCH_KNOWN_DUPLICATE_QUERIES, BATCH_KNOWN_DUPLICATE_REDIS = 0, 1
# A batch as the server runs it (execute_many_async): Redis and the posts'
# statement from the event loop, no database thread hop; with the loop's
# connections turned off (LOOP_DATABASE), one hop for the posts.
BATCH_POST_HOPS, BATCH_KNOWN_DUPLICATE_HOPS, BATCH_POST_HOPS_WITHOUT_LOOP_DATABASE = 0, 0, 1
# BEGIN, the move (one call of its function, migration 0007), COMMIT.
RECEIPT_QUERIES, RECEIPT_REDIS = 3, 0
# As the server runs it (execute_async): that call from the event loop, its own transaction.
LOOP_RECEIPT_QUERIES, LOOP_RECEIPT_HOPS = 1, 0
# The ORM's form, for databases without the function: BEGIN, lock the membership,
# the room's state lock, move it, record the move, advance the message states
# per watermark that moved and read back the messages it moved (for their
# senders' `state` frames: the ORM has no UPDATE ... RETURNING), count the
# members up to one past MEMBERS_ON_JOIN (whether to broadcast `status`),
# COMMIT. Eight before `state` frames; the function's call stays one.
PORTABLE_RECEIPT_QUERIES = 11

pytestmark = [pytest.mark.django_db(transaction=True)]


@contextmanager
def counted():
    """Count SQL queries on this thread's connection and round trips to the claim store's Redis:
    a command sent alone is one, a pipeline of commands is one."""
    client = get_claim_store().client
    calls = []
    send = client.execute_command
    pipeline = client.pipeline

    def counting(*args, **kwargs):
        calls.append(args[0])
        return send(*args, **kwargs)

    def counting_pipeline(*args, **kwargs):
        pipe = pipeline(*args, **kwargs)
        execute = pipe.execute

        def counting_execute(*args, **kwargs):
            calls.append(" ".join(str(command[0][0]) for command in pipe.command_stack))
            return execute(*args, **kwargs)

        pipe.execute = counting_execute
        return pipe

    client.execute_command = counting
    client.pipeline = counting_pipeline
    try:
        with CaptureQueriesContext(connection) as queries:
            yield queries, calls
    finally:
        del client.execute_command
        del client.pipeline


@pytest.fixture
async def counted_on_the_loop(monkeypatch):
    """Count round trips to the claim store's Redis from the event loop, database
    thread hops, and the SQL statements run on those threads and on the loop."""
    calls, hops, queries = [], [], []
    claim_many, _ = get_claim_store()._async_scripts()
    client = claim_many.registered_client
    send = client.execute_command

    async def counting(*args, **kwargs):
        calls.append(args[0])
        return await send(*args, **kwargs)

    apply = idempotency.Batch.apply

    def counting_apply(batch, *args):
        hops.append(len(batch.claimed))
        with CaptureQueriesContext(connection) as captured:
            apply(batch, *args)
        queries.extend(q["sql"] for q in captured.captured_queries)

    fetch = loopdb.LoopDatabase.fetch

    async def counting_fetch(database, sql, params):
        queries.append(sql)
        return await fetch(database, sql, params)

    monkeypatch.setattr(client, "execute_command", counting)
    monkeypatch.setattr(idempotency.Batch, "apply", counting_apply)
    monkeypatch.setattr(loopdb.LoopDatabase, "fetch", counting_fetch)
    return calls, hops, queries


async def test_on_the_event_loop_a_batch_of_posts_costs_no_hop_one_statement_and_two_round_trips(
    members, counted_on_the_loop
):
    calls, hops, queries = counted_on_the_loop
    batch = posts(members)
    outcomes = await execute_many_async(batch)
    assert [o.dup for o in outcomes] == [False] * BATCH
    assert (len(hops), len(queries), len(calls)) <= (BATCH_POST_HOPS, BATCH_POST_QUERIES, BATCH_POST_REDIS), (
        hops, queries, calls
    )


async def test_without_the_loops_connections_a_batch_of_posts_costs_one_hop_and_one_statement(
    members, counted_on_the_loop, settings
):
    settings.MESSAGING = {**settings.MESSAGING, "LOOP_DATABASE": False}
    calls, hops, queries = counted_on_the_loop
    outcomes = await execute_many_async(posts(members))
    assert [o.dup for o in outcomes] == [False] * BATCH
    assert (len(hops), len(queries), len(calls)) <= (
        BATCH_POST_HOPS_WITHOUT_LOOP_DATABASE, BATCH_POST_QUERIES, BATCH_POST_REDIS
    ), (hops, queries, calls)


async def test_on_the_event_loop_known_duplicates_cost_one_round_trip_and_no_database_thread(
    members, counted_on_the_loop
):
    calls, hops, queries = counted_on_the_loop
    batch = posts(members)
    first = await execute_many_async(batch)
    del calls[:], hops[:], queries[:]
    again = await execute_many_async(batch)
    assert all(o.dup and o.source == "redis" for o in again)
    assert [o.data for o in again] == [o.data for o in first]
    assert (len(hops), len(queries), len(calls)) <= (
        BATCH_KNOWN_DUPLICATE_HOPS, BATCH_KNOWN_DUPLICATE_QUERIES, BATCH_KNOWN_DUPLICATE_REDIS
    ), (hops, queries, calls)


def run(user, t: str, d: dict, id: str | None = None):
    return execute(*parts(user, t, d, id))


def parts(user, t: str, d: dict, id: str | None = None) -> tuple:
    command = Command(id=id or uuid.uuid4().hex, t=t, d=d)
    handler = handlers.lookup(t)
    return user, command, handler, handlers.validate(handler, d)


@pytest.fixture
def member(django_user_model):
    user = django_user_model.objects.create_user(username=f"u-{uuid.uuid4().hex[:8]}")
    run(user, "room.join", {"room": "lobby"})
    # Warm the claim store: the first script call loads the script.
    run(user, "room.post", {"room": "lobby", "body": "warm-up"})
    return user


def test_a_post_costs_one_query_and_two_redis_round_trips(member):
    with counted() as (queries, redis_calls):
        outcome = run(member, "room.post", {"room": "lobby", "body": "hello"}, id="p1")
    assert outcome.data["seq"] == 2 and not outcome.dup
    assert Message.objects.filter(client_msg_id="p1").count() == 1
    assert CommandRecord.objects.filter(command_id="p1").count() == 1
    assert len(queries) <= POST_QUERIES, [q["sql"] for q in queries]
    assert len(redis_calls) <= POST_REDIS, redis_calls


def test_a_duplicate_redis_knows_costs_no_query(member):
    first = run(member, "room.post", {"room": "lobby", "body": "hello"}, id="d1")
    with counted() as (queries, redis_calls):
        again = run(member, "room.post", {"room": "lobby", "body": "hello"}, id="d1")
    assert again.dup and again.data == first.data
    assert len(queries) <= KNOWN_DUPLICATE_QUERIES, [q["sql"] for q in queries]
    assert len(redis_calls) <= KNOWN_DUPLICATE_REDIS, redis_calls


def test_a_duplicate_redis_forgot_is_answered_by_the_record(member, redis_client):
    first = run(member, "room.post", {"room": "lobby", "body": "hello"}, id="f1")
    redis_client.flushdb()
    with counted() as (queries, redis_calls):
        again = run(member, "room.post", {"room": "lobby", "body": "hello"}, id="f1")
    assert again.dup and again.data == first.data
    assert Message.objects.filter(client_msg_id="f1").count() == 1
    assert len(queries) <= FORGOTTEN_DUPLICATE_QUERIES, [q["sql"] for q in queries]
    assert len(redis_calls) <= FORGOTTEN_DUPLICATE_REDIS, redis_calls


@pytest.fixture
def members(member, django_user_model):
    """Three users in `lobby` and `side`."""
    users = [member, *(django_user_model.objects.create_user(username=f"u-{uuid.uuid4().hex[:8]}") for _ in range(2))]
    for user in users:
        for room in ("lobby", "side"):
            run(user, "room.join", {"room": room})
    return users


def posts(users, t: str = "room.post", count: int = BATCH) -> list[Delivery]:
    return [
        Delivery(*parts(users[n % len(users)], t, {"room": ("lobby", "side")[n % 2], "body": f"m{n}"}))
        for n in range(count)
    ]


def test_a_batch_of_posts_costs_one_query_and_two_redis_round_trips(members):
    batch = posts(members)
    with counted() as (queries, redis_calls):
        outcomes = execute_many(batch)
    assert [o.dup for o in outcomes] == [False] * BATCH
    assert sorted(o.data["seq"] for o in outcomes if o.data["room"] == "side") == list(range(1, BATCH // 2 + 1))
    assert CommandRecord.objects.filter(command_id__in=[d.command.id for d in batch]).count() == BATCH
    assert len(queries) <= BATCH_POST_QUERIES, [q["sql"] for q in queries]
    assert len(redis_calls) <= BATCH_POST_REDIS, redis_calls


def test_a_batch_of_duplicates_redis_knows_costs_one_round_trip(members):
    batch = posts(members)
    first = execute_many(batch)
    with counted() as (queries, redis_calls):
        again = execute_many(batch)
    assert all(o.dup and o.source == "redis" for o in again)
    assert [o.data for o in again] == [o.data for o in first]
    assert len(queries) <= BATCH_KNOWN_DUPLICATE_QUERIES, [q["sql"] for q in queries]
    assert len(redis_calls) <= BATCH_KNOWN_DUPLICATE_REDIS, redis_calls


@pytest.fixture
def portable_post():
    """room.post as a handler without a one-statement form, as on databases other than PostgreSQL."""
    post = handlers.lookup("room.post")
    handlers.register(handlers.Handler(type="test.portable-post", apply=post.apply, validate=post.validate))
    yield
    handlers._registry.pop("test.portable-post")


def test_the_portable_post_path_stays_within_its_ceiling(member, portable_post):
    with counted() as (queries, redis_calls):
        outcome = run(member, "test.portable-post", {"room": "lobby", "body": "hello"}, id="q1")
    assert outcome.data["seq"] == 2
    assert CommandRecord.objects.filter(command_id="q1").count() == 1
    assert len(queries) <= PORTABLE_POST_QUERIES, [q["sql"] for q in queries]
    assert len(redis_calls) <= POST_REDIS, redis_calls


def test_a_batch_without_a_batch_form_runs_one_by_one_within_the_two_round_trips(members, portable_post):
    batch = posts(members, "test.portable-post", count=4)
    with counted() as (queries, redis_calls):
        outcomes = execute_many(batch)
    assert [o.dup for o in outcomes] == [False] * 4
    assert len(queries) <= 4 * PORTABLE_POST_QUERIES, [q["sql"] for q in queries]
    assert len(redis_calls) <= POST_REDIS, redis_calls


def test_a_receipt_costs_no_redis_and_a_few_queries(reader):
    with counted() as (queries, redis_calls):
        outcome = run(reader, "receipt", {"room": "lobby", "delivered": 2, "read": 2})
    assert outcome.data == {"room": "lobby", "delivered": 2, "read": 2}
    assert Message.objects.get(seq=2).state == "read"
    assert len(queries) <= RECEIPT_QUERIES, [q["sql"] for q in queries]
    assert len(redis_calls) <= RECEIPT_REDIS, redis_calls


@pytest.fixture
def reader(member, django_user_model):
    """A member of the lobby, behind `member`'s post (seq 2)."""
    user = django_user_model.objects.create_user(username=f"r-{uuid.uuid4().hex[:8]}")
    run(user, "room.join", {"room": "lobby"})
    run(member, "room.post", {"room": "lobby", "body": "read me"})
    return user


async def test_on_the_event_loop_a_receipt_costs_one_statement_and_no_database_thread(reader, monkeypatch):
    hops, queries = [], []
    to_thread = idempotency.run_in_db_thread
    fetch = loopdb.LoopDatabase.fetch

    async def counting_hop(func, *args):
        hops.append(func)
        return await to_thread(func, *args)

    async def counting_fetch(database, sql, params):
        queries.append(sql)
        return await fetch(database, sql, params)

    monkeypatch.setattr(idempotency, "run_in_db_thread", counting_hop)
    monkeypatch.setattr(loopdb.LoopDatabase, "fetch", counting_fetch)
    outcome = await execute_async(*parts(reader, "receipt", {"room": "lobby", "delivered": 2, "read": 2}))
    assert outcome.data == {"room": "lobby", "delivered": 2, "read": 2}
    assert await sync_to_async(lambda: Message.objects.get(seq=2).state)() == "read"
    assert (len(hops), len(queries)) <= (LOOP_RECEIPT_HOPS, LOOP_RECEIPT_QUERIES), (hops, queries)


def test_the_portable_receipt_path_stays_within_its_ceiling(reader):
    with counted() as (queries, redis_calls), transaction.atomic():
        move = move_watermarks_portably(reader, "lobby", 2, 2)
    assert move.moved and Message.objects.get(seq=2).state == "read"
    assert len(queries) <= PORTABLE_RECEIPT_QUERIES, [q["sql"] for q in queries]
    assert len(redis_calls) <= RECEIPT_REDIS, redis_calls


# An edit (PROTOCOL 1.1), in its transaction: BEGIN, the membership with its
# room, the message's row lock, the room's next rev, the new body and
# version, the version's record, the command record, COMMIT; the claim and
# the result in Redis, as for a post.
EDIT_QUERIES, EDIT_REDIS = 8, 2
# A join with since_rev, as a reconnect sends it: BEGIN, the room, the
# membership's watermark, the members' page, the unread count, the three
# range scans of the replay (posted, changed, counts), COMMIT. No Redis.
SINCE_REV_JOIN_QUERIES, SINCE_REV_JOIN_REDIS = 9, 0


def test_an_edit_costs_one_transaction_of_a_few_statements_and_two_redis_round_trips(member):
    with counted() as (queries, redis_calls):
        outcome = run(member, "message.edit", {"room": "lobby", "seq": 1, "body": "warmed up"}, id="e1")
    assert outcome.data["version"] == 2 and not outcome.dup
    assert Message.objects.get(seq=1).body == "warmed up"
    assert len(queries) <= EDIT_QUERIES, [q["sql"] for q in queries]
    assert len(redis_calls) <= EDIT_REDIS, redis_calls


def test_a_resume_by_since_rev_costs_a_few_bounded_queries_whatever_changed(member):
    for n in range(5):
        run(member, "room.post", {"room": "lobby", "body": f"m{n}"})
    run(member, "message.edit", {"room": "lobby", "seq": 1, "body": "edited"})
    run(member, "message.delete", {"room": "lobby", "seq": 2})
    run(member, "reaction.add", {"room": "lobby", "seq": 3})
    with counted() as (queries, redis_calls):
        outcome = run(member, "room.join", {"room": "lobby", "since_rev": 1})
    assert outcome.data["last_rev"] == 9
    # The warm-up post is seq 1 (rev 1); seq 2, deleted, comes as its tombstone.
    assert [f["t"] for f in outcome.replies] == ["msg"] * 5 + ["msg.edit", "reaction"]
    assert outcome.replies[0]["d"]["deleted"] is True
    assert len(queries) <= SINCE_REV_JOIN_QUERIES, [q["sql"] for q in queries]
    assert len(redis_calls) <= SINCE_REV_JOIN_REDIS, redis_calls
