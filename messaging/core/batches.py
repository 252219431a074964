"""Group commit without waiting: calls that arrive together run as one batch.

A batch starts as soon as a runner is free, with everything queued (at most
`limit` items); while batches run, new items queue and the next batch to
start takes them. Nothing waits for company: at low load each batch is a
single item, so latency does not grow, and under load the fixed costs of a
batch (a thread hop, round trips) are shared by all its items.

With `overlap_after`, a batch starts beside running ones only once the
newest of them has run that long: batches run one at a time, as large as the
load makes them, unless one is slow, and then the next does not wait for it
longer than `overlap_after`. Batches that write the same rows gain nothing
from running at once (they queue for the same row locks) and lose their size.

With `settle`, the next batch after one that ended starts only once the
event loop has run `settle` more rounds of its callbacks. The callers the
ended batch answered are woken in those rounds (their futures' callbacks,
then their tasks), and a socket answered there sends what it received
meanwhile (its next posts) at once: the next batch takes them all, instead
of starting with the first to arrive while the rest wait a whole batch for
the one after. It costs the next batch those rounds, microseconds; an item
that arrives while no batch has just ended starts at once.

Items submitted together (`submit_many`) stay together: they run in one
batch, in the order given, so a caller can rely on their relative order.

No Django here: `run` is any coroutine function that takes a list of items and
returns one result per item, in order; an exception in that list is raised to
that item's caller alone.
"""

from __future__ import annotations

import asyncio
import contextvars
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Any, Generic, TypeVar

Item = TypeVar("Item")


class Batcher(Generic[Item]):
    """Collects the items submitted on one event loop and runs them in batches."""

    def __init__(
        self,
        run: Callable[[list[Item]], Awaitable[list[Any]]],
        *,
        runners: int,
        limit: int,
        overlap_after: float = 0.0,
        settle: int = 0,
    ) -> None:
        if runners < 1 or limit < 1:
            raise ValueError("a batcher needs at least one runner and a limit of at least one item")
        self.run = run
        self.runners = runners
        self.limit = limit
        self.overlap_after = overlap_after
        self.settle = settle
        # Batches that ended and whose rounds of settling are not over: none starts meanwhile.
        self.settling = 0
        # When each running batch started (the loop's clock).
        self.started: list[float] = []
        self.timer: asyncio.TimerHandle | None = None
        # Units of items submitted together; a unit is never split.
        self.queue: deque[list[tuple[Item, asyncio.Future[Any]]]] = deque()
        # Strong references: the event loop keeps only weak ones to its tasks.
        self.tasks: set[asyncio.Task[None]] = set()

    async def submit(self, item: Item) -> Any:
        """Queue `item`; once its batch has run, return its result or raise its exception."""
        future = asyncio.get_running_loop().create_future()
        self._queue([(item, future)])
        return await future

    async def submit_many(self, items: list[Item]) -> list[Any]:
        """Queue `items` to run in one batch, in this order; return each one's result or exception.

        A batch takes more than `limit` items only to keep such a unit whole.
        """
        loop = asyncio.get_running_loop()
        unit = [(item, loop.create_future()) for item in items]
        self._queue(unit)
        return await asyncio.gather(*(future for _, future in unit), return_exceptions=True)

    @property
    def busy(self) -> int:
        """How many batches are running."""
        return len(self.started)

    def _queue(self, unit: list[tuple[Item, asyncio.Future[Any]]]) -> None:
        self.queue.append(unit)
        self._start_if_due()

    def _start_if_due(self) -> None:
        if not self.queue or self.busy >= self.runners or self.settling:
            return
        if self.started and self.overlap_after > 0:
            loop = asyncio.get_running_loop()
            wait = max(self.started) + self.overlap_after - loop.time()
            if wait > 0:
                if self.timer is None:
                    self.timer = loop.call_later(wait, self._timer_due)
                return
        self._start()

    def _timer_due(self) -> None:
        self.timer = None
        self._start_if_due()

    def _start(self) -> None:
        batch: list[tuple[Item, asyncio.Future[Any]]] = []
        while self.queue and (not batch or len(batch) + len(self.queue[0]) <= self.limit):
            # A caller that stopped waiting (its socket closed) is not run at all.
            batch.extend(entry for entry in self.queue.popleft() if not entry[1].cancelled())
        if not batch:
            return
        start = asyncio.get_running_loop().time()
        self.started.append(start)
        # A context of its own: the batch belongs to none of its callers.
        task = asyncio.get_running_loop().create_task(self._run(batch, start), context=contextvars.Context())
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    async def _run(self, batch: list[tuple[Item, asyncio.Future[Any]]], start: float) -> None:
        try:
            try:
                results = await self.run([item for item, _ in batch])
                if len(results) != len(batch):
                    raise RuntimeError(f"a batch of {len(batch)} items returned {len(results)} results")
            except asyncio.CancelledError:
                for _, future in batch:
                    future.cancel()
                raise
            except Exception as exc:
                results = [exc] * len(batch)
            for (_, future), result in zip(batch, results):
                if future.done():
                    continue
                if isinstance(result, BaseException):
                    future.set_exception(result)
                else:
                    future.set_result(result)
        finally:
            self.started.remove(start)
            if self.settle:
                self.settling += 1
                asyncio.get_running_loop().call_soon(self._settled, self.settle - 1)
            else:
                self._start_if_due()

    def _settled(self, rounds: int) -> None:
        """Called once per round of the loop's callbacks after a batch ended, `settle` times in all."""
        if rounds:
            # Behind every callback scheduled so far: each round wakes the next step of the answered callers.
            asyncio.get_running_loop().call_soon(self._settled, rounds - 1)
            return
        self.settling -= 1
        self._start_if_due()
