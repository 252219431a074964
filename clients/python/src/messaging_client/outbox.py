"""The client's outbox: every user action keeps one id until the server settles it.

PROTOCOL.md, "The client's outbox": an action gets its id once and is stored
before its first send; it is resent with the same id after a reconnect, after
an ack timeout and after a `retry: true` refusal, and leaves only on an `ok`
ack or a refusal with `retry: false`. This module holds that bookkeeping and
its persistence; it does no network I/O (`messaging_client.Client` sends what
it says is due), so it can be tested with a hand-stepped clock.

Lanes, as in the browser's `outbox.js`: posts (and edits and deletes) of one
room go one at a time, in order, so that a post stuck on `in_progress` cannot
let a later one take an earlier seq; every other command has no lane and goes
at once.
"""

from __future__ import annotations

import json
import os
import random
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

from .ids import time_ordered_id

# Per command type, its lane: "room", one lane per `d.room`, for the commands
# whose order within a room is what the user sees. The server publishes its
# types' lanes (`x-messaging-lanes` of `GET /api/openapi.json`: `served_lanes`);
# these are the built-in types', for a client that has not read them.
LANES: Mapping[str, str] = MappingProxyType({"room.post": "room", "message.edit": "room", "message.delete": "room"})
ORDERED_TYPES = frozenset(LANES)


def lane_of(t: str, d: Mapping[str, Any], lanes: Mapping[str, str] = LANES) -> str | None:
    """The lane of a command of type `t` with data `d`: `room:<d.room>`, or None (sent at once)."""
    return f"room:{d.get('room', '')}" if lanes.get(t) == "room" else None


def backoff_delay(attempt: int, *, base: float, cap: float, rand: Callable[[], float] = random.random) -> float:
    """Full jitter: uniform in [0, min(cap, base * 2^attempt))."""
    return rand() * min(cap, base * 2.0 ** max(0, attempt))


@dataclass
class Entry:
    """One user action: the command as first sent, with its id, and when it may go next."""

    id: str
    t: str
    d: dict[str, Any]
    order: int
    attempts: int = 0
    # When this entry may be (re)sent: None while it waits for its ack.
    due: float | None = 0.0
    # The ack timeout of the attempt in flight.
    expires: float | None = None
    # The lanes of the outbox it is in.
    lanes: Mapping[str, str] = field(default_factory=lambda: LANES, repr=False, compare=False)

    @property
    def lane(self) -> str | None:
        # One lane per room for all of them: an edit or delete of a message waits for what was sent before it.
        return lane_of(self.t, self.d, self.lanes)

    def frame(self) -> dict[str, Any]:
        return {"id": self.id, "t": self.t, "d": self.d}

    def stored(self) -> dict[str, Any]:
        return {"id": self.id, "t": self.t, "d": self.d, "order": self.order}


class MemoryStore:
    """An outbox that lives as long as the process: for bots whose actions may be lost with them."""

    def __init__(self) -> None:
        self._entries: dict[str, dict[str, Any]] = {}

    def load(self) -> list[dict[str, Any]]:
        return sorted(self._entries.values(), key=lambda e: e["order"])

    def put(self, entry: dict[str, Any]) -> None:
        self._entries[entry["id"]] = entry

    def delete(self, id: str) -> None:
        self._entries.pop(id, None)


class FileStore(MemoryStore):
    """An outbox kept in a JSON file, so that a restarted process resends what it had not settled.

    Every change rewrites the file through a temporary file and a rename, so
    a crash leaves the old content or the new, never half of either. Meant
    for an outbox of a bot or a script (at most `limit` entries), not for a
    queue of thousands.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        super().__init__()
        self.path = Path(path)
        if self.path.exists():
            for entry in json.loads(self.path.read_text() or "[]"):
                self._entries[entry["id"]] = entry

    def put(self, entry: dict[str, Any]) -> None:
        super().put(entry)
        self._write()

    def delete(self, id: str) -> None:
        if id in self._entries:
            super().delete(id)
            self._write()

    def _write(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd, temporary = tempfile.mkstemp(dir=self.path.parent, prefix=self.path.name, suffix=".tmp")
        try:
            with os.fdopen(fd, "w") as file:
                json.dump(self.load(), file)
                file.flush()
                os.fsync(file.fileno())
            os.replace(temporary, self.path)
        except BaseException:
            os.unlink(temporary)
            raise


class OutboxFull(Exception):
    """The outbox holds `limit` unsettled actions: the server is away or refusing; try later."""


class Outbox:
    """Pending actions in the order they were made, and which of them are due to be sent."""

    def __init__(
        self,
        store: MemoryStore | None = None,
        *,
        limit: int = 1000,
        ack_timeout: float = 5.0,
        backoff_base: float = 0.5,
        backoff_cap: float = 30.0,
        clock: Callable[[], float] = time.monotonic,
        rand: Callable[[], float] = random.random,
        lanes: Mapping[str, str] = LANES,
    ) -> None:
        self.store = store if store is not None else MemoryStore()
        self.lanes = lanes
        self.limit = limit
        self.ack_timeout = ack_timeout
        self.backoff_base = backoff_base
        self.backoff_cap = backoff_cap
        self.clock = clock
        self.rand = rand
        self.entries: dict[str, Entry] = {}
        for stored in self.store.load():
            self.entries[stored["id"]] = Entry(stored["id"], stored["t"], stored["d"], stored["order"], lanes=lanes)
        self._last_order = max((e.order for e in self.entries.values()), default=0)

    def __len__(self) -> int:
        return len(self.entries)

    def __contains__(self, id: str) -> bool:
        return id in self.entries

    def pending(self) -> list[Entry]:
        return sorted(self.entries.values(), key=lambda e: e.order)

    def add(self, t: str, d: dict[str, Any], id: str | None = None) -> Entry:
        """One user action, stored before anything is sent. A given `id` that is
        already pending is that action again (a bot's deterministic id), not a new one."""
        if id is not None and id in self.entries:
            return self.entries[id]
        if len(self.entries) >= self.limit:
            raise OutboxFull(f"{len(self.entries)} actions are waiting to be settled")
        order = max(time.time_ns(), self._last_order + 1)
        self._last_order = order
        entry = Entry(id or time_ordered_id(), t, d, order, lanes=self.lanes)
        self.store.put(entry.stored())
        self.entries[entry.id] = entry
        return entry

    def due(self) -> Iterator[Entry]:
        """The entries to send now: per lane the oldest, if it is due; every due entry without a lane."""
        now = self.clock()
        lanes: set[str] = set()
        for entry in self.pending():
            lane = entry.lane
            if lane is not None:
                if lane in lanes:
                    continue
                lanes.add(lane)
            if entry.expires is not None and now >= entry.expires:
                entry.due = now  # its ack is overdue: the same id again
            if entry.due is not None and now >= entry.due:
                yield entry

    def sent(self, entry: Entry) -> None:
        entry.attempts += 1
        entry.due = None
        entry.expires = self.clock() + self.ack_timeout

    def disconnected(self) -> None:
        """Nothing in flight will be acked now: everything is due again once the socket is back."""
        for entry in self.entries.values():
            entry.due, entry.expires = 0.0, None

    def settle(self, id: str) -> Entry | None:
        """An `ok` ack or a final refusal: the entry leaves the outbox."""
        entry = self.entries.pop(id, None)
        if entry is not None:
            self.store.delete(id)
        return entry

    def retry_later(self, id: str, retry_after: float | None) -> None:
        """A `retry: true` refusal: the same id again after a full-jitter pause (and at least `retry_after`)."""
        entry = self.entries.get(id)
        if entry is None:
            return
        pause = backoff_delay(entry.attempts - 1, base=self.backoff_base, cap=self.backoff_cap, rand=self.rand)
        entry.due = self.clock() + max(pause, retry_after or 0.0)
        entry.expires = None

    def next_wakeup(self) -> float | None:
        """When the earliest timer (a retry, an ack timeout) falls due; None if none is set."""
        times: Iterable[float] = [t for e in self.entries.values() for t in (e.due, e.expires) if t]
        return min(times, default=None)


def final(ack: dict[str, Any]) -> bool:
    """Whether an ack settles its command: ok, or a refusal the client must not retry."""
    return bool(ack.get("ok")) or not (ack.get("error") or {}).get("retry", False)


__all__ = ["Entry", "FileStore", "MemoryStore", "Outbox", "OutboxFull", "backoff_delay", "final"]
