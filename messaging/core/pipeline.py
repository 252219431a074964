"""The pipeline: every command, from any entry point, goes through here.

    submit(user, command)           -> its Outcome, or raises its refusal
    submit_many(user, commands)     -> per command, in order, its Outcome or refusal

A command is prepared (`prepare`: its type looked up, its data validated and
fingerprinted), then run in the order its sender sent it (`runs`):
consecutive exactly-once commands of one type (a client's pipelined posts)
run together in one batch, in order, so a room's seqs follow send order, and
so do consecutive commands of a `gathered` type (a client's receipts);
everything else runs alone, after what came before it. So a post sent right
behind its room's join still runs after the join. Groups of a `gathered`
type, from every sender, that arrive together run in one call of its batch
form (`_gatherer`), one transaction.

Batches of every sender on one event loop are collected by the loop's
`Batcher` (group commit without waiting: messaging/core/batches.py) and run
by `run_batch`: one Redis call claims them all (messaging/core/claims.py),
each type's statement or portable apply writes the effects and the records
(messaging/core/apply.py, messaging/core/records.py), one more Redis call
keeps the results and releases the claims of the rest. A duplicate that finds
its command's first attempt still running polls for its result (`_poll`).

Sync callers (tests, a management command) wrap these coroutines in
`asgiref.sync.async_to_sync`: there is no second, synchronous pipeline.

One seam leads out: a `Router` (`route_with`) takes the deliveries it
`routes` (commands on a room of another deployment: messaging/federation)
and runs them its own way, instead of claims and applies here; `run` hands
them over and keeps each delivery's place in the answers.
"""

from __future__ import annotations

import asyncio
import contextvars
import time
import uuid
from collections.abc import Awaitable, Iterable, Iterator
from typing import Any, Protocol, TypeVar, cast

from ..conf import get_settings
from ..ops import metrics
from . import handlers
from .apply import Batch, apply_early, apply_gathered, apply_once
from .batches import Batcher
from .claims import ClaimStore, RedisClaimStore, Stored, get_claim_store
from .exceptions import CommandError, InProgress
from .outcomes import ClaimBusy, Delivery, Outcome
from .protocol import Command
from .runtime import runtime

T = TypeVar("T")

# Most commands one batch carries: the statement of a batch grows with it.
BATCH_LIMIT = 64
# How long a batch runs alone before the next may start beside it.
BATCH_OVERLAP_AFTER = 0.02


def prepare(
    user: Any, command: Command, context: contextvars.Context | None = None, client_address: str | None = None
) -> Delivery:
    """The command as the pipeline runs it: its handler and validated data, fingerprinted if exactly-once.
    `client_address` is carried to the handler's context as given (`CommandContext.client_address`).

    Everything that can fail for this command alone fails here, before it
    joins a batch with other users' commands: raises its `CommandError`.
    """
    handler = handlers.lookup(command.t)
    return Delivery(user, command, handler, handlers.validate(handler, command.d), context, client_address)


class Runs:
    """The module's rule, fed one item at a time: which items run together, in order.

    Consecutive batchable (or gathered) deliveries of one type, at most
    `BATCH_LIMIT`, are one group; anything else (another delivery, or whatever a caller keeps
    in its sequence: a refusal, a bad frame) is a group of its own. `add`
    returns the groups that are complete once an item is added, `end` the
    last one; a caller runs each before it adds the next item, so a join's
    effects are there when the command after it is prepared.
    """

    def __init__(self) -> None:
        self.together: list[Any] = []

    def add(self, item: T) -> list[list[T]]:
        ready: list[list[T]] = []
        if isinstance(item, Delivery) and (item.batchable or item.gathered):
            first = self.together[0] if self.together else None
            if first is not None and (first.handler.type != item.handler.type or len(self.together) >= BATCH_LIMIT):
                ready.append(self.together)
                self.together = []
            self.together.append(item)
            return ready
        ready.extend(self.end())
        ready.append([item])
        return ready

    def end(self) -> list[list[Any]]:
        together, self.together = self.together, []
        return [together] if together else []


def runs(items: Iterable[T]) -> Iterator[list[T]]:
    """`items` in the groups that run one after another (`Runs`)."""
    order = Runs()
    for item in items:
        yield from order.add(item)
    yield from order.end()


class Router(Protocol):
    """Where the deliveries it `routes` run instead of here (messaging/federation/routing.py)."""

    def routes(self, delivery: Delivery) -> bool: ...

    async def run(self, deliveries: list[Delivery]) -> list[Outcome | Exception]:
        """Per delivery of one sender's group (one type, in order), its `Outcome` or its refusal."""
        ...


_router: Router | None = None


def route_with(router: Router | None) -> None:
    """Send the deliveries `router` routes to it from now on (None: none)."""
    global _router
    _router = router


async def run(deliveries: list[Delivery]) -> list[Outcome | Exception]:
    """One group of `runs`: per delivery, in order, its `Outcome` or the exception for its caller."""
    router = _router
    if router is not None:
        routed = [router.routes(delivery) for delivery in deliveries]
        if any(routed):
            return await _run_routed(deliveries, routed, router)
    return await _run_here(deliveries)


async def _run_routed(deliveries: list[Delivery], routed: list[bool], router: Router) -> list[Outcome | Exception]:
    """A group part of which the router takes: the rest here first (other rooms: their order
    does not matter against the routed ones'), then the router's, each answer in its place."""
    results: list[Outcome | Exception | None] = [None] * len(deliveries)
    here = [i for i, r in enumerate(routed) if not r]
    away = [i for i, r in enumerate(routed) if r]
    if here:
        for i, result in zip(here, await _run_here([deliveries[i] for i in here])):
            results[i] = result
    for i, result in zip(away, await router.run([deliveries[i] for i in away])):
        results[i] = result
    return results  # type: ignore[return-value]


async def _run_here(deliveries: list[Delivery]) -> list[Outcome | Exception]:
    first = deliveries[0]
    if not first.handler.exactly_once:
        gateway = runtime().gateway
        if first.gathered and first.handler.batch_form(gateway.vendor) is not None:
            # Kept together, in order, in one call with whatever else arrived.
            return await _gatherer(first.handler.type).submit_many(deliveries)
        results: list[Outcome | Exception] = []
        for delivery in deliveries:
            try:
                results.append(await apply_once(delivery, gateway))
            except Exception as exc:
                results.append(exc)
        return results
    deadline = time.monotonic() + get_settings().IN_PROGRESS_WAIT
    batcher = _batcher()
    results = await batcher.submit_many(deliveries)
    busy = [i for i, result in enumerate(results) if isinstance(result, ClaimBusy)]
    if busy:
        polled = await asyncio.gather(*(_poll(batcher, deliveries[i], deadline) for i in busy), return_exceptions=True)
        for i, result in zip(busy, polled):
            # `_poll` raises Exceptions only (a cancellation of this call cancels it too).
            results[i] = cast("Outcome | Exception", result)
    return results


async def submit(user: Any, command: Command, client_address: str | None = None) -> Outcome:
    """Run one command exactly once (or as its type says): its `Outcome`, or raises its `CommandError`.

    Any unexpected failure is logged and raised as `Unavailable`.
    """
    [result] = await run([prepare(user, command, contextvars.copy_context(), client_address)])
    if isinstance(result, BaseException):
        raise result
    return result


async def submit_many(user: Any, commands: list[Command]) -> list[Outcome | CommandError]:
    """One sender's commands, run as the module says (their order kept): per
    command its `Outcome` or the `CommandError` refusing it."""
    prepared: list[Delivery | CommandError] = []
    for command in commands:
        try:
            prepared.append(prepare(user, command, contextvars.copy_context()))
        except CommandError as exc:
            prepared.append(exc)
    results: list[Any] = []
    for group in runs(prepared):
        if isinstance(group[0], CommandError):
            results.extend(group)
        else:
            results.extend(await run(group))  # type: ignore[arg-type]
    return results


def _batcher() -> Batcher[Delivery]:
    """This event loop's batcher: one batch at a time, more (up to half the
    database threads) only while the running ones are slow.

    Posts to the same rooms gain nothing from batches running at once: they
    queue for the rooms' row locks, and the batches are smaller. With two at
    once from the start, the benchmark's 16 sockets made batches of 5.5
    commands; one at a time made them larger and the full path faster, two
    processes by 1.4x (docs/PERFORMANCE.md). A batch that runs longer than
    `BATCH_OVERLAP_AFTER` (a slow statement, a lock held elsewhere) no longer
    holds up the rest: the next one starts beside it. The other threads
    serve the commands that run alone (room.join) and the session checks.

    After a batch, the next one waits `BATCH_SETTLE` rounds of the loop
    (batches.py), so that the sockets it answered are in it with the posts
    they hold: twice the batch under the benchmark's load (docs/PERFORMANCE.md).
    """
    conf = get_settings()
    runners = max(1, conf.DB_THREADS // 2)
    return runtime().part(
        "batcher",
        lambda: Batcher(
            run_batch, runners=runners, limit=BATCH_LIMIT, overlap_after=BATCH_OVERLAP_AFTER, settle=conf.BATCH_SETTLE
        ),
    )


def _gatherer(type: str) -> Batcher[Delivery]:
    """This event loop's batcher of a `gathered` type's deliveries (`receipt`),
    from every sender: those that arrive together run in one call of the
    type's batch form, one transaction (`apply.apply_gathered`), batches
    starting as `_batcher`'s do. Receipts of one room gain nothing from two
    batches at once: the second queues for the room's lock."""
    conf = get_settings()
    runners = max(1, conf.DB_THREADS // 2)
    return runtime().part(
        f"gatherer {type}",
        lambda: Batcher(
            run_gathered,
            runners=runners,
            limit=BATCH_LIMIT,
            overlap_after=BATCH_OVERLAP_AFTER,
            settle=conf.BATCH_SETTLE,
        ),
    )


async def run_gathered(deliveries: list[Delivery]) -> list[Outcome | Exception]:
    metrics.GATHERED_BATCH_SIZE.observe(len(deliveries))
    return await apply_gathered(deliveries, runtime().gateway)


async def run_batch(deliveries: list[Delivery]) -> list[Outcome | Exception]:
    """Claim, apply, record and keep the results of a batch of exactly-once deliveries.

    Known duplicates and posts are answered without leaving the event loop
    (on PostgreSQL); only portable applies take a database thread. The
    statement of an `early_batch` type (`room.post`'s) goes out beside the
    claims' Redis call, not after it (`_early`): one batch's time is then the
    longer of the two, not their sum.
    """
    metrics.BATCH_SIZE.observe(len(deliveries))
    store = get_claim_store()
    gateway = runtime().gateway
    # One owner for the batch's claims: each is still released only by the
    # attempt that took it, and a second copy of a command in the same batch
    # finds the first one's claim.
    owner = uuid.uuid4().hex
    started = time.perf_counter()
    claiming = asyncio.ensure_future(_timed(store.claim_many([d.key for d in deliveries], owner)))
    early = _early(deliveries, store, gateway)
    try:
        applied_early = await apply_early(deliveries, early, gateway) if early else None
        claims, claimed = await asyncio.shield(claiming)
    except BaseException:
        await _give_back(claiming, deliveries, store, owner)
        raise
    _recent().after(claims)
    batch = Batch(deliveries, claims, applied_early)
    try:
        await batch.apply(gateway)
    finally:
        applied = time.perf_counter()
        await store.finish(*batch.finish(), owner)
        # Where a batch's cycle goes, which bounds how often a process's
        # batches can run: the claims' call, then what applying took after it
        # (an early statement's rest), then the results' call.
        metrics.batch_phases(claimed - started, applied - claimed, time.perf_counter() - applied)
    return batch.results()


async def _give_back(claiming: asyncio.Future[Any], deliveries: list[Delivery], store: ClaimStore, owner: str) -> None:
    """A batch cancelled (its socket closed mid-statement) or failed before its claims were known:
    once they are, the ones it took are released, so that a retry need not wait out their lease."""
    try:
        claims, _ = await claiming
    except asyncio.CancelledError:
        return
    await store.finish([], [d.key for d, claim in zip(deliveries, claims) if claim is True], owner)


async def _timed(claims: Awaitable[T]) -> tuple[T, float]:
    """What `claims` returns, and when it did (`time.perf_counter()`)."""
    return await claims, time.perf_counter()


def _early(deliveries: list[Delivery], store: ClaimStore, gateway: Any) -> list[int]:
    """Which deliveries' statement runs beside the batch's claims: those of
    `early_batch` types with a batch form here, one copy of each command
    (a second copy waits for the first one's claim, as always).

    None of them where there is no claims' call to run beside (no Redis), with
    `EARLY_STATEMENT` off, or after a batch whose claims found mostly
    duplicates Redis knew: a storm of retries is answered by Redis alone,
    with no statement that would only look up their records.
    """
    if not isinstance(store, RedisClaimStore) or not get_settings().EARLY_STATEMENT or _recent().mostly_known:
        return []
    seen: set[str] = set()
    early: list[int] = []
    for i, delivery in enumerate(deliveries):
        handler = delivery.handler
        if delivery.key not in seen and handler.early_batch and handler.batch_form(gateway.vendor) is not None:
            early.append(i)
        seen.add(delivery.key)
    return early


class RecentClaims:
    """What this loop's last batch's claims found: whether most were duplicates Redis knew."""

    def __init__(self) -> None:
        self.mostly_known = False

    def after(self, claims: list[Stored | bool | None]) -> None:
        known = sum(1 for claim in claims if isinstance(claim, Stored))
        self.mostly_known = 2 * known > len(claims)


def _recent() -> RecentClaims:
    return runtime().part("recent claims", RecentClaims)


async def _poll(batcher: Batcher[Delivery], delivery: Delivery, deadline: float) -> Outcome:
    """Submit `delivery` again until its command's other attempt is done, or raise `InProgress` at `deadline`.

    Each poll is a full attempt: if the first one failed and released its
    claim, this delivery takes over and applies the command itself.
    """
    pause = 0.01
    while True:
        if time.monotonic() >= deadline:
            raise InProgress()
        await asyncio.sleep(pause)
        pause = min(pause * 2, 0.1)
        try:
            outcome: Outcome = await batcher.submit(delivery)
            return outcome
        except ClaimBusy:
            pass
