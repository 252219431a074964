"""The batcher's scheduling, with a `run` the test holds open: who runs with whom, and who gets what."""

from __future__ import annotations

import asyncio
import contextvars

import pytest

from messaging.core.batches import Batcher


class Runs:
    """A batch function that records each batch and finishes only when the test lets it."""

    def __init__(self) -> None:
        self.batches: list[list] = []
        self.gates: list[asyncio.Event] = []

    async def __call__(self, items: list) -> list:
        self.batches.append(items)
        gate = asyncio.Event()
        self.gates.append(gate)
        await gate.wait()
        return [ValueError(item) if item == "bad" else item * 2 for item in items]

    def finish(self, n: int) -> None:
        self.gates[n].set()


async def settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


async def test_a_lone_item_runs_at_once_as_a_batch_of_one():
    runs = Runs()
    batcher = Batcher(runs, runners=2, limit=64)
    call = asyncio.ensure_future(batcher.submit(3))
    await settle()
    assert runs.batches == [[3]]
    runs.finish(0)
    assert await call == 6


async def test_items_queue_while_every_runner_is_busy_and_the_next_batch_takes_them_all():
    runs = Runs()
    batcher = Batcher(runs, runners=2, limit=64)
    calls = [asyncio.ensure_future(batcher.submit(n)) for n in range(7)]
    await settle()
    assert runs.batches == [[0], [1]], "two runners, two batches; the rest waits"
    runs.finish(1)
    await settle()
    assert runs.batches == [[0], [1], [2, 3, 4, 5, 6]]
    assert batcher.busy == 2, "never more batches at once than runners"
    runs.finish(0)
    runs.finish(2)
    assert await asyncio.gather(*calls) == [0, 2, 4, 6, 8, 10, 12]
    assert batcher.busy == 0


async def test_a_batch_takes_at_most_the_limit():
    runs = Runs()
    batcher = Batcher(runs, runners=1, limit=3)
    calls = [asyncio.ensure_future(batcher.submit(n)) for n in range(8)]
    await settle()
    for n in range(3):
        runs.finish(n)
        await settle()
    assert runs.batches == [[0], [1, 2, 3], [4, 5, 6], [7]]
    runs.finish(3)
    await asyncio.gather(*calls)


async def test_each_caller_gets_its_own_result_or_exception():
    runs = Runs()
    batcher = Batcher(runs, runners=1, limit=64)
    first = asyncio.ensure_future(batcher.submit(0))
    calls = [asyncio.ensure_future(batcher.submit(item)) for item in (1, "bad", 2)]
    await settle()
    runs.finish(0)
    await settle()
    runs.finish(1)
    results = await asyncio.gather(*calls, return_exceptions=True)
    assert results[0] == 2 and results[2] == 4
    assert isinstance(results[1], ValueError)
    assert await first == 0


async def test_a_failing_batch_fails_each_of_its_callers():
    async def broken(items):
        raise RuntimeError("the thread pool is gone")

    batcher = Batcher(broken, runners=1, limit=64)
    results = await asyncio.gather(*(batcher.submit(n) for n in range(3)), return_exceptions=True)
    assert all(isinstance(r, RuntimeError) for r in results)
    assert batcher.busy == 0


@pytest.mark.parametrize(
    "submit_gone",
    [
        lambda batcher: batcher.submit(1),
        lambda batcher: batcher.submit_many([1, 2]),
    ],
    ids=["an item", "a unit"],
)
async def test_a_caller_that_stopped_waiting_before_its_batch_is_not_run(submit_gone):
    runs = Runs()
    batcher = Batcher(runs, runners=1, limit=64)
    first = asyncio.ensure_future(batcher.submit(0))
    gone = asyncio.ensure_future(submit_gone(batcher))
    kept = asyncio.ensure_future(batcher.submit(3))
    await settle()
    gone.cancel()
    runs.finish(0)
    await settle()
    assert runs.batches == [[0], [3]]
    runs.finish(1)
    assert (await first, await kept) == (0, 6)


async def test_the_batch_runs_in_a_context_of_its_own():
    seen = []
    var: contextvars.ContextVar[str] = contextvars.ContextVar("var", default="none")

    async def run(items):
        seen.append(var.get())
        return items

    batcher = Batcher(run, runners=1, limit=64)
    var.set("caller's")
    assert await batcher.submit(1) == 1
    assert seen == ["none"]


async def test_items_submitted_together_run_in_one_batch_in_their_order():
    runs = Runs()
    batcher = Batcher(runs, runners=1, limit=3)
    first = asyncio.ensure_future(batcher.submit(0))
    await settle()
    units = [asyncio.ensure_future(batcher.submit_many(unit)) for unit in ([1, 2], [3, 4], [5])]
    await settle()
    for n in range(3):
        runs.finish(n)
        await settle()
    assert runs.batches == [[0], [1, 2], [3, 4, 5]], "[3, 4] does not fit beside [1, 2] and is not split"
    assert await first == 0
    assert await asyncio.gather(*units) == [[2, 4], [6, 8], [10]]


async def test_a_unit_larger_than_the_limit_runs_whole_and_alone():
    runs = Runs()
    batcher = Batcher(runs, runners=1, limit=2)
    first = asyncio.ensure_future(batcher.submit(0))
    await settle()
    unit = asyncio.ensure_future(batcher.submit_many([1, 2, 3]))
    after = asyncio.ensure_future(batcher.submit(4))
    await settle()
    for n in range(3):
        runs.finish(n)
        await settle()
    assert runs.batches == [[0], [1, 2, 3], [4]]
    assert (await first, await unit, await after) == (0, [2, 4, 6], 8)


async def test_each_item_of_a_unit_gets_its_own_result_or_exception():
    runs = Runs()
    batcher = Batcher(runs, runners=1, limit=64)
    unit = asyncio.ensure_future(batcher.submit_many([1, "bad", 2]))
    await settle()
    runs.finish(0)
    results = await unit
    assert results[0] == 2 and results[2] == 4
    assert isinstance(results[1], ValueError)


def test_a_batcher_needs_a_runner():
    with pytest.raises(ValueError):
        Batcher(lambda items: items, runners=0, limit=64)


async def test_with_overlap_after_a_second_batch_waits_for_the_first_to_be_slow():
    runs = Runs()
    batcher = Batcher(runs, runners=2, limit=64, overlap_after=0.2)
    calls = [asyncio.ensure_future(batcher.submit(0))]
    await settle()
    calls += [asyncio.ensure_future(batcher.submit(n)) for n in (1, 2)]
    await settle()
    assert runs.batches == [[0]], "a runner is free, but the running batch is young: the others queue"
    await asyncio.sleep(0.3)
    assert runs.batches == [[0], [1, 2]], "the first batch is slow: the next one starts beside it"
    runs.finish(0)
    runs.finish(1)
    assert await asyncio.gather(*calls) == [0, 2, 4]


async def test_with_overlap_after_the_queue_goes_as_soon_as_the_running_batch_ends():
    runs = Runs()
    batcher = Batcher(runs, runners=2, limit=64, overlap_after=10)
    first = asyncio.ensure_future(batcher.submit(0))
    await settle()
    calls = [asyncio.ensure_future(batcher.submit(n)) for n in (1, 2, 3)]
    await settle()
    runs.finish(0)
    await settle()
    assert runs.batches == [[0], [1, 2, 3]], "one batch at a time, as large as the queue"
    runs.finish(1)
    assert (await first, await asyncio.gather(*calls)) == (0, [2, 4, 6])
    assert batcher.busy == 0


async def sockets_sending_in_turn(batcher: Batcher, runs: Runs, together: bool) -> list[list]:
    """Three callers that each send their next item as soon as the last one's result came (a socket's next
    post behind its ack); the first batch is let finish once it holds all three firsts."""

    async def socket(name: str) -> None:
        for n in range(2):
            if together:
                await batcher.submit_many([f"{name}{n}"])
            else:
                await batcher.submit(f"{name}{n}")

    # A batch is running when they start, so their firsts queue up together.
    first = asyncio.ensure_future(batcher.submit("x"))
    await settle()
    sockets = [asyncio.ensure_future(socket(name)) for name in "abc"]
    await settle()
    # Each batch is let finish in turn, once the loop has settled behind the one before.
    finished = 0
    while not all(task.done() for task in sockets):
        if finished < len(runs.gates):
            runs.finish(finished)
            finished += 1
        await settle()
    await first
    return runs.batches


@pytest.mark.parametrize("together", [False, True])
async def test_with_settle_the_callers_a_batch_answered_are_all_in_the_next_one(together):
    runs = Runs()
    batches = await sockets_sending_in_turn(Batcher(runs, runners=1, limit=64, settle=2), runs, together)
    assert batches == [["x"], ["a0", "b0", "c0"], ["a1", "b1", "c1"]]


@pytest.mark.parametrize("together", [False, True])
async def test_without_settle_the_next_batch_starts_with_the_first_caller_back(together):
    runs = Runs()
    batches = await sockets_sending_in_turn(Batcher(runs, runners=1, limit=64), runs, together)
    assert batches == [["x"], ["a0", "b0", "c0"], ["a1"], ["b1", "c1"]]


async def test_with_settle_an_item_with_no_batch_just_ended_runs_at_once():
    runs = Runs()
    batcher = Batcher(runs, runners=1, limit=64, settle=2)
    call = asyncio.ensure_future(batcher.submit(3))
    await settle()
    assert runs.batches == [[3]]
    runs.finish(0)
    assert await call == 6
    # Long after that batch, the next lone item does not wait for company either.
    await settle()
    later = asyncio.ensure_future(batcher.submit(4))
    await settle()
    assert runs.batches == [[3], [4]]
    runs.finish(1)
    assert await later == 8
