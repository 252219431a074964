"""The batched per-user window (`RedisWindow`) against real Redis.

Each process counts a user's hits locally and adds them to Redis in the
background, one pipelined `INCRBY` per user every `flush_interval` while
there are hits; from half the limit on every hit asks Redis, so refusals near
the limit are decided on the shared count (docs/RELIABILITY.md, "Rate limits
are approximate"). Two `RedisWindow`s on one Redis stand for two server
processes.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import math
import os
import signal
import sys
import time
import warnings

import pytest
import redis.asyncio as aioredis
from redis.asyncio.client import Pipeline

from messaging.transport.ratelimit import RedisWindow

from ..support.servers import RedisServer, free_port
from ..support.waiting import wait_for

# A window so long that it never rolls over during a test.
NO_ROLLOVER = 10**7
USER = 7


def shared_count(client, user=USER) -> int:
    """The user's count in Redis, over the windows it has keys for."""
    return sum(int(client.get(key) or 0) for key in client.keys(f"messaging:rate:{user}:*"))


def idle() -> bool:
    """No task but the test's own is left in the loop: every batch has landed or failed."""
    return asyncio.all_tasks() == {asyncio.current_task()}


async def admitted(window: RedisWindow, hits: int, user=USER) -> int:
    return sum([await window.ahit(user) == 0 for _ in range(hits)])


@pytest.fixture
def round_trips(monkeypatch):
    """How many requests asyncio Redis clients sent: one per command, one per pipeline."""
    sent = [0]
    execute_command, execute = aioredis.Redis.execute_command, Pipeline.execute

    async def counted_command(self, *args, **options):
        if not isinstance(self, Pipeline):  # a pipeline only queues until `execute`
            sent[0] += 1
        return await execute_command(self, *args, **options)

    async def counted_execute(self, *args, **kwargs):
        sent[0] += 1
        return await execute(self, *args, **kwargs)

    monkeypatch.setattr(aioredis.Redis, "execute_command", counted_command)
    monkeypatch.setattr(Pipeline, "execute", counted_execute)
    return lambda: sent[0]


async def test_two_processes_refuse_a_burst_at_the_limit_not_at_twice_it(settings):
    first = RedisWindow(settings.REDIS_URL, limit=20, window=NO_ROLLOVER)
    second = RedisWindow(settings.REDIS_URL, limit=20, window=NO_ROLLOVER)
    # Hits in turn, as fast as they come: neither process waits for the other's batches.
    answers = [await window.ahit(USER) for _ in range(30) for window in (first, second)]
    let_in = sum(wait == 0 for wait in answers)
    # The documented approximation: the other process's hits below half the
    # limit may not have reached Redis yet.
    assert 20 <= let_in < 20 + 20 // 2
    assert all(wait > 0 for wait in answers[-10:]), "refused from the limit on, not admitted again"


async def test_hits_reach_redis_within_the_flush_interval_without_further_hits(settings, redis_client):
    window = RedisWindow(settings.REDIS_URL, limit=100, window=NO_ROLLOVER, flush_interval=0.25)
    assert await window.ahit(USER) == 0
    await wait_for(lambda: shared_count(redis_client) == 1, what="the first hit in Redis")
    # Three more right after that batch: they must not wait for a later hit to be sent.
    assert [await window.ahit(USER) for _ in range(3)] == [0, 0, 0]
    await wait_for(lambda: shared_count(redis_client) == 4, what="the batched hits in Redis, with no further hit")


async def test_a_second_process_refuses_at_exactly_the_limit_once_the_first_has_flushed(settings, redis_client):
    first = RedisWindow(settings.REDIS_URL, limit=20, window=NO_ROLLOVER, flush_interval=0.25)
    second = RedisWindow(settings.REDIS_URL, limit=20, window=NO_ROLLOVER, flush_interval=0.25)
    assert await first.ahit(USER) == 0
    await asyncio.sleep(0.05)
    assert await admitted(first, 8) == 8  # below half: counted in the first process only
    await wait_for(lambda: shared_count(redis_client) == 9, what="the first process's hits in Redis")
    assert await admitted(second, 20) == 20 - 9
    assert await first.ahit(USER) > 0


async def test_below_half_the_limit_a_hit_makes_no_round_trip_and_from_half_every_hit_does(settings, round_trips):
    window = RedisWindow(settings.REDIS_URL, limit=20, window=NO_ROLLOVER)
    # Back to back, so no batch is in flight when the count reaches half the limit.
    for n in range(1, 30):
        before = round_trips()
        wait = await window.ahit(USER)
        if n < 10:
            assert (wait, round_trips() - before) == (0, 0), f"hit {n} waited for Redis"
        else:
            assert round_trips() - before >= 1, f"hit {n}, past half the limit, was decided without Redis"
            assert (wait == 0) == (n <= 20)


async def test_redis_sees_a_request_per_batch_not_per_hit(settings, redis_client, round_trips):
    window = RedisWindow(settings.REDIS_URL, limit=1000, window=NO_ROLLOVER, flush_interval=0.1)
    started = time.monotonic()
    for _ in range(60):
        assert await window.ahit(USER) == 0
        await asyncio.sleep(0.005)
    await wait_for(lambda: shared_count(redis_client) == 60, what="every hit in Redis")
    batches = (time.monotonic() - started) / 0.1
    assert 1 <= round_trips() <= batches + 2


async def test_retry_after_is_the_rest_of_the_window_and_the_user_is_let_in_after_it(settings):
    clock = [1003.0]  # window [1000, 1010) of 10 s
    window = RedisWindow(settings.REDIS_URL, limit=4, window=10, clock=lambda: clock[0])
    assert await admitted(window, 4) == 4
    assert await window.ahit(USER) == pytest.approx(7.0)
    clock[0] = 1009.75
    assert await window.ahit(USER) == pytest.approx(0.25)
    clock[0] += await window.ahit(USER)  # wait exactly as long as told
    assert await window.ahit(USER) == 0
    # The new window is a full budget again: 4 with the hit above.
    assert await admitted(window, 10) == 3


async def test_the_window_ends_in_real_time_and_its_key_expires(settings, redis_client):
    window = RedisWindow(settings.REDIS_URL, limit=2, window=1.0)
    # Start right after a boundary, so the window does not end between the hits.
    await asyncio.sleep(1.0 - time.time() % 1.0 + 0.01)
    assert await admitted(window, 2) == 2
    wait = await window.ahit(USER)
    assert 0 < wait <= 1.0
    keys = redis_client.keys(f"messaging:rate:{USER}:*")
    assert keys and all(0 < redis_client.ttl(key) <= math.ceil(1.0) + 1 for key in keys)
    await asyncio.sleep(wait)
    assert await window.ahit(USER) == 0
    await wait_for(
        lambda: not any(redis_client.exists(key) for key in keys), timeout=10, what="the old window's key to expire"
    )


@pytest.mark.django_db(transaction=True)
async def test_a_refused_command_runs_once_the_socket_waited_retry_after(make_user, open_clients, settings):
    settings.MESSAGING = {**settings.MESSAGING, "USER_RATE_LIMIT": 3, "USER_RATE_WINDOW": 2.0}
    client = await open_clients(await make_user())
    await asyncio.sleep(2.0 - time.time() % 2.0 + 0.01)  # a fresh window
    await client.join("lobby")
    assert (await client.call("room.post", {"room": "lobby", "body": "one"}))["ok"]
    assert (await client.call("room.post", {"room": "lobby", "body": "two"}))["ok"]
    refused = await client.call("room.post", {"room": "lobby", "body": "three"}, id="p3")
    assert refused["error"]["code"] == "rate_limited" and refused["error"]["retry"] is True
    assert 0 < refused["error"]["retry_after"] <= 2.0
    await asyncio.sleep(refused["error"]["retry_after"])
    again = await client.call("room.post", {"room": "lobby", "body": "three"}, id="p3")
    assert again["ok"] and again["dup"] is False


def forget_earlier_tests(caplog) -> None:
    """Collect what earlier tests left, then forget its logs: a task still
    pending when its test's loop closed is logged as an error by asyncio
    when the collector destroys it, in whichever test that happens."""
    gc.collect()
    caplog.clear()


async def test_while_redis_is_down_a_process_admits_the_limit_and_refuses_the_rest(caplog):
    # Down for the whole window: "each process counts on its own (up to the
    # limit times the number of processes)". Hits go on past several cooldowns,
    # each of which ends with another try of Redis.
    forget_earlier_tests(caplog)
    dead = f"redis://127.0.0.1:{free_port()}/0"
    window = RedisWindow(dead, limit=10, window=NO_ROLLOVER, timeout=0.2, cooldown=0.05)
    answers = []
    for _ in range(60):
        answers.append(await window.ahit(USER))
        await asyncio.sleep(0.01)
    assert sum(wait == 0 for wait in answers) == 10
    assert answers[:10] == [0] * 10, "nobody is refused below the limit"
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]


async def test_after_an_outage_the_shared_count_resumes(own_redis, tmp_path):
    window = RedisWindow(own_redis.url, limit=10, window=NO_ROLLOVER, timeout=0.2, cooldown=0.3)
    assert await window.ahit(USER) == 0
    await wait_for(idle, what="the first batch")
    own_redis.stop()
    assert await window.ahit(USER) == 0
    await wait_for(idle, what="the batch that fails")
    back = RedisServer(tmp_path, port=own_redis.port).start()  # empty, like a restarted Redis
    try:
        await asyncio.sleep(0.3)  # the cooldown
        other = RedisWindow(back.url, limit=10, window=NO_ROLLOVER)
        assert await admitted(other, 10) == 10
        # This process learns the shared count with its next batch, then is refused on it.
        await window.ahit(USER)
        await wait_for(idle, what="the next batch")
        assert await window.ahit(USER) > 0
    finally:
        back.stop()


async def test_a_frozen_redis_costs_one_timeout_per_cooldown_not_one_per_hit(own_redis):
    window = RedisWindow(own_redis.url, limit=10, window=NO_ROLLOVER, timeout=0.2, cooldown=5.0)
    os.kill(own_redis.process.pid, signal.SIGSTOP)
    try:
        started = time.monotonic()
        answers = [await window.ahit(USER) for _ in range(30)]
        elapsed = time.monotonic() - started
    finally:
        os.kill(own_redis.process.pid, signal.SIGCONT)
    assert answers[0] == 0, "a frozen Redis refuses nobody"
    # Twenty-odd hits past half the limit would wait 0.2 s each if each asked.
    assert elapsed < 10 * 0.2


async def test_the_background_batches_leave_no_task_running(settings, redis_client):
    window = RedisWindow(settings.REDIS_URL, limit=100, window=NO_ROLLOVER, flush_interval=0.1)
    for _ in range(5):
        assert await window.ahit(USER) == 0
        await asyncio.sleep(0.03)
    await wait_for(lambda: shared_count(redis_client) == 5, what="every hit in Redis")
    await wait_for(idle, what="the batches to finish")


def test_hits_whose_batch_is_pending_when_the_loop_closes_reach_redis(settings, redis_client):
    # The next batch is due a minute after the first: only the loop's close can send it.
    window = RedisWindow(settings.REDIS_URL, limit=100, window=NO_ROLLOVER, flush_interval=60)

    async def serve_and_stop() -> None:
        assert await window.ahit(USER) == 0
        await wait_for(lambda: shared_count(redis_client) == 1, what="the first batch")
        for _ in range(2):
            assert await window.ahit(USER) == 0

    asyncio.run(serve_and_stop())
    assert shared_count(redis_client) == 3
    assert window._pending == {}


@pytest.mark.parametrize("redis_up", [True, False], ids=["redis-up", "redis-down"])
def test_a_loop_that_ends_mid_batch_logs_no_error(settings, caplog, monkeypatch, redis_up):
    url = settings.REDIS_URL if redis_up else f"redis://127.0.0.1:{free_port()}/0"
    window = RedisWindow(url, limit=100, window=NO_ROLLOVER, timeout=0.2)
    # Earlier tests' loops may have left tasks and coroutines for the collector
    # (their loops closed with a batch pending); what it logs is not this test's.
    gc.collect()
    caplog.clear()
    unraisable = []
    monkeypatch.setattr(sys, "unraisablehook", unraisable.append)
    loop_errors = []

    async def serve_and_stop() -> None:
        asyncio.get_running_loop().set_exception_handler(lambda loop, context: loop_errors.append(context))
        for _ in range(3):
            await window.ahit(USER)
            await asyncio.sleep(0.15)  # long enough for a batch to fail, where Redis is down
        await window.ahit(USER)  # the process stops with this hit's batch pending

    caplog.set_level(logging.WARNING)
    forget_earlier_tests(caplog)
    with warnings.catch_warnings(record=True) as warned:
        warnings.simplefilter("always")
        asyncio.run(serve_and_stop())
        gc.collect()
    assert loop_errors == []
    assert unraisable == []
    # A batch never awaited, say. (The loop's client is not closed with it:
    # one per loop, for the life of a server process; ResourceWarnings here.)
    assert [str(w.message) for w in warned if issubclass(w.category, RuntimeWarning)] == []
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR] == []
