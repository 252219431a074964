"""Group commit: exactly-once commands that arrive together run as one batch, each with its own outcome."""

from __future__ import annotations

import asyncio
import threading
import uuid

import pytest
import redis
from asgiref.sync import async_to_sync
from django.db import connection, connections
from django.test.utils import CaptureQueriesContext
from prometheus_client import REGISTRY

from messaging.chat import posts
from messaging.conf import get_settings
from messaging.core import handlers, pipeline
from messaging.core.apply import Batch
from messaging.core.claims import claim_key, reset_claim_store
from messaging.core.exceptions import Forbidden, IdReused, Unavailable
from messaging.core.handlers import CommandContext
from messaging.core.outcomes import ClaimBusy
from messaging.core.runtime import runtime
from messaging.models import CommandRecord, Message, Room
from messaging.ops.metrics import BATCH_PHASE_NAMES

from .conftest import apply_command, post_delivery, run_batch, wait_until

pytestmark = [pytest.mark.django_db(transaction=True)]


delivery = post_delivery


@pytest.fixture
def users(django_user_model):
    """Three users; ana and bob in rooms `a` and `b`, cid in `a` only."""
    ana, bob, cid = (django_user_model.objects.create_user(username=f"{n}-{uuid.uuid4().hex[:6]}") for n in "abc")
    for user, rooms in [(ana, "ab"), (bob, "ab"), (cid, "a")]:
        for room in rooms:
            apply_command(user, "room.join", {"room": room})
    return ana, bob, cid


def test_a_batch_numbers_each_room_in_batch_order_and_answers_each_post(users, redis_client):
    ana, bob, cid = users
    known = apply_command(ana, "room.post", {"room": "a", "body": "earlier"}, id="known")
    batch = [
        delivery(ana, "b", "b1"),
        delivery(bob, "a", "a2"),
        delivery(cid, "b", "not a member"),
        delivery(ana, "a", "earlier", id="known"),
        delivery(cid, "a", "a3"),
        delivery(bob, "b", "b2"),
        delivery(ana, "a", "a4"),
    ]
    results = run_batch(batch)

    forbidden = results[2]
    assert isinstance(forbidden, Forbidden)
    dup = results[3]
    assert dup.dup and dup.source == "redis" and dup.data == known.data
    fresh = [0, 1, 4, 5, 6]
    applied = [results[i] for i in fresh]
    assert all(not r.dup and r.source is None for r in applied)
    assert [(r.data["room"], r.data["seq"]) for r in applied] == [("b", 1), ("a", 2), ("a", 3), ("b", 2), ("a", 4)]
    # Each applied post broadcasts its own message, with its own seq.
    assert [r.broadcasts[0][1]["d"]["body"] for r in applied] == ["b1", "a2", "a3", "b2", "a4"]
    assert all(r.broadcasts[0][1]["d"]["seq"] == r.data["seq"] for r in applied)

    assert not Message.objects.filter(body="not a member").exists()
    assert not CommandRecord.objects.filter(command_id=batch[2].command.id).exists()
    assert redis_client.get(claim_key(cid.pk, batch[2].command.id)) is None, "a refusal is not remembered"
    for i in fresh:
        d = batch[i]
        assert CommandRecord.objects.get(user=d.user, command_id=d.command.id).result == results[i].data
        assert redis_client.get(d.key).startswith(b"r:")
    assert dict(Room.objects.values_list("slug", "last_seq")) == {"a": 4, "b": 2}
    for room in "ab":
        sent = list(Message.objects.filter(room__slug=room).order_by("seq").values_list("seq", "sent_at"))
        assert [seq for seq, _ in sent] == list(range(1, len(sent) + 1))
        assert [at for _, at in sent] == sorted(at for _, at in sent), "sent_at never goes backwards against seq"


def test_the_second_copy_of_a_command_in_a_batch_waits_for_the_first(users, redis_client):
    ana, _, _ = users
    first, second = run_batch([delivery(ana, "a", "twice", id="same"), delivery(ana, "a", "twice", id="same")])
    assert not first.dup and isinstance(second, ClaimBusy)
    (again,) = run_batch([delivery(ana, "a", "twice", id="same")])
    assert again.dup and again.source == "redis" and again.data == first.data
    assert Message.objects.filter(client_msg_id="same").count() == 1


@pytest.fixture
def redis_down(settings):
    """The claim store's Redis does not answer: every claim is "unknown"."""
    settings.MESSAGING = {**settings.MESSAGING, "REDIS_URL": "redis://127.0.0.1:1/0"}
    reset_claim_store()
    yield
    reset_claim_store()


@pytest.mark.parametrize("early", [True, False], ids=["beside the claims", "after the claims"])
def test_two_copies_of_one_command_in_a_batch_apply_once_with_redis_down(users, redis_down, settings, early):
    # Beside the claims, only the first copy goes out early, and the second's
    # statement finds its record; after them, both copies fail one statement
    # on the record's unique constraint, and each runs alone.
    settings.MESSAGING = {**settings.MESSAGING, "EARLY_STATEMENT": early}
    ana, bob, _ = users
    results = run_batch(
        [
            delivery(ana, "a", "twice", id="same"),
            delivery(bob, "a", "other"),
            delivery(ana, "a", "twice", id="same"),
        ]
    )
    first, other, second = results
    assert not first.dup and not other.dup
    assert second.dup and second.source == "database" and second.data == first.data
    assert Message.objects.filter(client_msg_id="same").count() == 1
    assert sorted([first.data["seq"], other.data["seq"]]) == [1, 2]
    assert Room.objects.get(slug="a").last_seq == 2, "the undone attempt used up no seq"


def test_a_duplicate_redis_forgot_in_a_batch_is_answered_by_its_record_in_the_batch_statement(
    users, redis_client, settings
):
    # Statements on this thread's connection (asgiref's thread-sensitive hop), where the test counts them.
    settings.MESSAGING = {**settings.MESSAGING, "LOOP_DATABASE": False, "DB_THREADS": 0}
    ana, bob, _ = users
    before = apply_command(ana, "room.post", {"room": "a", "body": "hello"}, id="old")
    redis_client.flushdb()
    reused = delivery(bob, "b", "first use")
    apply_command(bob, "room.post", {"room": "b", "body": "first use"}, id=reused.command.id)
    redis_client.flushdb()
    batch = [
        delivery(bob, "a", "fresh 1"),
        delivery(ana, "a", "hello", id="old"),
        delivery(bob, "b", "another payload", id=reused.command.id),
        delivery(ana, "b", "fresh 2"),
    ]
    with CaptureQueriesContext(connection) as queries:
        fresh1, old, id_reused, fresh2 = run_batch(batch)
    statements = [q["sql"] for q in queries]
    assert len(statements) == 1 and "WITH ORDINALITY" in statements[0], "one statement for all of them"
    assert old.dup and old.source == "database" and old.data == before.data
    assert list(old.data) == list(before.data) == ["at", "seq", "room"], "one order in every copy: the record's"
    assert isinstance(id_reused, IdReused)
    assert not fresh1.dup and not fresh2.dup
    assert (fresh1.data["seq"], fresh2.data["seq"]) == (2, 2), "the record's answer took no seq"
    assert Message.objects.filter(client_msg_id="old").count() == 1
    assert Message.objects.count() == 4
    assert redis_client.get(claim_key(ana.pk, "old")).startswith(b"r:"), "Redis learned the record's answer"


@pytest.mark.parametrize("early", [True, False], ids=["beside the claims", "after the claims"])
def test_a_record_the_statement_did_not_see_fails_it_and_each_post_runs_alone(
    users, redis_client, settings, monkeypatch, early
):
    """A record committed after the statement's snapshot (another attempt's,
    between the two) is not in its `known`: the record's unique constraint
    undoes the statement, and each post runs alone, where the record answers."""
    settings.MESSAGING = {**settings.MESSAGING, "LOOP_DATABASE": False, "DB_THREADS": 0, "EARLY_STATEMENT": early}
    ana, bob, _ = users
    before = apply_command(ana, "room.post", {"room": "a", "body": "hello"}, id="old")
    redis_client.flushdb()
    blind = posts.POSTS_AND_RECORDS.replace("c.command_id = i.command_id", "c.command_id = i.command_id AND false")
    assert blind != posts.POSTS_AND_RECORDS
    monkeypatch.setattr(posts, "POSTS_AND_RECORDS", blind)
    batch = [delivery(bob, "a", "fresh 1"), delivery(ana, "a", "hello", id="old"), delivery(ana, "b", "fresh 2")]
    with CaptureQueriesContext(connection) as queries:
        fresh1, old, fresh2 = run_batch(batch)
    statements = [q["sql"] for q in queries if "WITH ORDINALITY" in q["sql"]]
    ids = [d.command.id for d in batch]
    # Beside the claims first, then after them (the same failure), then each alone.
    assert len(statements) == (2 if early else 1) + len(batch)
    assert [[id for id in ids if id in sql] for sql in statements[-len(batch) :]] == [[id] for id in ids]
    assert old.dup and old.source == "database" and old.data == before.data
    assert not fresh1.dup and not fresh2.dup and (fresh1.data["seq"], fresh2.data["seq"]) == (2, 1)
    assert Message.objects.filter(client_msg_id="old").count() == 1 and Message.objects.count() == 3


@pytest.mark.parametrize("early", [True, False], ids=["beside the claims", "after the claims"])
def test_a_post_whose_claim_another_attempt_holds(users, redis_client, settings, early):
    """Another attempt of the command holds its claim and has not reached its
    statement yet. Beside the claims, this batch's statement applies it, once,
    and Redis keeps its result over the other's claim; the other attempt's
    statement then finds the record. After the claims, it waits (ClaimBusy:
    the pipeline polls)."""
    settings.MESSAGING = {**settings.MESSAGING, "EARLY_STATEMENT": early}
    ana, bob, _ = users
    raced = delivery(ana, "a", "raced")
    redis_client.set(raced.key, b"c:another-attempt", px=10_000)
    first, other = run_batch([raced, delivery(bob, "a", "beside it")])
    assert not other.dup and other.data["seq"] == (2 if early else 1)
    if not early:
        assert isinstance(first, ClaimBusy)
        assert redis_client.get(raced.key) == b"c:another-attempt", "the other attempt's claim stands"
        return
    assert not first.dup and first.data["seq"] == 1
    assert redis_client.get(raced.key).startswith(b"r:"), "its result, whatever claim was there"
    redis_client.delete(raced.key)
    [theirs] = run_batch([delivery(ana, "a", "raced", id=raced.command.id)])
    assert theirs.dup and theirs.source == "database" and theirs.data == first.data
    assert Message.objects.filter(client_msg_id=raced.command.id).count() == 1


def test_a_failed_batch_releases_every_claim_and_answers_unavailable(users, redis_client, monkeypatch):
    ana, bob, cid = users
    # A statement that fails in PostgreSQL after taking its locks: all of it is undone.
    broken = posts.POSTS_AND_RECORDS.replace("SELECT p.n, p.seq, s.at", "SELECT p.n, p.seq / 0, s.at")
    assert broken != posts.POSTS_AND_RECORDS
    monkeypatch.setattr(posts, "POSTS_AND_RECORDS", broken)
    batch = [delivery(ana, "a", "one"), delivery(bob, "b", "two"), delivery(cid, "a", "three")]
    results = run_batch(batch)
    assert all(isinstance(r, Unavailable) and r.retry for r in results)
    assert all(redis_client.get(d.key) is None for d in batch), "every claim was released"
    assert Message.objects.count() == 0 and CommandRecord.objects.filter(type="room.post").count() == 0
    assert dict(Room.objects.values_list("slug", "last_seq")) == {"a": 0, "b": 0}

    monkeypatch.undo()
    retried = run_batch(batch)
    assert [(r.dup, r.data["room"], r.data["seq"]) for r in retried] == [
        (False, "a", 1),
        (False, "b", 1),
        (False, "a", 2),
    ]


def test_batches_over_the_same_rooms_in_opposite_orders_do_not_deadlock(django_user_model):
    user = django_user_model.objects.create_user(username=f"locks-{uuid.uuid4().hex[:6]}")
    slugs = [f"r{n}" for n in range(4)]
    for slug in slugs:
        apply_command(user, "room.join", {"room": slug})
    rooms = {room.slug: room.pk for room in Room.objects.filter(slug__in=slugs)}
    assert sorted(slugs, key=rooms.get) == slugs, "the rooms' ids follow their names"
    post = handlers.lookup("room.post")

    def batch(order: list[str]) -> list[tuple]:
        return [
            (CommandContext(user=user, command_id=uuid.uuid4().hex, type=post.type), posts.Post(room, "x"), "f")
            for room in order
        ]

    async def apply_batch(entries: list[tuple]) -> list:
        return await post.batch_form("postgresql")(runtime().gateway, entries)

    errors: list[BaseException] = []

    def run(order: list[str], start: threading.Barrier | None = None, rounds: int = 1) -> None:
        try:
            for _ in range(rounds):
                if start is not None:
                    start.wait(timeout=10)
                results = async_to_sync(apply_batch)(batch(order))
                assert all(isinstance(r, dict) for r in results), results
        except BaseException as exc:
            errors.append(exc)
        finally:
            connections.close_all()

    def waiting_on_locks() -> int:
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'"
            )
            return cursor.fetchone()[0]

    # One round where both batches are sure to overlap: a third connection
    # holds the second room, so the first batch stops there holding the first.
    # Locking in batch order, the second batch would take the last room and
    # stop at the second too, and both would deadlock once it is let go.
    blocker = connection.get_new_connection(connection.get_connection_params())
    blocker.autocommit = False  # its lock is held until it closes
    threads = [threading.Thread(target=run, args=(order,)) for order in (slugs, slugs[::-1])]
    try:
        blocker.execute("SELECT 1 FROM messaging_room WHERE slug = 'r1' FOR UPDATE")
        for thread in threads:
            thread.start()
        wait_until(lambda: waiting_on_locks() == 2 or errors, timeout=10, what="both batches waiting on room locks")
    finally:
        blocker.close()  # lets the first batch go on
    for thread in threads:
        thread.join(timeout=30)
    assert errors == []

    # Then many rounds started together, each in the opposite order.
    start = threading.Barrier(2)
    threads = [threading.Thread(target=run, args=(order, start, 40)) for order in (slugs, slugs[::-1])]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert errors == []
    expected = 2 + 2 * 40
    assert set(Room.objects.filter(slug__in=slugs).values_list("last_seq", flat=True)) == {expected}
    for slug in slugs:
        assert list(Message.objects.filter(room__slug=slug).order_by("seq").values_list("seq", flat=True)) == list(
            range(1, expected + 1)
        )


class Histogram:
    """One of the process's histograms (one label set), as deltas since the test started."""

    def __init__(self, name: str, **labels: str) -> None:
        self.name, self.labels = name, labels
        self.count0, self.sum0 = self.read()

    def read(self) -> tuple[float, float]:
        return tuple(REGISTRY.get_sample_value(f"{self.name}_{kind}", self.labels) or 0.0 for kind in ("count", "sum"))

    def delta(self) -> tuple[float, float]:
        count, total = self.read()
        return count - self.count0, total - self.sum0


def batch_sizes() -> Histogram:
    """How many batches ran, and how many commands they carried."""
    return Histogram("messaging_command_batch_size")


async def test_commands_that_arrive_together_run_in_batches_each_with_its_own_outcome(users):
    ana, bob, cid = users
    sizes = batch_sizes()
    deliveries = [
        delivery(user, room, f"{user.username} {n}")
        for n in range(8)
        for user, room in ((ana, "b"), (bob, "a"), (cid, "a"))
    ]
    # Each command sent twice at once: one applies, the other gets its ack.
    calls = [submit(d) for d in deliveries for _ in range(2)]
    calls.append(submit(delivery(cid, "b", "not a member")))
    outcomes = await asyncio.gather(*calls, return_exceptions=True)

    refused = outcomes.pop()
    assert isinstance(refused, Forbidden)
    batches, commands_run = sizes.delta()
    assert commands_run >= len(calls) and batches < commands_run, "some batches carried more than one command"

    for n, d in enumerate(deliveries):
        pair = outcomes[2 * n : 2 * n + 2]
        assert sorted(o.dup for o in pair) == [False, True], pair
        assert pair[0].data == pair[1].data and pair[0].data["room"] == d.data.room
    for room in "ab":
        seqs = sorted(o.data["seq"] for o in outcomes if not o.dup and o.data["room"] == room)
        assert seqs == list(range(1, len(seqs) + 1))


async def test_each_batch_times_its_claims_statement_and_results(users):
    ana, bob, cid = users
    sizes = batch_sizes()
    times = {phase: Histogram("messaging_command_batch_phase_seconds", phase=phase) for phase in BATCH_PHASE_NAMES}
    deliveries = [delivery(user, "a", f"{user.username} {n}") for n in range(6) for user in (ana, bob, cid)]
    started = asyncio.get_running_loop().time()
    outcomes = await asyncio.gather(*(submit(d) for d in deliveries))
    elapsed = asyncio.get_running_loop().time() - started
    assert all(not o.dup for o in outcomes)

    batches, _ = sizes.delta()
    phases = {phase: histogram.delta() for phase, histogram in times.items()}
    assert batches >= 1
    assert {phase: count for phase, (count, _) in phases.items()} == dict.fromkeys(phases, batches), (
        "one sample per batch"
    )
    assert all(total > 0 for _, total in phases.values())
    # The phases follow each other inside the batches, which ran within the
    # calls, at most as many at once as the batcher has runners.
    runners = max(1, get_settings().DB_THREADS // 2)
    assert sum(total for _, total in phases.values()) <= elapsed * runners


async def submit(d):
    """One delivery through the pipeline: its outcome, or raises its exception."""
    [result] = await pipeline.run([d])
    if isinstance(result, Exception):
        raise result
    return result


async def test_claims_still_work_after_redis_forgets_its_scripts(users, own_redis, settings):
    ana, bob, _ = users
    settings.MESSAGING = {**settings.MESSAGING, "REDIS_URL": own_redis.url}
    reset_claim_store()
    execute = pipeline.run_batch

    first = await execute([delivery(ana, "a", "one", id="s1"), delivery(bob, "a", "two")])
    redis.Redis.from_url(own_redis.url).script_flush()
    again = await execute([delivery(ana, "a", "one", id="s1"), delivery(bob, "a", "three")])
    assert again[0].dup and again[0].source == "redis" and again[0].data == first[0].data
    assert not again[1].dup and again[1].data["seq"] == 3
    reset_claim_store()


@pytest.mark.parametrize("threads", [0, 4])
async def test_while_a_batch_is_quick_the_next_waits_for_it_and_takes_the_whole_queue(
    users, settings, monkeypatch, threads
):
    settings.MESSAGING = {**settings.MESSAGING, "DB_THREADS": threads}
    monkeypatch.setattr(pipeline, "BATCH_OVERLAP_AFTER", 60)  # no batch here counts as slow
    sizes = batch_sizes()
    deliveries = [delivery(user, "a", f"m{n}") for n in range(5) for user in users]
    outcomes = await asyncio.gather(*(submit(d) for d in deliveries))
    # The first alone, at once; the others queued meanwhile, together.
    assert sizes.delta() == (2, 15)
    assert [o.data["seq"] for o in outcomes] == list(range(1, 16))


@pytest.mark.parametrize("threads, runners", [(0, 1), (4, 2), (8, 4)])
async def test_a_slow_batch_lets_others_start_beside_it_up_to_half_the_database_threads(
    users, settings, monkeypatch, threads, runners
):
    settings.MESSAGING = {**settings.MESSAGING, "DB_THREADS": threads}
    monkeypatch.setattr(pipeline, "BATCH_OVERLAP_AFTER", 0.05)
    started: list[int] = []
    gate = asyncio.Event()

    apply = Batch.apply

    async def held(batch, gateway):
        started.append(len(batch.deliveries))
        await gate.wait()  # every batch is slow until the test lets them finish
        await apply(batch, gateway)

    monkeypatch.setattr(Batch, "apply", held)
    deliveries = [delivery(user, "a", f"m{n}") for n in range(4) for user in users]
    calls = []
    for d in deliveries:
        calls.append(asyncio.ensure_future(submit(d)))
        # One command at a time, each after the overlap: each may open a batch.
        await asyncio.sleep(0.1)
    assert len(started) == runners, f"never more batches at once than half the threads: {started}"
    gate.set()
    outcomes = await asyncio.gather(*calls)
    assert sorted(o.data["seq"] for o in outcomes) == list(range(1, 13))


def prepared_batch_statements() -> int:
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM pg_prepared_statements WHERE statement LIKE %s", ["%WITH ORDINALITY%"])
        return cursor.fetchone()[0]


@pytest.mark.parametrize("threshold", [5, None])
def test_the_batch_statement_is_prepared_once_the_connection_allows_it(users, threshold, settings):
    # On this thread's connection (asgiref's thread-sensitive hop), whose prepared statements the test reads.
    settings.MESSAGING = {**settings.MESSAGING, "LOOP_DATABASE": False, "DB_THREADS": 0}
    ana, bob, _ = users
    connection.ensure_connection()
    assert connection.settings_dict["OPTIONS"]["prepare_threshold"] == 5, "the project's setting"
    connection.connection.prepare_threshold = threshold
    outcomes = []
    for n in range(8):
        outcomes += run_batch([delivery(ana, "a", f"m{n}"), delivery(bob, "a", f"n{n}")])
    # Prepared from the 6th run on (psycopg), or never; the same answers either way.
    assert prepared_batch_statements() == (1 if threshold else 0)
    assert [outcome.data["seq"] for outcome in outcomes] == list(range(1, 17))
    bodies = list(Message.objects.filter(room__slug="a").order_by("seq").values_list("body", flat=True))
    assert bodies == [body for n in range(8) for body in (f"m{n}", f"n{n}")]
    assert CommandRecord.objects.count() == 16
