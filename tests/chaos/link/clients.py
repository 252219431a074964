"""Outbox clients of the link run: one socket each to its own deployment, one command in flight, retried until `ok`.

Every command is minted once (its id) and sent again with the same id after
an `unavailable` (the link away), an `in_progress` or a silence, until an
`ok` ack or a refusal that says not to retry. Every attempt and answer is
recorded in the run's `History`, with the frames each socket receives.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Any

from messaging.ids import time_ordered_id
from messaging.testing import SocketClient

# Seconds a client waits for an ack before it sends the command again.
ACK_WAIT = 8.0
# An own room's command acked later than this is a violation: the link's faults must not reach it.
OWN_ROOM_PATIENCE = 10.0


@dataclass
class Sent:
    """One command as its client minted it, and what became of it."""

    client: int
    id: str
    t: str
    d: dict
    attempts: int = 0
    acks: list[dict] = field(default_factory=list)
    ok: dict | None = None
    refused: dict | None = None
    started: float = 0.0
    finished: float = 0.0


@dataclass
class History:
    commands: dict[tuple[int, str], Sent] = field(default_factory=dict)
    counts: Counter[str] = field(default_factory=Counter)
    violations: list[str] = field(default_factory=list)
    faults: list[str] = field(default_factory=list)
    # (client, room) -> seq -> (id, body, version) as its socket last saw it.
    views: dict[tuple[int, str], dict[int, tuple[Any, ...]]] = field(default_factory=lambda: defaultdict(dict))
    # Ack seconds per kind of room: "own", "home" (a local shared room), "remote".
    latencies: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))

    def violate(self, message: str) -> None:
        self.violations.append(message)


class LinkClient:
    def __init__(
        self, index: int, node: str, url: str, session: str, rooms: list[str], rng: random.Random, history: History
    ) -> None:
        self.index = index
        self.node = node
        self.url = url
        self.session = session
        self.rooms = rooms
        self.rng = rng
        self.history = history
        self.ws: SocketClient | None = None
        self.mine: dict[str, list[int]] = defaultdict(list)  # room -> seqs of this client's live messages
        self.pending: Sent | None = None
        self.acting = True
        self.task: asyncio.Task | None = None
        self.reader: asyncio.Task | None = None
        self.waiting: dict[str, asyncio.Future] = {}

    def kind(self, room: str) -> str:
        if "@" in room:
            return "remote"
        return "home" if room in ("hall", "yard") else "own"

    async def connect(self) -> None:
        while True:
            try:
                self.ws = await SocketClient(self.url, self.session).connect()
                self.reader = asyncio.create_task(self.read())
                for room in self.rooms:
                    await self.until_ok("room.join", {"room": room, "since": 0}, record=False)
                return
            except (OSError, TimeoutError, EOFError, ConnectionError):
                await asyncio.sleep(0.5)

    async def read(self) -> None:
        assert self.ws is not None
        try:
            while True:
                frame = await self.ws.receive(timeout=3600)
                t, d = frame.get("t"), frame.get("d") or {}
                if t == "ack":
                    future = self.waiting.pop(frame["id"], None)
                    if future is not None and not future.done():
                        future.set_result(frame)
                elif t == "msg":
                    self.history.views[(self.index, d["room"])][d["seq"]] = (d["id"], d["body"], d["version"])
                    self.history.counts["msg frames"] += 1
                elif t in ("msg.edit", "msg.delete"):
                    view = self.history.views[(self.index, d["room"])]
                    known = view.get(d["seq"])
                    if known is not None and d["version"] > known[2]:
                        view[d["seq"]] = (known[0], d.get("body", ""), d["version"])
                    self.history.counts[f"{t} frames"] += 1
        except Exception:
            return

    async def send(self, t: str, d: dict, id: str) -> dict | None:
        assert self.ws is not None
        future: asyncio.Future = asyncio.get_running_loop().create_future()
        self.waiting[id] = future
        try:
            await self.ws.send(t, d, id=id)
            return await asyncio.wait_for(future, ACK_WAIT)
        except (TimeoutError, OSError, EOFError, ConnectionError):
            return None
        except Exception:
            return None
        finally:
            self.waiting.pop(id, None)

    async def until_ok(self, t: str, d: dict, *, record: bool = True) -> Sent:
        sent = Sent(self.index, time_ordered_id(), t, d, started=time.monotonic())
        if record:
            self.history.commands[(self.index, sent.id)] = sent
            self.history.counts[f"command {t}"] += 1
        self.pending = sent
        pause = 0.2
        while True:
            sent.attempts += 1
            self.history.counts["attempts"] += 1
            ack = await self.send(t, d, sent.id)
            if ack is None:
                self.history.counts["answer none"] += 1
                if self.ws is None or self.reader is None or self.reader.done():
                    await self.reconnect()
            else:
                sent.acks.append(ack)
                if ack["ok"]:
                    self.history.counts["answer dup" if ack.get("dup") else "answer ok"] += 1
                    if sent.ok is None:
                        sent.ok = ack
                    elif ack["d"] != sent.ok["d"]:
                        self.history.violate(f"{t} {sent.id}: acked {sent.ok['d']} and then {ack['d']}")
                    break
                code = ack["error"]["code"]
                self.history.counts[f"answer {code}"] += 1
                if not ack["error"].get("retry"):
                    sent.refused = ack
                    break
            await asyncio.sleep(pause * self.rng.random())
            pause = min(pause * 2, 3.0)
        sent.finished = time.monotonic()
        self.pending = None
        room = d.get("room", "")
        if record and sent.ok is not None:
            self.history.latencies[self.kind(room)].append(sent.finished - sent.started)
            if self.kind(room) == "own" and sent.finished - sent.started > OWN_ROOM_PATIENCE:
                self.history.violate(f"{t} on own room {room} took {sent.finished - sent.started:.1f} s")
        if record and sent.refused is not None:
            self.history.violate(f"{t} {sent.id} on {room} was refused: {sent.refused['error']}")
        return sent

    async def reconnect(self) -> None:
        if self.reader is not None:
            self.reader.cancel()
        if self.ws is not None:
            try:
                await self.ws.close()
            except Exception:
                pass
        self.history.counts["reconnects"] += 1
        await self.connect()

    async def act(self) -> None:
        await self.connect()
        while self.acting:
            await self.step()
            await asyncio.sleep(self.rng.expovariate(1 / 0.4))

    async def step(self) -> None:
        room = self.rng.choice(self.rooms)
        roll = self.rng.random()
        mine = self.mine[room]
        if roll < 0.12 and mine:
            seq = self.rng.choice(mine)
            body = f"edit {self.index} {self.rng.randrange(10**6)}"
            await self.until_ok("message.edit", {"room": room, "seq": seq, "body": body})
        elif roll < 0.16 and mine:
            seq = mine.pop(self.rng.randrange(len(mine)))
            await self.until_ok("message.delete", {"room": room, "seq": seq})
        elif roll < 0.24 and "@" in room:
            # A remote room's history is the replica's: served whatever the link does.
            sent = await self.until_ok("room.history", {"room": room, "before": 10**9, "limit": 20}, record=False)
            self.history.counts["history " + ("ok" if sent.ok else "failed")] += 1
            if sent.ok is None or sent.attempts > 1:
                self.history.violate(f"room.history of {room} was not answered at once: {sent.acks}")
        else:
            body = f"post {self.index} {self.rng.randrange(10**6)}"
            sent = await self.until_ok("room.post", {"room": room, "body": body})
            if sent.ok is not None:
                mine.append(sent.ok["d"]["seq"])

    async def close(self) -> None:
        if self.reader is not None:
            self.reader.cancel()
        if self.ws is not None:
            try:
                await self.ws.close()
            except Exception:
                pass
