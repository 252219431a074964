"""The history of a run: what each client sent and was told, when, and the faults around it.

Clients record here as things happen (one event loop, so in the order they
happened), and the checks that need nothing but the history run here as
each answer or frame arrives: a duplicate's ack that differs, an
`in_progress` nothing explains, a message that differs between two copies,
a watermark or a counter seen lower than a value known to be committed
before the command was even sent. The checks over the database are
`checker`'s. Times are seconds since the run began (`time.monotonic`).
"""

from __future__ import annotations

import bisect
import json
import time
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

# How far a claim's lease (the servers' CLAIM_LEASE) and clock slack reach
# back when deciding whether a claim could still be held.
LEASE = 2.0
SLACK = 1.0


@dataclass
class Attempt:
    """One send of a command's frame on one socket, and its answer."""

    client: int
    id: str
    socket: int
    kind: str  # send, resend, probe (an acked command sent again), cut (written half, then the socket cut)
    sent: float
    answered: float | None = None
    answer: dict | None = None

    def describe(self) -> str:
        if self.answer is None:
            outcome = "never answered"
        elif self.answer.get("ok"):
            outcome = f"ok dup={self.answer['dup']} d={json.dumps(self.answer['d'], sort_keys=True)}"
        else:
            outcome = f"refused {self.answer['error']['code']}"
        answered = "" if self.answered is None else f" -> {self.answered:.3f}"
        return f"{self.sent:.3f}{answered} client {self.client} socket {self.socket} {self.kind}: {outcome}"


@dataclass
class Command:
    """An outbox entry: one user action, its id minted once."""

    client: int
    id: str
    t: str
    d: dict
    created: float
    attempts: list[Attempt] = field(default_factory=list)
    # The first ok ack, which every later one must equal.
    first_ok: dict | None = None
    refused: dict | None = None

    @property
    def acked(self) -> bool:
        return self.first_ok is not None


@dataclass
class Fault:
    kind: str
    params: dict
    start: float
    end: float | None = None

    def describe(self) -> str:
        end = "..." if self.end is None else f"{self.end:.3f}"
        return f"{self.start:.3f}-{end} {self.kind} {json.dumps(self.params, sort_keys=True)}"


@dataclass
class Violation:
    kind: str
    message: str
    at: float
    keys: list[tuple[int, str]] = field(default_factory=list)
    detail: list[str] = field(default_factory=list)


class LowerBounds:
    """Per key, the highest value known to be committed by each time.

    Observations arrive in time order; only increases are kept, so a key
    costs one point per distinct value it reached.
    """

    def __init__(self) -> None:
        self.times: dict[Any, list[float]] = defaultdict(list)
        self.values: dict[Any, list[int]] = defaultdict(list)

    def observe(self, key: Any, at: float, value: int) -> None:
        values = self.values[key]
        if not values or value > values[-1]:
            self.times[key].append(at)
            values.append(value)

    def before(self, key: Any, at: float) -> int | None:
        """The highest value observed strictly before `at`, if any."""
        times = self.times.get(key)
        if not times:
            return None
        i = bisect.bisect_left(times, at)
        return self.values[key][i - 1] if i else None


class History:
    def __init__(self, seed: int) -> None:
        self.seed = seed
        self.t0 = time.monotonic()
        self.commands: dict[tuple[int, str], Command] = {}
        self.faults: list[Fault] = []
        self.violations: list[Violation] = []
        self.seen: set[tuple] = set()
        self.counts: Counter[str] = Counter()
        self.handshakes: Counter[str] = Counter()
        self.closes: Counter[str] = Counter()
        # Windows in which Redis was faulted or answered slowly: a claim's
        # release may not have reached it then.
        self.redis_trouble: list[list[float | None]] = []
        # What each (room, seq) holds, from the first copy seen: (id, sender, body).
        self.messages: dict[tuple[str, int], tuple[str, Any, str]] = {}
        self.watermarks = LowerBounds()  # (room, user, "delivered"|"read")
        self.counters = LowerBounds()  # ("reaction", room, seq) and ("wallet", name)
        # Per (client, room): the highest delivered and read each client sent and was acked.
        self.receipts_sent: dict[tuple[int, str], list[int]] = defaultdict(lambda: [0, 0])
        self.receipts_acked: dict[tuple[int, str], list[int]] = defaultdict(lambda: [0, 0])
        self.users: dict[int, Any] = {}  # client -> user id

    def now(self) -> float:
        return time.monotonic() - self.t0

    def violate(
        self, kind: str, message: str, keys: Iterable[tuple[int, str]] = (), detail: Iterable[str] = ()
    ) -> None:
        keys = list(keys)
        # Once per kind and command (or message): the first time shows it.
        seen = (kind, tuple(keys) or message)
        if seen in self.seen:
            return
        self.seen.add(seen)
        self.violations.append(Violation(kind, message, self.now(), keys, list(detail)))

    # -- faults -------------------------------------------------------------------------

    def fault_started(self, kind: str, params: dict) -> Fault:
        fault = Fault(kind, params, self.now())
        self.faults.append(fault)
        self.counts[f"fault {kind}"] += 1
        if kind in ("kill-redis", "pause-redis"):
            self.redis_trouble.append([fault.start, None])
        return fault

    def fault_ended(self, fault: Fault) -> None:
        fault.end = self.now()
        if fault.kind in ("kill-redis", "pause-redis"):
            for window in self.redis_trouble:
                if window[0] == fault.start and window[1] is None:
                    window[1] = fault.end

    def redis_slow(self, start: float, end: float) -> None:
        self.redis_trouble.append([start, end])

    def redis_troubled(self, start: float, end: float) -> bool:
        now = self.now()
        return any(s <= end and (e if e is not None else now) >= start for s, e in self.redis_trouble)

    # -- commands -----------------------------------------------------------------------

    def command(self, client: int, id: str, t: str, d: dict) -> Command:
        key = (client, id)
        found = self.commands.get(key)
        if found is None:
            found = self.commands[key] = Command(client, id, t, d, self.now())
            self.counts[f"command {t}"] += 1
        return found

    def sent(self, client: int, id: str, socket: int, kind: str) -> Attempt:
        attempt = Attempt(client, id, socket, kind, self.now())
        self.commands[(client, id)].attempts.append(attempt)
        self.counts[f"attempt {kind}"] += 1
        return attempt

    def answered(self, attempt: Attempt, frame: dict) -> None:
        attempt.answered, attempt.answer = self.now(), frame
        command = self.commands[(attempt.client, attempt.id)]
        key = (attempt.client, attempt.id)
        if frame["ok"]:
            self.counts["answer dup" if frame["dup"] else "answer ok"] += 1
            if command.first_ok is None:
                command.first_ok = frame
            elif frame["d"] != command.first_ok["d"]:
                self.violate("acks-differ", f"{command.t} {command.id}: an ack's d differs from the first ack's", [key])
            if (
                not frame["dup"]
                and sum(1 for a in command.attempts if a.answer and a.answer["ok"] and not a.answer["dup"]) > 1
            ):
                self.violate("applied-twice", f"{command.t} {command.id}: two acks with dup false", [key])
            self.check_counter(command, attempt, frame)
            return
        code = frame["error"]["code"]
        self.counts[f"answer {code}"] += 1
        if not frame["error"]["retry"]:
            command.refused = frame
            self.violate("refused", f"{command.t} {command.id}: refused with {code}, retry false", [key])
        elif code == "in_progress":
            self.check_in_progress(command, attempt)

    def check_in_progress(self, command: Command, attempt: Attempt) -> None:
        """`in_progress` needs a claim held by another attempt of the command.

        Such a claim can come from an attempt that was not answered by the time
        this one was sent (still running, or never to be answered: its socket
        was cut, its process killed or stopped), or from one whose claim Redis
        did not get to release or replace (Redis faulted or slow within a
        lease). An attempt answered before this one was sent had its claim
        released (a failure) or replaced by its result (a success).
        """
        for other in command.attempts:
            if other is attempt or other.sent > attempt.answered:
                continue
            if other.answered is None or other.answered > attempt.sent - 0.05:
                return
        if self.redis_troubled(attempt.sent - LEASE - SLACK, attempt.answered):
            return
        self.violate(
            "unexplained-in-progress",
            f"{command.t} {command.id}: in_progress, but no other attempt could hold its claim "
            "(every earlier attempt was answered and Redis was fine)",
            [(command.client, command.id)],
        )

    def check_counter(self, command: Command, attempt: Attempt, frame: dict) -> None:
        """Counters only grow: an ack that applied its command must be above every value
        seen before the command was sent, by at least its own amount."""
        d = frame["d"]
        if command.t == "reaction.add":
            key, value, step = ("reaction", d["room"], d["seq"]), d["count"], 1
        elif command.t == "wallet.add":
            key, value, step = ("wallet", d["wallet"]), d["balance"], command.d["amount"]
        else:
            return
        if not frame["dup"]:
            floor = self.counters.before(key, attempt.sent)
            if floor is not None and value < floor + step:
                self.violate(
                    "counter-backwards",
                    f"{command.t} {command.id}: applied at {value}, but {floor} was seen before it was sent",
                    [(command.client, command.id)],
                )
        self.counters.observe(key, self.now(), value)

    # -- what clients see -----------------------------------------------------------------

    def message(self, client: int, room: str, seq: int, id: str, sender: Any, body: str) -> None:
        self.counts["msg frames"] += 1
        copy = (id, sender, body)
        first = self.messages.setdefault((room, seq), copy)
        if first != copy:
            self.violate("views-differ", f"client {client} got {room}#{seq} as {copy}, another copy was {first}")

    def reaction_frame(self, room: str, seq: int, count: int) -> None:
        self.counts["reaction frames"] += 1
        self.counters.observe(("reaction", room, seq), self.now(), count)

    def watermarks_seen(
        self, room: str, user: Any, delivered: int, read: int, *, asked: float | None = None, who: str = ""
    ) -> None:
        """Watermarks observed: from a `status` frame (`asked` None: only a lower bound for later reads),
        or read by a command sent at `asked` (a join's members, a receipt's ack), which must see
        everything committed before it was sent."""
        if read > delivered:
            self.violate("watermarks", f"{who}: {room} user {user} read {read} > delivered {delivered}")
        for name, value in (("delivered", delivered), ("read", read)):
            key = (room, user, name)
            if asked is not None:
                floor = self.watermarks.before(key, asked)
                if floor is not None and value < floor:
                    self.violate(
                        "watermark-backwards",
                        f"{who}: {room} user {user} {name} {value}, but {floor} was seen before it was asked",
                    )
            self.watermarks.observe(key, self.now(), value)

    def handshake(self, client: int, outcome: str) -> None:
        self.handshakes[outcome] += 1
        if outcome.startswith("http"):
            self.violate("handshake-failed", f"client {client}: the server answered the handshake with {outcome}")

    def closed(self, client: int, code: int | None) -> None:
        self.closes[str(code)] += 1
        if code in (1003, 1008, 1009, 1011, 4401):
            self.violate("socket-closed", f"client {client}: the server closed its socket with {code}")

    # -- reporting ------------------------------------------------------------------------

    def slice(self, violation: Violation, around: float = 2.0) -> list[str]:
        """The shortest history that shows `violation`: its commands' attempts, and the
        faults from `around` seconds before the first of them to `around` after the last."""
        lines = list(violation.detail)
        times = [violation.at]
        for key in violation.keys:
            command = self.commands.get(key)
            if command is None:
                continue
            lines.append(
                f"command {command.t} {command.id} of client {command.client} d={json.dumps(command.d, sort_keys=True)}"
                f" created {command.created:.3f}"
            )
            for attempt in command.attempts:
                lines.append("  " + attempt.describe())
                times += [attempt.sent] + ([attempt.answered] if attempt.answered is not None else [])
        start, end = min(times) - around, max(times) + around
        faults = [f for f in self.faults if f.start <= end and (f.end if f.end is not None else self.now()) >= start]
        lines += ["faults around it:"] + ["  " + f.describe() for f in faults] if faults else ["no faults around it"]
        return lines
