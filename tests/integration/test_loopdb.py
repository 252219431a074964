"""The event loop's own PostgreSQL connections (messaging/core/gateway.py): posts
stored without a database thread, and what a broken, failed or interrupted
statement there leaves behind: nothing applied twice, nothing lost."""

from __future__ import annotations

import asyncio
import uuid

import pytest
from asgiref.sync import sync_to_async
from django.db import connection

from messaging.core import pipeline
from messaging.core.claims import claim_key
from messaging.core.exceptions import Unavailable
from messaging.core.gateway import Gateway, LoopConnections
from messaging.core.outcomes import Delivery
from messaging.core.pipeline import run_batch
from messaging.core.protocol import Command
from messaging.core.runtime import close_all_runtimes, runtime
from messaging.models import CommandRecord, Membership, Message

from .conftest import apply_command, post_delivery

pytestmark = [pytest.mark.django_db(transaction=True)]


def post(user, body: str, id: str | None = None) -> Delivery:
    return post_delivery(user, "a", body, id)


@pytest.fixture
def members(django_user_model):
    ana, bob = (django_user_model.objects.create_user(username=f"{n}-{uuid.uuid4().hex[:6]}") for n in "ab")
    for user in (ana, bob):
        apply_command(user, "room.join", {"room": "a"})
    return ana, bob


@pytest.fixture
def no_thread(monkeypatch):
    """Fail the test if a batch takes a database thread."""
    hops = []

    async def hop(gateway, func, *args):
        hops.append(func)
        raise AssertionError("a batch of posts took a database thread")

    monkeypatch.setattr(Gateway, "run", hop)
    return hops


@sync_to_async
def stored() -> tuple[list[tuple[int, str]], int]:
    messages = sorted(Message.objects.values_list("seq", "body"))
    return messages, CommandRecord.objects.filter(type="room.post").count()


def backend_pids(database: LoopConnections) -> set[int]:
    return {conn.info.backend_pid for conn in database.open}


async def test_posts_are_stored_from_the_loop_on_one_kept_connection(members, no_thread):
    ana, bob = members
    first = await run_batch([post(ana, "one"), post(bob, "two")])
    database = runtime().gateway.connections
    pids = backend_pids(database)
    second = await run_batch([post(ana, "three")])

    assert [o.data["seq"] for o in first + second] == [1, 2, 3]
    assert await stored() == ([(1, "one"), (2, "two"), (3, "three")], 3)
    assert len(pids) == 1 and backend_pids(database) == pids, "one connection, kept between batches"


async def test_a_duplicate_redis_forgot_is_answered_by_its_record_and_the_rest_of_its_batch_applied_once(
    members, redis_client
):
    ana, bob = members
    [first] = await run_batch([post(ana, "one", id="same")])
    redis_client.flushdb()
    # The batch's statement fails on the unique constraint; each post then runs alone.
    again, new = await run_batch([post(ana, "one", id="same"), post(bob, "two")])

    assert again.dup and again.source == "database" and again.data == first.data
    assert not new.dup and new.data["seq"] == 2
    assert await stored() == ([(1, "one"), (2, "two")], 2)
    assert len(runtime().gateway.connections.open) == 1, "a unique violation leaves the connection usable"


async def test_a_connection_killed_between_batches_fails_one_batch_and_the_retry_applies_once(members, redis_client):
    ana, bob = members
    await run_batch([post(ana, "one")])
    database = runtime().gateway.connections
    [pid] = backend_pids(database)
    await sync_to_async(terminate)(pid)

    lost = post(bob, "two", id="retried")
    [failed] = await run_batch([lost])
    assert isinstance(failed, Unavailable)
    assert not redis_client.exists(claim_key(bob.pk, "retried")), "the claim is released for the retry"
    assert database.open == set(), "the broken connection is dropped"

    [retried] = await run_batch([post(bob, "two", id="retried")])
    assert not retried.dup and retried.data["seq"] == 2
    assert await stored() == ([(1, "one"), (2, "two")], 2)
    assert backend_pids(database) and backend_pids(database) != {pid}, "a fresh connection"


def terminate(pid: int) -> None:
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_terminate_backend(%s)", [pid])


@pytest.mark.parametrize("early", [True, False], ids=["statement beside the claims", "statement after the claims"])
async def test_a_batch_cancelled_mid_statement_stores_nothing_and_drops_its_connection(
    members, redis_client, settings, early
):
    settings.MESSAGING = {**settings.MESSAGING, "EARLY_STATEMENT": early}
    ana, _ = members
    await run_batch([post(ana, "one")])
    # The room's row lock, which every post of the room takes for its seq.
    await cancel_while_it_waits(
        "SELECT id FROM messaging_room WHERE slug = 'a' FOR UPDATE",
        [],
        run_batch([post(ana, "cancelled", id="cancelled")]),
    )
    assert await stored() == ([(1, "one")], 1)
    assert not redis_client.exists(claim_key(ana.pk, "cancelled")), "its claim is released"
    [retried] = await run_batch([post(ana, "cancelled", id="cancelled")])
    assert not retried.dup and retried.data["seq"] == 2


async def cancel_while_it_waits(lock: str, params: list, statement) -> None:
    """Hold `lock` (a locking SELECT) in a transaction, start `statement` (a
    coroutine) and cancel it once it waits for that lock: its connection must
    be dropped. Then let the lock go, and give a statement that had survived
    the cancel the time to commit."""
    database = runtime().gateway.connections
    locker = await LoopConnections().connect()
    try:
        async with locker.transaction():
            await locker.execute(lock, params)
            waiting = asyncio.ensure_future(statement)
            await wait_for_lock_waiters(locker, 1)
            waiting.cancel()
            with pytest.raises(asyncio.CancelledError):
                await waiting
            assert database.open == set(), "a connection interrupted mid-statement is not reused"
        await asyncio.sleep(0.2)
    finally:
        await locker.close()


async def wait_for_lock_waiters(locker, count: int) -> None:
    watcher = await LoopConnections().connect()
    try:
        for _ in range(200):
            cursor = await watcher.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'"
            )
            if (await cursor.fetchone())[0] >= count:
                return
            await asyncio.sleep(0.02)
        raise AssertionError("the batch's statement never waited for the room's lock")
    finally:
        await watcher.close()


async def test_without_a_database_the_batch_is_unavailable_and_nothing_is_kept(members, redis_client, monkeypatch):
    ana, _ = members

    async def refused(database):
        import psycopg

        raise psycopg.OperationalError("connection refused")

    monkeypatch.setattr(LoopConnections, "connect", refused)
    [failed] = await run_batch([post(ana, "one", id="first")])
    assert isinstance(failed, Unavailable)
    assert not redis_client.exists(claim_key(ana.pk, "first"))
    monkeypatch.undo()
    [applied] = await run_batch([post(ana, "one", id="first")])
    assert not applied.dup and applied.data["seq"] == 1


async def test_the_loops_statements_are_logged_where_django_logs_queries(members):
    ana, _ = members
    # CaptureQueriesContext, without its connecting, which is sync only.
    connection.force_debug_cursor = True
    try:
        connection.queries_log.clear()
        await run_batch([post(ana, "one")])
        logged = list(connection.queries_log)
    finally:
        connection.force_debug_cursor = False
    assert [q for q in logged if "WITH ORDINALITY" in q["sql"]], logged


async def test_turned_off_posts_take_a_database_thread(members, settings):
    settings.MESSAGING = {**settings.MESSAGING, "LOOP_DATABASE": False}
    assert not runtime().gateway.on_loop
    ana, _ = members
    [outcome] = await run_batch([post(ana, "one")])
    assert outcome.data["seq"] == 1


async def test_closing_closes_every_connection_of_every_loop(members):
    ana, _ = members
    await run_batch([post(ana, "one")])
    database = runtime().gateway.connections
    [conn] = database.open
    close_all_runtimes()
    assert conn.closed and database.open == set()


TRICKY_BODIES = [
    "quotes \" and ' and a backslash \\ and \\u0041 written out",
    '{"t": "msg", "d": [1, 2]}',
    "line\nbreak\ttab\rreturn \x01 control",
    "emoji 😀👩‍👩‍👧 astral 𝄞, combining e\u0301, rtl שלום, bom \ufeff, noncharacter \uffff",
    "x" * 4000,
]


@pytest.mark.parametrize("on_the_loop", [True, False], ids=["loop", "thread"])
async def test_bodies_reach_the_database_and_the_frames_exactly_as_sent(members, settings, on_the_loop):
    # The posts travel to the statement as one JSON text: nothing in a body
    # may be re-escaped, normalized or cut on the way.
    settings.MESSAGING = {**settings.MESSAGING, "LOOP_DATABASE": on_the_loop}
    ana, _ = members
    outcomes = await run_batch([post(ana, body) for body in TRICKY_BODIES])
    assert [o.data["seq"] for o in outcomes] == list(range(1, len(TRICKY_BODIES) + 1))
    assert [body for _, body in (await stored())[0]] == TRICKY_BODIES
    frames = [frame for o in outcomes for _, frame in o.broadcasts]
    assert [f["d"]["body"] for f in frames] == TRICKY_BODIES


def receipt(user, delivered: int) -> Delivery:
    return pipeline.prepare(user, Command(id=uuid.uuid4().hex, t="receipt", d={"room": "a", "delivered": delivered}))


async def execute_async(delivery: Delivery):
    """One delivery through the pipeline: its outcome, or raises its exception."""
    [result] = await pipeline.run([delivery])
    if isinstance(result, Exception):
        raise result
    return result


@sync_to_async
def watermark(user) -> int:
    return Membership.objects.get(user=user, room__slug="a").delivered


async def test_a_receipt_on_a_killed_connection_is_unavailable_moves_nothing_and_the_retry_moves(members):
    ana, bob = members
    await run_batch([post(ana, "one")])
    assert (await execute_async(receipt(bob, 1))).data["delivered"] == 1
    database = runtime().gateway.connections
    [pid] = backend_pids(database)
    await sync_to_async(terminate)(pid)

    with pytest.raises(Unavailable):
        await execute_async(receipt(ana, 1))
    assert database.open == set(), "the broken connection is dropped"
    assert await watermark(ana) == 0
    moved = await execute_async(receipt(ana, 1))
    assert moved.data["delivered"] == 1 and moved.broadcasts
    assert await watermark(ana) == 1


async def test_a_batch_of_receipts_cancelled_while_it_waits_moves_nothing_and_drops_its_connection(members):
    ana, bob = members
    await run_batch([post(ana, "one")])
    # Bob's membership row, which his receipt locks. Receipts are gathered into
    # batches of their own (pipeline.run_gathered), as posts are: the batch is cancelled.
    await cancel_while_it_waits(
        "SELECT m.id FROM messaging_membership m JOIN messaging_room r ON r.id = m.room_id"
        " WHERE r.slug = 'a' AND m.user_id = %s FOR UPDATE",
        [bob.pk],
        pipeline.run_gathered([receipt(bob, 1)]),
    )
    assert await watermark(bob) == 0
    assert (await execute_async(receipt(bob, 1))).data["delivered"] == 1


async def test_a_loop_opens_no_more_connections_than_its_limit_and_the_rest_wait_their_turn(settings):
    settings.MESSAGING = {**settings.MESSAGING, "DB_THREADS": 3}
    database = LoopConnections()
    most = 0

    async def watched(sql, params):
        nonlocal most
        rows = await database.fetch(sql, params)
        most = max(most, len(database.open))
        return rows

    try:
        results = await asyncio.gather(*(watched("SELECT %(n)s::int, pg_sleep(0.05)", {"n": n}) for n in range(10)))
        assert [rows[0][0] for rows in results] == list(range(10))
        assert most == len(database.open) == 3
    finally:
        database.close()
