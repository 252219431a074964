"""The loop watch (messaging/ops/loopwatch.py): real collections timed by generation, a real
event loop's lag sampled, and the collector's settings (`GC_THRESHOLDS`, `GC_FREEZE`)."""

from __future__ import annotations

import asyncio
import gc
import json
import logging
import os
import subprocess
import sys
import time

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.test import override_settings
from prometheus_client import REGISTRY

from messaging.conf import MessagingSettings, options_from_environ
from messaging.core.runtime import close_runtime, runtime
from messaging.ops import loopwatch
from messaging.ops.loopwatch import GcTimer, LagSampler, gc_thresholds, time_collections

from ..support.servers import ROOT


def sample(name: str, **labels: str) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


@pytest.fixture
def timer():
    """The process's timer, as the app's `ready()` installed it (or installed here), restored after."""
    installed = loopwatch._timer
    found = time_collections(installed.slow if installed else 0.0)
    slow = found.slow
    yield found
    found.slow = slow
    if installed is None:
        loopwatch.stop_timing_collections()


@pytest.mark.parametrize("generation", [0, 1, 2])
def test_every_collection_is_timed_under_its_generation(timer, generation):
    before = sample("messaging_gc_pause_seconds_count", generation=str(generation))
    spent = timer.total
    gc.collect(generation)
    assert sample("messaging_gc_pause_seconds_count", generation=str(generation)) == before + 1
    assert timer.total > spent
    assert sample("messaging_gc_pause_max_seconds", generation=str(generation)) > 0


def test_the_timer_is_installed_once(timer):
    assert time_collections(0.0) is timer
    assert gc.callbacks.count(timer) == 1


def test_a_collection_at_least_as_long_as_the_threshold_is_logged(timer, caplog):
    timer.slow = 1e-9  # every collection takes longer than a nanosecond
    with caplog.at_level(logging.WARNING, logger="messaging.ops.loopwatch"):
        gc.collect(2)
    assert any("garbage collection of generation 2 took" in r.getMessage() for r in caplog.records)


def test_without_a_threshold_nothing_is_logged(caplog):
    own = GcTimer(slow=0.0)
    # The app's own timer (its `ready()` installs one, with `STALL_LOG_AFTER`) would log
    # a collection slowed past its threshold by a busy machine: only this one is heard.
    installed = [callback for callback in gc.callbacks if isinstance(callback, GcTimer)]
    for callback in installed:
        gc.callbacks.remove(callback)
    gc.callbacks.append(own)
    try:
        with caplog.at_level(logging.WARNING, logger="messaging.ops.loopwatch"):
            gc.collect()
    finally:
        gc.callbacks.remove(own)
        gc.callbacks.extend(installed)
    assert own.collections == 1
    assert not [r for r in caplog.records if r.name == "messaging.ops.loopwatch" and "generation" in r.getMessage()]


def test_a_loop_held_by_a_callback_shows_as_lag_and_is_logged(caplog):
    loop = asyncio.new_event_loop()
    lags: list[float] = []
    before = sample("messaging_loop_lag_seconds_count")
    try:
        sampler = LagSampler(loop, 0.01, slow=0.1, observe=lags.append).start()
        # Runs before the tick is due and holds the loop for 0.3 s: the tick cannot run sooner.
        loop.call_soon(time.sleep, 0.3)
        with caplog.at_level(logging.WARNING, logger="messaging.ops.loopwatch"):
            loop.run_until_complete(asyncio.sleep(0.35))
        sampler.stop()
    finally:
        loop.close()
    assert lags and lags[0] >= 0.25
    assert sampler.longest >= 0.25
    assert sample("messaging_loop_lag_seconds_count") >= before + 1
    assert sample("messaging_loop_lag_max_seconds") >= 0.25
    assert any("event loop stalled" in r.getMessage() for r in caplog.records)


def test_a_stopped_sampler_ticks_no_more():
    loop = asyncio.new_event_loop()
    try:
        sampler = LagSampler(loop, 0.01).start()
        loop.run_until_complete(asyncio.sleep(0.05))
        assert sampler.ticks >= 1
        sampler.stop()
        ticks = sampler.ticks
        loop.run_until_complete(asyncio.sleep(0.05))
    finally:
        loop.close()
    assert not sampler.running
    assert sampler.ticks == ticks


def test_an_interval_of_zero_samples_nothing():
    assert loopwatch.watch_loop(asyncio.new_event_loop(), 0.0) is None
    with pytest.raises(ValueError):
        LagSampler(asyncio.new_event_loop(), 0.0)


@override_settings(MESSAGING={"LOOP_LAG_INTERVAL": 0.01})
async def test_a_loops_runtime_samples_its_lag_until_it_closes():
    found = runtime()
    samplers = [c.__self__ for c in found.closers if isinstance(getattr(c, "__self__", None), LagSampler)]
    assert len(samplers) == 1
    await asyncio.sleep(0.05)
    assert samplers[0].ticks >= 1
    await close_runtime()
    assert not samplers[0].running


@override_settings(MESSAGING={"LOOP_LAG_INTERVAL": 0})
async def test_a_loops_runtime_without_an_interval_has_no_sampler():
    found = runtime()
    assert not [c for c in found.closers if isinstance(getattr(c, "__self__", None), LagSampler)]
    await close_runtime()


@pytest.mark.parametrize(
    "given, found",
    [("", ()), (None, ()), ("10000, 10,100", (10000, 10, 100)), ([700], (700,)), ((0,), (0,))],
)
def test_gc_thresholds_are_up_to_three_non_negative_integers(given, found):
    assert gc_thresholds(given) == found
    assert MessagingSettings(GC_THRESHOLDS=given).GC_THRESHOLDS == found


@pytest.mark.parametrize("given", ["a,b", "-1", "1,2,3,4", [1.5]])
def test_other_gc_thresholds_are_a_config_error(given):
    with pytest.raises(ImproperlyConfigured, match="GC_THRESHOLDS"):
        MessagingSettings(GC_THRESHOLDS=given)


@pytest.mark.parametrize("name", ["LOOP_LAG_INTERVAL", "STALL_LOG_AFTER"])
def test_a_negative_interval_or_threshold_is_a_config_error(name):
    with pytest.raises(ImproperlyConfigured, match=name):
        MessagingSettings(**{name: -0.1})
    assert getattr(MessagingSettings(**{name: 0}), name) == 0


def test_the_collectors_settings_come_from_the_environment():
    options = options_from_environ({"MESSAGING_GC_THRESHOLDS": "50000,20,100", "MESSAGING_GC_FREEZE": "0"})
    settings = MessagingSettings(**options)
    assert (settings.GC_THRESHOLDS, settings.GC_FREEZE) == ((50000, 20, 100), False)


def collector_of_a_process(env: dict[str, str], module: str = "project.asgi") -> dict:
    """The collector's thresholds, frozen objects and timer of a process that imported `module` (each
    process of its own: all three are process-wide)."""
    probe = (
        f"import gc, json, {module}; from messaging.ops import loopwatch; "
        "print(json.dumps([gc.get_threshold(), gc.get_freeze_count(), loopwatch._timer in gc.callbacks]))"
    )
    environ = {k: v for k, v in os.environ.items() if not k.startswith("MESSAGING_GC")}
    out = subprocess.run(
        [sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, check=True, env={**environ, **env}
    )
    thresholds, frozen, timed = json.loads(out.stdout)
    return {"thresholds": tuple(thresholds), "frozen": frozen, "timed": timed}


def test_a_server_process_tunes_its_collector_as_the_settings_say():
    found = collector_of_a_process({"MESSAGING_GC_THRESHOLDS": "12345,11,99"})
    assert found["thresholds"] == (12345, 11, 99)
    assert found["frozen"] > 50_000 and found["timed"]


def test_each_of_the_collectors_settings_turns_off():
    found = collector_of_a_process(
        {"MESSAGING_GC_THRESHOLDS": "", "MESSAGING_GC_FREEZE": "0", "MESSAGING_GC_TIMING": "0"}
    )
    assert found == {"thresholds": (700, 10, 10), "frozen": 0, "timed": False}


def test_the_app_alone_freezes_what_exists_once_it_is_ready():
    # A host's own ASGI module, or a management command: django.setup() runs the app's ready().
    found = collector_of_a_process(
        {"DJANGO_SETTINGS_MODULE": "project.settings"}, module="django; django.setup(); import django.conf"
    )
    assert found["frozen"] > 10_000
