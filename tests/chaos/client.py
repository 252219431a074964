"""The harness's client: an outbox persisted to a file, speaking the protocol as a careful client does.

Each user action (a post, a "+1", a wallet top-up) gets its id once and is
written to the client's file before its first send; it stays there until an
`ok` ack. The file's removals are written lazily (at most a second late), so
a client restarted from it may send again what was already acked, as a
client that crashed right after an ack would. After each (re)connect the
client joins its rooms with `since` (the highest seq it holds without a
gap), waits for the join acks, then resends its whole outbox with the same
ids. It resends after a `retry: true` refusal (after `retry_after` when
given), after an ack timeout, and moves to another server after a silence.
Receipts and joins are naturally idempotent and are not in the outbox.
Every send, answer and frame goes to the `History`.

Now and then a client also sends an acked command again (a probe: its ack
must be the first one), and some ids are small counters shared by all
clients (`s1`, `s2`, ...): the same id from two users is two commands.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import traceback
import uuid
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import websockets
from websockets.exceptions import ConnectionClosed, InvalidHandshake, InvalidStatus
from websockets.frames import Frame, Opcode

from .history import Attempt, History
from .hooks import WALLETS

REPLAY_LIMIT = 500  # the servers' REPLAY_LIMIT (the default)
ACK_TIMEOUT = 3.0
# Nothing heard for this long while something is unanswered: the server is gone, try another.
SILENCE = 2 * ACK_TIMEOUT
# How long a hole in a room's seqs may last before the client asks for it by `since`.
GAP_PATIENCE = 0.5
RECEIPT_EVERY = 2.0


@dataclass
class Plan:
    """How a client behaves; the mean pause between its actions and their mix."""

    pause: float = 1.0
    weights: dict[str, float] = field(
        default_factory=lambda: {
            "room.post": 0.40,
            "reaction.add": 0.20,
            "wallet.add": 0.25,
            "probe": 0.15,
        }
    )


class Socket:
    """One connection and what the client expects on it."""

    def __init__(self, number: int, ws: Any, server: int) -> None:
        self.number = number
        self.ws = ws
        self.server = server
        self.joined: set[str] = set()
        self.joining: dict[str, tuple[str, float, int]] = {}  # room -> (join id, sent, since)
        # Per room, the backlogs still to come, in the order their joins were answered.
        self.backlogs: dict[str, deque[deque[int]]] = {}
        # Per id, this socket's unanswered attempts, oldest first (answers come in send order).
        self.attempts: dict[str, deque[Attempt]] = {}
        self.receipts: dict[str, tuple[str, float, int, int]] = {}  # id -> (room, sent, delivered, read)
        self.join_retry_at: dict[str, float] = {}
        self.heard = 0.0

    @property
    def waiting(self) -> bool:
        return bool(self.joining or self.receipts or any(self.attempts.values()))


class Client:
    def __init__(
        self, index: int, path: Path, urls: list[str], history: History, rng: random.Random, plan: Plan, state: dict
    ) -> None:
        self.index = index
        self.path = path
        self.urls = urls
        self.history = history
        self.rng = rng
        self.plan = plan
        self.name: str = state["name"]
        self.session: str = state["session"]
        self.rooms: list[str] = state["rooms"]
        self.user: Any = state.get("user")
        self.counter: int = state.get("counter", 0)
        self.pending: dict[str, tuple[str, dict]] = {id: (t, d) for id, t, d in state.get("pending", [])}
        self.acked: deque[tuple[str, str, dict]] = deque((tuple(e) for e in state.get("acked", [])), maxlen=100)
        self.contiguous: dict[str, int] = {room: state.get("contiguous", {}).get(room, 0) for room in self.rooms}
        self.above: dict[str, set[int]] = {room: set() for room in self.rooms}
        self.known_last: dict[str, int] = dict(self.contiguous)
        self.gap_since: dict[str, float] = {}
        self.receipt_marks: dict[str, tuple[int, int]] = {room: (0, 0) for room in self.rooms}
        self.retry_at: dict[str, float] = {}
        self.socket: Socket | None = None
        self.ready = asyncio.Event()
        self.acting = False
        self.dirty = False
        self.saved = 0.0
        self.tasks: list[asyncio.Task] = []
        for id, (t, d) in self.pending.items():
            history.command(index, id, t, d)

    # -- the file -----------------------------------------------------------------------

    @classmethod
    def new(
        cls,
        index: int,
        path: Path,
        urls: list[str],
        history: History,
        rng: random.Random,
        plan: Plan,
        name: str,
        session: str,
        rooms: list[str],
    ) -> Client:
        client = cls(index, path, urls, history, rng, plan, {"name": name, "session": session, "rooms": rooms})
        client.save()
        return client

    @classmethod
    def restore(
        cls, index: int, path: Path, urls: list[str], history: History, rng: random.Random, plan: Plan
    ) -> Client:
        return cls(index, path, urls, history, rng, plan, json.loads(path.read_text()))

    def save(self) -> None:
        state = {
            "name": self.name,
            "session": self.session,
            "rooms": self.rooms,
            "user": self.user,
            "counter": self.counter,
            "pending": [[id, t, d] for id, (t, d) in self.pending.items()],
            "acked": [list(e) for e in self.acked],
            "contiguous": self.contiguous,
        }
        scratch = self.path.with_suffix(".tmp")
        scratch.write_text(json.dumps(state))
        os.replace(scratch, self.path)
        self.dirty = False
        self.saved = self.history.now()

    # -- life ---------------------------------------------------------------------------

    def start(self) -> Client:
        self.tasks = [
            asyncio.create_task(self.guarded(self.connect_forever)),
            asyncio.create_task(self.guarded(self.act)),
        ]
        return self

    async def guarded(self, part: Any) -> None:
        """Run a part of the client; its failure fails the run (its history would be incomplete)."""
        try:
            await part()
        except Exception as exc:
            self.failed(part.__name__, exc)

    def failed(self, where: str, exc: BaseException) -> None:
        self.history.violate(
            "harness-error", f"client {self.index}, {where}: {exc!r}", detail=traceback.format_exception(exc)[-6:]
        )

    async def kill(self) -> None:
        """Gone at once, as a crashed process: nothing more is written to the file."""
        for task in self.tasks:
            task.cancel()
        if self.socket is not None:
            self.socket.ws.transport.abort()
        await asyncio.gather(*self.tasks, return_exceptions=True)

    async def close(self) -> None:
        await self.kill()
        self.save()

    def cut(self, mid_frame: bool) -> bool:
        """Cut the socket; `mid_frame`: after writing half of a command's frame. Whether there was one."""
        socket = self.socket
        if socket is None:
            return False
        if mid_frame and self.ready.is_set():
            id = next(iter(self.pending), None) or self.new_command("room.post", self.post_data())
            t, d = self.pending[id]
            data = Frame(Opcode.TEXT, json.dumps({"id": id, "t": t, "d": d}).encode()).serialize(mask=True)
            self.history.sent(self.index, id, socket.number, "cut")
            socket.ws.transport.write(data[: len(data) // 2])
        socket.ws.transport.abort()
        return True

    # -- actions ------------------------------------------------------------------------

    def new_id(self) -> str:
        if self.rng.random() < 0.2:
            self.counter += 1
            return f"s{self.counter}"
        return uuid.UUID(int=self.rng.getrandbits(128)).hex

    def new_command(self, t: str, d: dict) -> str:
        id = self.new_id()
        self.pending[id] = (t, d)
        self.history.command(self.index, id, t, d)
        self.save()  # in the outbox before its first send
        return id

    def post_data(self) -> dict:
        room = self.rng.choice(self.rooms)
        words = self.rng.randint(1, 12)
        body = " ".join(self.rng.choice(("hello", "ünïcode", "😀", "a" * 40, "x", "<b>", "ok")) for _ in range(words))
        return {"room": room, "body": f"{self.name} {body}"}

    async def act(self) -> None:
        while True:
            await asyncio.sleep(self.rng.expovariate(1 / self.plan.pause))
            if not self.acting:
                continue
            kinds, weights = zip(*self.plan.weights.items())
            kind = self.rng.choices(kinds, weights)[0]
            if kind == "probe":
                await self.probe()
                continue
            if kind == "reaction.add":
                # Any seq up to the gapless prefix is a message of the room.
                room = self.rng.choice(self.rooms)
                if self.contiguous[room]:
                    d = {
                        "room": room,
                        "seq": self.rng.randint(max(1, self.contiguous[room] - 200), self.contiguous[room]),
                    }
                else:
                    kind = "room.post"
            if kind == "room.post":
                d = self.post_data()
            elif kind == "wallet.add":
                d = {"wallet": self.rng.choice(WALLETS), "amount": self.rng.randint(1, 5)}
            id = self.new_command(kind, d)
            if self.ready.is_set():
                await self.send(id, "send")

    async def probe(self) -> None:
        """Send an acked command again: its answer must be its first ack."""
        if not self.acked or not self.ready.is_set():
            return
        id, t, d = self.rng.choice(self.acked)
        self.history.command(self.index, id, t, d)
        await self.send(id, "probe", (t, d))

    # -- the connection -----------------------------------------------------------------

    async def connect_forever(self) -> None:
        server = self.rng.randrange(len(self.urls))
        failures = 0
        while True:
            url = self.urls[server]
            try:
                ws = await websockets.connect(
                    url.replace("http", "ws", 1) + "/ws/",
                    additional_headers={"Cookie": f"sessionid={self.session}", "Origin": url},
                    open_timeout=5,
                    close_timeout=1,
                    max_size=None,
                    ping_interval=None,
                )
            except InvalidStatus as exc:
                self.history.handshake(self.index, f"http {exc.response.status_code}")
                ws = None
            except (TimeoutError, OSError, InvalidHandshake, ConnectionClosed) as exc:
                kind = {ConnectionRefusedError: "refused", TimeoutError: "timeout"}.get(type(exc), "dropped")
                self.history.handshake(self.index, kind)
                ws = None
            if ws is None:
                failures += 1
                server = (server + 1) % len(self.urls)
                await asyncio.sleep(self.rng.uniform(0, min(2.0, 0.05 * 2**failures)))
                continue
            failures = 0
            self.history.handshake(self.index, "ok")
            self.history.counts["sockets"] += 1
            socket = self.socket = Socket(self.history.counts["sockets"], ws, server)
            try:
                await self.serve(socket)
            finally:
                self.ready.clear()
                self.socket = None
                ws.transport.abort()
            server = self.rng.randrange(len(self.urls))
            await asyncio.sleep(self.rng.uniform(0, 0.3))

    async def serve(self, socket: Socket) -> None:
        socket.heard = self.history.now()
        ticker = asyncio.create_task(self.tick(socket))
        try:
            for room in self.rooms:
                await self.join(socket, room)
            async for text in socket.ws:
                socket.heard = self.history.now()
                await self.receive(socket, json.loads(text))
        except ConnectionClosed as closed:
            self.history.closed(self.index, closed.rcvd.code if closed.rcvd else None)
        except OSError:
            self.history.closed(self.index, None)
        else:
            self.history.closed(self.index, socket.ws.close_code)
        finally:
            ticker.cancel()
            [ended] = await asyncio.gather(ticker, return_exceptions=True)
            if isinstance(ended, Exception):
                self.failed("tick", ended)

    async def frame(self, socket: Socket, frame: dict) -> None:
        try:
            await socket.ws.send(json.dumps(frame))
        except (ConnectionClosed, OSError):
            pass  # answered on the next socket, or never

    async def join(self, socket: Socket, room: str) -> None:
        since = self.contiguous[room]
        id = f"j-{uuid.UUID(int=self.rng.getrandbits(128)).hex}"
        socket.joining[room] = (id, self.history.now(), since)
        d: dict[str, Any] = {"room": room, "since": since}
        if since and self.rng.random() < 0.3:
            d["reactions_from"] = max(1, since - 20)
        self.history.counts["joins"] += 1
        await self.frame(socket, {"id": id, "t": "room.join", "d": d})

    async def send(self, id: str, kind: str, command: tuple[str, dict] | None = None) -> None:
        socket = self.socket
        t, d = command or self.pending.get(id, (None, None))
        if socket is None or t is None:
            return
        attempt = self.history.sent(self.index, id, socket.number, kind)
        socket.attempts.setdefault(id, deque()).append(attempt)
        self.retry_at.pop(id, None)
        await self.frame(socket, {"id": id, "t": t, "d": d})

    async def resend_outbox(self, socket: Socket) -> None:
        for id in list(self.pending):
            tried = self.history.commands[(self.index, id)].attempts
            await self.send(id, "resend" if tried else "send")

    async def tick(self, socket: Socket) -> None:
        """Resends, receipts, gap fills and the silence check of one socket."""
        last_receipts = 0.0
        while True:
            await asyncio.sleep(0.2)
            now = self.history.now()
            if self.dirty and now - self.saved > 1.0:
                self.save()
            if socket.waiting and now - socket.heard > SILENCE:
                self.history.counts["silences"] += 1
                socket.ws.transport.abort()
                return
            if not self.ready.is_set():
                for room in self.rooms:
                    if (
                        room not in socket.joined
                        and room not in socket.joining
                        and now >= socket.join_retry_at.get(room, 0)
                    ):
                        await self.join(socket, room)
                continue
            for id in list(self.pending):
                due = self.retry_at.get(id)
                waiting = socket.attempts.get(id)
                if (due is not None and now >= due) or (
                    due is None and waiting and now - waiting[-1].sent > ACK_TIMEOUT
                ):
                    await self.send(id, "resend")
            for room in self.rooms:
                if room in socket.joining or socket.backlogs.get(room):
                    continue
                if room not in socket.joined and now >= socket.join_retry_at.get(room, 0):
                    await self.join(socket, room)  # its first join on this socket was refused
                    continue
                if self.contiguous[room] >= self.known_last[room]:
                    self.gap_since.pop(room, None)
                elif now - self.gap_since.setdefault(room, now) > GAP_PATIENCE:
                    # A hole (a live frame lost, a backlog that stopped short): ask for it by `since`.
                    self.gap_since.pop(room)
                    await self.join(socket, room)
            if now - last_receipts > RECEIPT_EVERY:
                last_receipts = now
                await self.send_receipts(socket)

    async def send_receipts(self, socket: Socket) -> None:
        for room in self.rooms:
            delivered, read = self.receipt_marks[room]
            upto = self.contiguous[room]
            if upto <= delivered:
                continue
            new_read = self.rng.randint(read, upto)
            id = f"r-{uuid.UUID(int=self.rng.getrandbits(128)).hex}"
            socket.receipts[id] = (room, self.history.now(), upto, new_read)
            sent = self.history.receipts_sent[(self.index, room)]
            sent[0], sent[1] = max(sent[0], upto, new_read), max(sent[1], new_read)
            self.history.counts["receipts"] += 1
            await self.frame(
                socket, {"id": id, "t": "receipt", "d": {"room": room, "delivered": upto, "read": new_read}}
            )

    # -- what comes back ----------------------------------------------------------------

    async def receive(self, socket: Socket, frame: dict) -> None:
        t = frame.get("t")
        if t == "msg":
            self.got_message(socket, frame["d"])
        elif t == "ack":
            await self.got_ack(socket, frame)
        elif t == "status":
            d = frame["d"]
            self.history.counts["status frames"] += 1
            self.history.watermarks_seen(
                d["room"], d["user"], d["delivered"], d["read"], who=f"client {self.index} status"
            )
        elif t == "reaction":
            d = frame["d"]
            self.history.reaction_frame(d["room"], d["seq"], d["count"])
        elif t == "error":
            self.history.violate("bad-frame", f"client {self.index} got {frame}")

    def got_message(self, socket: Socket, d: dict) -> None:
        room, seq = d["room"], d["seq"]
        self.history.message(self.index, room, seq, d["id"], d["sender"]["id"], d["body"])
        backlogs = socket.backlogs.get(room)
        if backlogs:
            expected = backlogs[0]
            want = expected.popleft()
            if not expected:
                backlogs.popleft()
            if seq != want:
                self.history.violate(
                    "backlog-order", f"client {self.index} {room}: backlog gave seq {seq}, expected {want}"
                )
        self.learned(room, seq)

    def learned(self, room: str, seq: int) -> None:
        """A message of the room is known: advance the gapless prefix."""
        self.known_last[room] = max(self.known_last[room], seq)
        if seq <= self.contiguous[room]:
            return
        self.above[room].add(seq)
        while self.contiguous[room] + 1 in self.above[room]:
            self.contiguous[room] += 1
            self.above[room].discard(self.contiguous[room])
        self.dirty = True

    async def got_ack(self, socket: Socket, frame: dict) -> None:
        id = frame["id"]
        if id.startswith("j-"):
            await self.got_join(socket, frame)
            return
        if id.startswith("r-"):
            self.got_receipt(socket, frame)
            return
        waiting = socket.attempts.get(id)
        if not waiting:
            self.history.violate(
                "unasked-ack", f"client {self.index} got an ack for {id} it did not send on this socket"
            )
            return
        attempt = waiting.popleft()
        self.history.answered(attempt, frame)
        command = self.history.commands[(self.index, id)]
        if frame["ok"]:
            if command.t == "room.post":
                d = frame["d"]
                self.history.message(self.index, d["room"], d["seq"], id, self.user, command.d["body"])
                self.learned(d["room"], d["seq"])
            if id in self.pending:
                del self.pending[id]
                self.acked.append((id, command.t, command.d))
                self.dirty = True
        elif frame["error"]["retry"]:
            if id in self.pending:
                pause = frame["error"].get("retry_after") or self.rng.uniform(0.1, 0.4)
                self.retry_at[id] = self.history.now() + pause
        elif id in self.pending:
            del self.pending[id]
            self.dirty = True

    async def got_join(self, socket: Socket, frame: dict) -> None:
        room = next((r for r, (id, _, _) in socket.joining.items() if id == frame["id"]), None)
        if room is None:
            return
        _, asked, since = socket.joining.pop(room)
        if not frame["ok"]:
            socket.join_retry_at[room] = self.history.now() + self.rng.uniform(0.1, 0.4)
            return
        d = frame["d"]
        for member in d["members"]:
            if member["name"] == self.name and self.user is None:
                self.user = member["user"]
                self.history.users[self.index] = self.user
                self.dirty = True
            self.history.watermarks_seen(
                room, member["user"], member["delivered"], member["read"], asked=asked, who=f"client {self.index} join"
            )
        last = d["last_seq"]
        self.known_last[room] = max(self.known_last[room], last)
        if last > since:
            socket.backlogs.setdefault(room, deque()).append(
                deque(range(since + 1, min(last, since + REPLAY_LIMIT) + 1))
            )
        first = room not in socket.joined
        socket.joined.add(room)
        if first and socket.joined == set(self.rooms):
            self.ready.set()
            await self.resend_outbox(socket)

    def got_receipt(self, socket: Socket, frame: dict) -> None:
        found = socket.receipts.pop(frame["id"], None)
        if found is None or not frame["ok"]:
            return
        room, asked, delivered, read = found
        d = frame["d"]
        if d["delivered"] < delivered or d["read"] < read:
            self.history.violate("receipt-ack", f"client {self.index} {room}: sent {delivered}/{read}, acked {d}")
        acked = self.history.receipts_acked[(self.index, room)]
        acked[0], acked[1] = max(acked[0], d["delivered"]), max(acked[1], d["read"])
        self.receipt_marks[room] = (d["delivered"], d["read"])
        self.history.watermarks_seen(
            room, self.user, d["delivered"], d["read"], asked=asked, who=f"client {self.index} receipt"
        )
