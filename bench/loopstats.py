"""What stopped the servers' event loops during a timed window: their own metrics
(messaging/ops/loopwatch.py), read from each server's `/metrics` before and after.

Per server: the garbage collections of each generation in the window (how
many, their total and the bucket of the longest), and the loop's lag
samples (how many, the bucket holding their p99, how many 50 ms or more, and
the longest lag since the process started).
"""

from __future__ import annotations

import math
import urllib.request

from prometheus_client.parser import text_string_to_metric_families

from .measure import METRICS_TOKEN

Reading = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def read(url: str) -> Reading:
    """The loop watch's samples of one server, by (sample name, labels)."""
    request = urllib.request.Request(url + "/metrics", headers={"Authorization": f"Bearer {METRICS_TOKEN}"})
    text = urllib.request.urlopen(request, timeout=10).read().decode()
    found: Reading = {}
    for family in text_string_to_metric_families(text):
        if not family.name.startswith(("messaging_gc_pause", "messaging_loop_lag", "process_cpu_seconds")):
            continue
        for sample in family.samples:
            found[sample.name, tuple(sorted(sample.labels.items()))] = sample.value
    return found


def buckets(reading: Reading, name: str, **labels: str) -> list[tuple[float, float]]:
    """A histogram's cumulative (upper bound, count) pairs, in order."""
    pairs = []
    for (sample, found), value in reading.items():
        if sample != f"{name}_bucket":
            continue
        given = dict(found)
        if any(given.get(k) != v for k, v in labels.items()):
            continue
        pairs.append((float(given["le"]), value))
    return sorted(pairs)


def window(before: Reading, after: Reading) -> dict:
    """One server's collections and lag between two readings."""
    out: dict = {}
    cpu = ("process_cpu_seconds_total", ())
    if cpu in after and cpu in before:
        # The server process's CPU time over the window (all its threads), in seconds.
        out["cpu_seconds"] = round(after[cpu] - before[cpu], 2)
    for generation in ("0", "1", "2"):
        key = ("messaging_gc_pause_seconds_count", (("generation", generation),))
        total = ("messaging_gc_pause_seconds_sum", (("generation", generation),))
        count = after.get(key, 0.0) - before.get(key, 0.0)
        spent = after.get(total, 0.0) - before.get(total, 0.0)
        diff = _diff(
            buckets(before, "messaging_gc_pause_seconds", generation=generation),
            buckets(after, "messaging_gc_pause_seconds", generation=generation),
        )
        out[f"gc{generation}"] = {
            "count": int(count),
            "total_ms": round(spent * 1000, 1),
            "longest_under_ms": _top(diff),
        }
        longest = after.get(("messaging_gc_pause_max_seconds", (("generation", generation),)))
        if longest is not None:
            out[f"gc{generation}"]["longest_since_start_ms"] = round(longest * 1000, 1)
    lag = _diff(buckets(before, "messaging_loop_lag_seconds"), buckets(after, "messaging_loop_lag_seconds"))
    samples = lag[-1][1] if lag else 0
    out["lag"] = {
        "samples": int(samples),
        "p99_under_ms": _quantile(lag, 0.99),
        "at_least_50ms": int(samples - next((c for le, c in lag if le >= 0.05), samples)) if lag else 0,
        "longest_under_ms": _top(lag),
        "longest_since_start_ms": round(after.get(("messaging_loop_lag_max_seconds", ()), 0.0) * 1000, 1),
    }
    return out


def _diff(before: list[tuple[float, float]], after: list[tuple[float, float]]) -> list[tuple[float, float]]:
    then = dict(before)
    return [(le, count - then.get(le, 0.0)) for le, count in after]


def _quantile(cumulative: list[tuple[float, float]], q: float) -> float | None:
    """The upper bound of the bucket holding the q-quantile, in ms (inf: past the last bucket)."""
    if not cumulative or not cumulative[-1][1]:
        return None
    wanted = q * cumulative[-1][1]
    for le, count in cumulative:
        if count >= wanted:
            return _ms(le)
    return None


def _top(cumulative: list[tuple[float, float]]) -> float | None:
    """The upper bound of the highest bucket with anything in it, in ms."""
    previous = 0.0
    top = None
    for le, count in cumulative:
        if count > previous:
            top = _ms(le)
        previous = count
    return top


def _ms(le: float) -> float:
    return math.inf if math.isinf(le) else round(le * 1000, 1)


def loop_watch(urls: list[str]) -> list[Reading]:
    """Every server's reading now (an empty one for a server that does not answer)."""
    readings = []
    for url in urls:
        try:
            readings.append(read(url))
        except OSError:
            readings.append({})
    return readings
