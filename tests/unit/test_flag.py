"""`Flag` (messaging/transport/servers/queues.py) does what an `asyncio.Event` does for uvicorn's `writable`,
each case run against both, and keeps no container while nobody waits."""

from __future__ import annotations

import asyncio

import pytest

from messaging.transport.servers.queues import Flag

KINDS = [Flag, asyncio.Event]


@pytest.mark.parametrize("kind", KINDS)
async def test_a_set_flag_is_waited_on_at_once_and_a_clear_one_until_it_is_set(kind):
    flag = kind()
    assert not flag.is_set()
    flag.set()
    assert flag.is_set() and await asyncio.wait_for(flag.wait(), 1) is True
    flag.clear()
    waiting = asyncio.ensure_future(flag.wait())
    await asyncio.sleep(0.01)
    assert not waiting.done()
    flag.set()
    assert await asyncio.wait_for(waiting, 1) is True


@pytest.mark.parametrize("kind", KINDS)
async def test_set_wakes_every_waiter_and_one_cancelled_does_not_stop_the_others(kind):
    flag = kind()
    waiters = [asyncio.ensure_future(flag.wait()) for _ in range(4)]
    await asyncio.sleep(0.01)
    waiters[1].cancel()
    await asyncio.sleep(0)
    flag.set()
    done = await asyncio.gather(*waiters, return_exceptions=True)
    assert [isinstance(result, asyncio.CancelledError) for result in done] == [False, True, False, False]
    assert [result for n, result in enumerate(done) if n != 1] == [True, True, True]


@pytest.mark.parametrize("kind", KINDS)
async def test_set_then_cleared_before_the_waiter_runs_still_wakes_it(kind):
    flag = kind()
    waiting = asyncio.ensure_future(flag.wait())
    await asyncio.sleep(0)
    flag.set()
    flag.clear()
    assert await asyncio.wait_for(waiting, 1) is True
    assert not flag.is_set()


async def test_an_idle_flag_holds_no_container_and_one_waited_on_lets_it_go():
    flag = Flag(True)
    assert flag._waiters is None
    flag.clear()
    waiting = asyncio.ensure_future(flag.wait())
    await asyncio.sleep(0)
    assert flag._waiters is not None
    flag.set()
    await waiting
    assert flag._waiters is None
    cancelled = asyncio.ensure_future(Flag().wait())
    await asyncio.sleep(0)
    cancelled.cancel()
    with pytest.raises(asyncio.CancelledError):
        await cancelled
