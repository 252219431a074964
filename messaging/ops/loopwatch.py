"""What stops a process's event loop: the garbage collector's passes, and the loop's lag.

Everything a server process does for its sockets runs on one event loop, so
anything that holds the loop (a full garbage collection over many objects, a
blocking call, a long callback) delays every socket's frames at once. Two
measurements, exported on `/metrics` (docs/OPERATIONS.md, "Loop stalls"):

- `GcTimer`, one of `gc.callbacks`: the wall time of every collection, by
  generation (`messaging_gc_pause_seconds`).
- `LagSampler`, a callback the loop runs every `LOOP_LAG_INTERVAL` seconds:
  how late the loop ran it (`messaging_loop_lag_seconds`). A late tick means
  the loop was busy, or stopped, for that long; the collector's share of the
  delay is logged beside it.

A pass or a lag of at least `STALL_LOG_AFTER` seconds is logged as a warning
(logger `messaging.ops.loopwatch`). Neither needs Django or Channels.

`tune_collector` sets the collector up as the settings say: the timer
(`GC_TIMING`), the thresholds (`GC_THRESHOLDS`), and `gc.freeze()` of what
exists at start-up (`GC_FREEZE`).
"""

from __future__ import annotations

import asyncio
import atexit
import gc
import logging
import time
from collections.abc import Callable, Iterable
from typing import Any

from django.core.exceptions import ImproperlyConfigured
from prometheus_client import Gauge, Histogram

log = logging.getLogger(__name__)

# From a fraction of a millisecond (a young collection) to the stalls a socket notices.
BUCKETS = (0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5)

GC_PAUSE = Histogram(
    "messaging_gc_pause_seconds",
    "Wall time of each garbage collection of the process, by generation (0, 1, 2: 2 is a full collection); "
    "the event loop waits for it.",
    ["generation"],
    buckets=BUCKETS,
)
GC_PAUSE_MAX = Gauge(
    "messaging_gc_pause_max_seconds",
    "The longest garbage collection of a live process since it started, by generation.",
    ["generation"],
    multiprocess_mode="livemax",
)
LOOP_LAG = Histogram(
    "messaging_loop_lag_seconds",
    "How late the event loop ran a callback it was due to run (sampled every LOOP_LAG_INTERVAL): the time "
    "it was busy or stopped, during which no socket's frame was read or written.",
    buckets=BUCKETS,
)
LOOP_LAG_MAX = Gauge(
    "messaging_loop_lag_max_seconds",
    "The longest event-loop lag of a live process since it started.",
    multiprocess_mode="livemax",
)

GENERATIONS = ("0", "1", "2")


class GcTimer:
    """A `gc.callbacks` entry timing every collection; `total` is the seconds spent in them so far.

    `slow`: a collection at least this long is logged (0: never).
    """

    def __init__(self, slow: float = 0.0) -> None:
        self.slow = slow
        self.total = 0.0
        self.collections = 0
        self.started = 0.0
        self.longest = [0.0, 0.0, 0.0]
        self._histograms = tuple(GC_PAUSE.labels(g) for g in GENERATIONS)
        self._maxima = tuple(GC_PAUSE_MAX.labels(g) for g in GENERATIONS)

    def __call__(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self.started = time.perf_counter()
            return
        seconds = time.perf_counter() - self.started
        generation = info["generation"]
        self.total += seconds
        self.collections += 1
        self._histograms[generation].observe(seconds)
        if seconds > self.longest[generation]:
            self.longest[generation] = seconds
            self._maxima[generation].set(seconds)
        if self.slow and seconds >= self.slow:
            log.warning(
                "garbage collection of generation %d took %.1f ms (%d collected, %d uncollectable)",
                generation,
                seconds * 1000,
                info.get("collected", 0),
                info.get("uncollectable", 0),
            )


_timer: GcTimer | None = None


def time_collections(slow: float = 0.0) -> GcTimer:
    """Install the process's `GcTimer` (once; a second call updates its threshold) and return it."""
    global _timer
    if _timer is None:
        _timer = GcTimer(slow)
        gc.callbacks.append(_timer)
        # The interpreter's last collections run after logging's streams may be closed.
        atexit.register(stop_timing_collections)
    else:
        _timer.slow = slow
    return _timer


def stop_timing_collections() -> None:
    """Remove the process's `GcTimer`, if installed."""
    global _timer
    if _timer is not None:
        if _timer in gc.callbacks:
            gc.callbacks.remove(_timer)
        _timer = None


def collection_seconds() -> float:
    """The seconds spent in garbage collections since `time_collections` (0 without it)."""
    return _timer.total if _timer is not None else 0.0


_longest_lag = 0.0


class LagSampler:
    """Schedules a callback every `interval` seconds on `loop` and records how late each ran.

    One timer handle, no task. `slow`: a lag at least this long is logged with
    the collector's share of it (0: never). `observe(lag)` is called with each
    tick's lag besides the metrics (tests, the bench).
    """

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        interval: float,
        slow: float = 0.0,
        observe: Callable[[float], None] | None = None,
    ) -> None:
        if interval <= 0:
            raise ValueError("interval must be positive")
        self.loop = loop
        self.interval = interval
        self.slow = slow
        self.observe = observe
        self.longest = 0.0
        self.ticks = 0
        self._handle: asyncio.TimerHandle | None = None
        self._due = 0.0
        self._gc_at_due = 0.0

    def start(self) -> LagSampler:
        if self._handle is None:
            self._schedule(self.loop.time())
        return self

    def stop(self) -> None:
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None

    @property
    def running(self) -> bool:
        return self._handle is not None

    def _schedule(self, now: float) -> None:
        self._due = now + self.interval
        self._gc_at_due = collection_seconds()
        self._handle = self.loop.call_at(self._due, self._tick)

    def _tick(self) -> None:
        now = self.loop.time()
        lag = max(0.0, now - self._due)
        self.ticks += 1
        LOOP_LAG.observe(lag)
        if lag > self.longest:
            self.longest = lag
            global _longest_lag
            # The process's longest over all its loops (a test's, a thread's beside the server's).
            if lag > _longest_lag:
                _longest_lag = lag
                LOOP_LAG_MAX.set(lag)
        if self.slow and lag >= self.slow:
            # An upper bound of the collector's share: its passes since the tick was scheduled.
            collected = collection_seconds() - self._gc_at_due
            log.warning(
                "event loop stalled: a callback ran %.1f ms late (garbage collection %.1f ms of it)",
                lag * 1000,
                collected * 1000,
            )
        if self.observe is not None:
            self.observe(lag)
        self._schedule(now)


def watch_loop(loop: asyncio.AbstractEventLoop, interval: float, slow: float = 0.0) -> LagSampler | None:
    """A started `LagSampler` of `loop`, or None when `interval` is 0 (off)."""
    if not interval:
        return None
    return LagSampler(loop, interval, slow).start()


def gc_thresholds(given: str | Iterable[int] | None) -> tuple[int, ...]:
    """A `GC_THRESHOLDS` value as a tuple of one to three non-negative ints (empty: Python's own)."""
    entries = (given or "").split(",") if isinstance(given, str) or given is None else list(given)
    try:
        found = tuple(int(str(entry).strip()) for entry in entries if str(entry).strip())
    except ValueError:
        found = (-1,)
    if len(found) > 3 or any(n < 0 for n in found):
        raise ImproperlyConfigured(f"GC_THRESHOLDS: {given!r} is not up to three non-negative integers")
    return found


def tune_collector(settings: Any) -> None:
    """The process's collector as the settings say (`GC_TIMING`, `STALL_LOG_AFTER`, `GC_THRESHOLDS`,
    `GC_FREEZE`): the app's `ready()` calls it, and a server's ASGI module again once it has built
    its application, to freeze what that made too."""
    if settings.GC_TIMING:
        time_collections(settings.STALL_LOG_AFTER)
    if settings.GC_THRESHOLDS:
        gc.set_threshold(*settings.GC_THRESHOLDS)
    if settings.GC_FREEZE:
        # What exists now lives as long as the process: no collection walks it again.
        gc.freeze()
