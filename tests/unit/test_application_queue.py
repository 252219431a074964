"""servers/queues.ApplicationQueue: what daphne, uvicorn and an ASGI application ask of a connection's queue, in three slots."""

from __future__ import annotations

import asyncio
import sys

import pytest

from messaging.transport.servers.queues import ApplicationQueue


async def test_items_are_taken_in_the_order_put():
    queue = ApplicationQueue()
    for n in range(5):
        queue.put_nowait(n)
    assert queue.qsize() == 5
    assert [await queue.get() for _ in range(5)] == [0, 1, 2, 3, 4]
    assert queue.qsize() == 0 and queue.empty()
    with pytest.raises(asyncio.QueueEmpty):
        queue.get_nowait()


async def test_a_getter_waits_for_the_next_item():
    queue = ApplicationQueue()
    getting = asyncio.ensure_future(queue.get())
    await asyncio.sleep(0)
    assert not getting.done()
    queue.put_nowait({"type": "websocket.connect"})
    assert await getting == {"type": "websocket.connect"}


async def test_each_of_several_getters_takes_one_item_in_the_order_they_came():
    queue = ApplicationQueue()
    getters = [asyncio.ensure_future(queue.get()) for _ in range(3)]
    await asyncio.sleep(0)
    for n in range(3):
        queue.put_nowait(n)
    assert await asyncio.gather(*getters) == [0, 1, 2]


async def test_a_cancelled_getter_loses_nothing():
    queue = ApplicationQueue()
    cancelled = asyncio.ensure_future(queue.get())
    await asyncio.sleep(0)
    cancelled.cancel()
    with pytest.raises(asyncio.CancelledError):
        await cancelled
    queue.put_nowait("kept")
    assert await queue.get() == "kept"


async def test_a_getter_woken_then_cancelled_leaves_its_item_to_the_next():
    queue = ApplicationQueue()
    first, second = asyncio.ensure_future(queue.get()), asyncio.ensure_future(queue.get())
    await asyncio.sleep(0)
    queue.put_nowait("one")  # wakes the first getter ...
    first.cancel()  # ... which is cancelled before it runs
    assert await second == "one"
    with pytest.raises(asyncio.CancelledError):
        await first


async def test_an_idle_queue_holds_no_container():
    queue = ApplicationQueue()
    getting = asyncio.ensure_future(queue.get())
    await asyncio.sleep(0)
    queue.put_nowait(1)
    queue.put_nowait(2)
    assert await getting == 1 and await queue.get() == 2
    waiting = asyncio.ensure_future(queue.get())
    await asyncio.sleep(0)
    # Waiting and empty again: the item deque is gone, the getters' list holds the one getter.
    assert queue._rest is None and len(queue._getters) == 1
    assert sys.getsizeof(queue) + sys.getsizeof(queue._getters) < held_by(asyncio.Queue()) // 10
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting
    assert queue._getters is None


def held_by(queue: asyncio.Queue) -> int:
    """The bytes an empty `asyncio.Queue` holds: itself, its dict, its three deques and its `Event` with its own."""
    finished = queue._finished  # type: ignore[attr-defined]
    parts = (queue, vars(queue), queue._queue, queue._getters, queue._putters, finished, vars(finished))  # type: ignore[attr-defined]
    return sum(map(sys.getsizeof, parts)) + sys.getsizeof(finished._waiters)
