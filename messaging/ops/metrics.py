"""Prometheus metrics of the app and their exposition at `/metrics`.

Several server processes: start every process with `PROMETHEUS_MULTIPROC_DIR`
pointing at one empty directory per host (prometheus-client reads it when it
is first imported, so set it in the environment, not in settings). Each process
then writes its values to memory-mapped files there, and a scrape of any one
process adds up all of them: counters and histograms keep the counts of
processes that have exited, the open-sockets gauge counts live processes only.
Without the variable each process reports itself alone, which is right only
when every process is scraped on its own (docs/OPERATIONS.md).

Labels never carry client-chosen text: a command type that has no handler is
counted as `unknown`.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    REGISTRY,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
    multiprocess,
)
from prometheus_client.core import GaugeMetricFamily

UNKNOWN_TYPE = "unknown"

COMMANDS = Counter(
    "messaging_commands",
    "Commands answered, by type and outcome: ok, dup, or the refusal's error code.",
    ["type", "outcome"],
)
DUPLICATES = Counter(
    "messaging_duplicates_suppressed",
    "Duplicates answered with the original ack, by where the answer came from: redis or database.",
    ["type", "source"],
)
ACK_LATENCY = Histogram(
    "messaging_ack_latency_seconds",
    "Time from a command's frame arriving to its ack being sent.",
    ["type"],
    buckets=(0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0),
)
BATCH_SIZE = Histogram(
    "messaging_command_batch_size",
    "Exactly-once commands run together as one batch (one thread hop, one claim round trip, one statement per type).",
    buckets=(1, 2, 4, 8, 16, 32, 64),
)
GATHERED_BATCH_SIZE = Histogram(
    "messaging_gathered_batch_size",
    "Commands of a gathered type (receipt), from any senders, run together in one call of its batch form.",
    buckets=(1, 2, 4, 8, 16, 32, 64),
)
BATCH_PHASES = Histogram(
    "messaging_command_batch_phase_seconds",
    "Wall time of each phase of a batch: claims (Redis claims its commands), apply (the database "
    "applies the claimed ones), results (Redis keeps their results). On a busy event loop each phase "
    "includes the wait for the loop to resume the batch, so the three add up to the batch's cycle.",
    ["phase"],
    buckets=(0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0),
)
OPEN_SOCKETS = Gauge(
    "messaging_open_sockets",
    "Open WebSockets.",
    # Summed over live processes: a killed process's sockets are gone too.
    multiprocess_mode="livesum",
)
ADDRESS_THROTTLED = Counter(
    "messaging_address_throttled",
    "Requests refused for their client address's window: WebSocket handshakes (connect, 403) and guest "
    "sign-ins (signin, 429).",
    ["limit"],
)
FANOUT_FRAMES = Counter(
    "messaging_fanout_frames",
    "Live frames (a room's msg, status, reaction; a user's state) by what became of them: published; lost "
    "(the publish failed) or dropped (the publish queue was full). Clients catch up on lost ones by seq.",
    ["outcome"],
)
SEND_BUFFER_OVERFLOWS = Counter(
    "messaging_send_buffer_overflows",
    "Sockets closed with 1008 because more than MAX_SEND_BUFFER bytes waited for their client to read them.",
)
SEND_BUFFER_DROPPED = Counter(
    "messaging_send_buffer_dropped_frames",
    "Frames never sent because their socket's send buffer overflowed: those that waited, and those that came "
    "for it until it closed.",
)
SEND_BUFFERS = Counter(
    "messaging_send_buffers",
    "Sockets opened, by the server adapter their frames go through (daphne, uvicorn, or asgi: the ASGI send, by "
    "a task) and who frames what it writes (frames: the app's own encoding, written to the connection; server: "
    "the server's framing called directly, as for permessage-deflate; asgi).",
    ["adapter", "framing"],
)
KEEPALIVE_PINGS = Counter(
    "messaging_keepalive_pings",
    "Keepalive pings the process sent its WebSocket connections, by server: daphne (every ping of its sweeps), "
    "uvicorn (those its ping wheel rang, one timer a second for all the connections due). On a server version "
    "the app's replacements were not checked on, the server pings on its own, uncounted.",
    ["server"],
)
UNSENDABLE_FRAMES = Counter(
    "messaging_unsendable_frames",
    "Frames the server could not send, each replaced by a small error frame, by reason: too_large (over the "
    "server's frame limit or MAX_SEND_BUFFER), unencodable (not JSON).",
    ["reason"],
)


# The labelled children per (type, outcome, source): `.labels()` validates and
# locks on every call; the label values are bounded (handler types, outcomes).
_children: dict[tuple[str, str, str | None], tuple[Any, ...]] = {}


def command_answered(type: str, outcome: str, seconds: float, *, source: str | None = None) -> None:
    """Count one answered command. `outcome` is `ok`, `dup` or an error code."""
    key = (type, outcome, source)
    children = _children.get(key)
    if children is None:
        children = _children[key] = (
            COMMANDS.labels(type, outcome),
            DUPLICATES.labels(type, source) if source is not None else None,
            ACK_LATENCY.labels(type),
        )
    commands, duplicates, latency = children
    commands.inc()
    if duplicates is not None:
        duplicates.inc()
    latency.observe(seconds)


# A batch's phases, in the order they run; their children looked up once (see `_children`).
BATCH_PHASE_NAMES = ("claims", "apply", "results")
_batch_phases = tuple(BATCH_PHASES.labels(phase) for phase in BATCH_PHASE_NAMES)


def batch_phases(claims: float, apply: float, results: float) -> None:
    """Time one batch's phases, in seconds."""
    for child, seconds in zip(_batch_phases, (claims, apply, results)):
        child.observe(seconds)


# The labelled child per (adapter, framing), looked up once each (see `_children`).
_send_buffers: dict[tuple[str, str], Any] = {}


def send_buffer_made(adapter: str, framing: str) -> None:
    """Count one socket's send buffer by its server adapter and framing (messaging/transport/servers/)."""
    child = _send_buffers.get((adapter, framing))
    if child is None:
        child = _send_buffers[adapter, framing] = SEND_BUFFERS.labels(adapter, framing)
    child.inc()


# The events downstream (messaging/events/). The relay counts what it
# publishes; the backlog is read from the outbox at scrape time, so a relay
# that is down or stuck shows as a growing lag, not as a stale value of its own.
EVENTS_PUBLISHED = Counter(
    "messaging_events_published",
    "Events the relay published to its sink (at least once: a republished event counts again).",
)
EVENTS_RELAY_PARTITIONS = Gauge(
    "messaging_events_relay_partitions",
    "Outbox partitions held by live relays.",
    multiprocess_mode="livesum",
)
EVENTS_PUBLISH_LAG = Gauge(
    "messaging_events_publish_lag_seconds",
    "Age of the oldest event of a relay's last batch when it was published.",
    multiprocess_mode="livemax",
)


# Federation (messaging/federation/pushing.py): each process's pushers, per peer.
FEDERATION_PUSHED = Counter(
    "messaging_federation_pushed_changes",
    "Changes of shared rooms pushed to a peer (at least once: a change pushed again counts again).",
    ["peer"],
)
FEDERATION_PUSH_FAILURES = Counter(
    "messaging_federation_push_failures",
    "Pushes to a peer that failed (the peer away, the database), each retried after a backoff.",
    ["peer"],
)
FEDERATION_PUSHERS = Gauge(
    "messaging_federation_pushers",
    "Whether this process pushes to the peer (holds its lock): 1 in one process of a deployment per peer.",
    ["peer"],
    multiprocess_mode="livesum",
)
FEDERATION_LAG = Gauge(
    "messaging_federation_lag_seconds",
    "Age of the oldest change of the last push to a peer when it was sent; 0 when nothing waits.",
    ["peer"],
    multiprocess_mode="livemax",
)


class OutboxCollector:
    """`messaging_events_unpublished` and `messaging_events_lag_seconds`, read from the outbox at scrape time.

    The reading is given (`read`: the app's start hands it the events'
    `backlog`), so this layer knows nothing of the events; unread, both are NaN.
    """

    def __init__(self) -> None:
        self.read: Callable[[], tuple[float, float]] | None = None

    def describe(self) -> list[GaugeMetricFamily]:
        # What registering asks for: the names, without a query (nor Django set up).
        return self.families(float("nan"), float("nan"))

    def collect(self) -> list[GaugeMetricFamily]:
        count: float
        try:
            if self.read is None:
                raise LookupError("no reading of the outbox")
            count, age = self.read()
        except Exception:  # a scrape must not fail with the database: NaN says "unknown"
            count, age = float("nan"), float("nan")
        return self.families(count, age)

    def families(self, count: float, age: float) -> list[GaugeMetricFamily]:
        return [
            GaugeMetricFamily(
                "messaging_events_unpublished",
                "Events in the outbox not yet published (counted up to 100,000).",
                value=count,
            ),
            GaugeMetricFamily(
                "messaging_events_lag_seconds",
                "Age of the oldest unpublished event: the relay's lag (0 when it has caught up).",
                value=age,
            ),
        ]


OUTBOX = OutboxCollector()
REGISTRY.register(OUTBOX)


def multiprocess_dir() -> str | None:
    return os.environ.get("PROMETHEUS_MULTIPROC_DIR") or None


_LIVE_GAUGE_FILE = re.compile(r"gauge_live\w+_(\d+)\.db")


def forget_dead_processes(path: str) -> None:
    """Drop the live gauges of processes that are gone.

    prometheus-client expects a process manager to call `mark_process_dead`
    when a worker exits; daphne has none, and a killed process calls nothing,
    so the scrape does it. The directory must belong to this host (pids are).
    """
    for file in Path(path).glob("gauge_live*_*.db"):
        match = _LIVE_GAUGE_FILE.fullmatch(file.name)
        if match is None:
            continue
        pid = int(match.group(1))
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            multiprocess.mark_process_dead(pid, path)  # type: ignore[no-untyped-call]  # untyped in prometheus_client
        except PermissionError:
            pass  # alive, under another user


def exposition() -> tuple[bytes, str]:
    """The text a scrape gets, and its content type."""
    path = multiprocess_dir()
    if path is None:
        return generate_latest(REGISTRY), CONTENT_TYPE_LATEST
    forget_dead_processes(path)
    registry = CollectorRegistry()
    multiprocess.MultiProcessCollector(registry, path=path)  # type: ignore[no-untyped-call]  # untyped in prometheus_client
    registry.register(OUTBOX)
    return generate_latest(registry), CONTENT_TYPE_LATEST
