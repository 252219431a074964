"""A client driver that behaves like the browser's outbox, and the checks run after a fault.

The outbox keeps every command until it gets an `ok` ack (or a refusal with
`retry: false`), resends it with the same id after reconnecting, after a
`retry: true` refusal (waiting `retry_after` when given) and after an ack
timeout, and reconnects with full-jitter backoff, to a server chosen at random
and to the next one when that fails: "possibly to the other process".
"""

from __future__ import annotations

import asyncio
import json
import random
import time
import uuid
from collections import Counter, defaultdict

import websockets
from websockets.exceptions import ConnectionClosed, InvalidHandshake, InvalidURI

from messaging.core.protocol import format_time
from messaging.models import CommandRecord, Message, Room

CONNECTION_ERRORS = (OSError, ConnectionClosed, InvalidHandshake, InvalidURI, asyncio.TimeoutError)


class Outbox:
    def __init__(self, session: str, urls: list[str], room: str, *, first: int = 0, ack_timeout: float = 4.0) -> None:
        self.session = session
        self.urls = urls
        self.room = room
        self.server = first
        self.ack_timeout = ack_timeout
        self.pending: dict[str, str] = {}  # id -> frame, until ok or retry: false
        self.submitted: list[str] = []
        self.acks: dict[str, list[dict]] = defaultdict(list)  # every ok ack, by id
        self.refused: dict[str, dict] = {}  # retry: false
        self.retryable: Counter[str] = Counter()  # codes of retry: true refusals
        self.errors: list[dict] = []  # bad_frame: never expected
        self.connects = 0
        self.closes: Counter[int | None] = Counter()  # close codes the server sent (None: none)
        self.joined = asyncio.Event()
        self.ws = None
        self._sent_at: dict[str, float] = {}
        self._retry_at: dict[str, float] = {}
        self._task: asyncio.Task | None = None
        self._closing = False

    # -- the user's side --------------------------------------------------------

    async def start(self) -> Outbox:
        self._task = asyncio.create_task(self._run())
        await asyncio.wait_for(self.joined.wait(), 60)
        return self

    async def post(self, body: str) -> str:
        id = uuid.uuid4().hex
        self.pending[id] = json.dumps({"id": id, "t": "room.post", "d": {"room": self.room, "body": body}})
        self.submitted.append(id)
        ws = self.ws
        if ws is not None:
            try:
                await self._send(ws, id)
            except CONNECTION_ERRORS:
                pass  # resent after the reconnect
        return id

    async def post_many(self, count: int, label: str = "m") -> list[str]:
        return [await self.post(f"{label}{n}") for n in range(count)]

    def drop(self) -> None:
        """The network drops the socket: no close handshake, unread acks are lost."""
        ws = self.ws
        if ws is not None:
            ws.transport.abort()

    async def settled(self, timeout: float) -> bool:
        """Wait (bounded) until nothing is pending."""
        deadline = time.monotonic() + timeout
        while self.pending and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        return not self.pending

    async def close(self) -> None:
        self._closing = True
        if self.ws is not None:
            await self.ws.close()
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)

    # -- the connection -----------------------------------------------------------

    async def _run(self) -> None:
        failures = 0
        while not self._closing:
            base = self.urls[self.server % len(self.urls)]
            url = base.replace("http", "ws", 1) + "/ws/"
            try:
                # The page's origin is the server's own: behind a load balancer every
                # process has the same one, here each its port (checked with the port).
                ws = await websockets.connect(
                    url,
                    additional_headers={"Cookie": f"sessionid={self.session}", "Origin": base},
                    open_timeout=10,
                    max_size=None,
                    ping_interval=None,
                )
            except CONNECTION_ERRORS:
                failures += 1
                self.server += 1  # that one is down: try the other
                await asyncio.sleep(random.uniform(0, min(2.0, 0.1 * 2**failures)))
                continue
            self.ws = ws
            self.connects += 1
            failures = 0
            try:
                await ws.send(
                    json.dumps({"id": f"join-{uuid.uuid4().hex}", "t": "room.join", "d": {"room": self.room}})
                )
                for id in list(self.pending):
                    await self._send(ws, id)
                await self._read(ws)
            except ConnectionClosed as closed:
                self.closes[closed.rcvd.code if closed.rcvd else None] += 1
            except CONNECTION_ERRORS:
                pass
            finally:
                self.ws = None
                ws.transport.abort()
            self.server = random.randrange(len(self.urls))
            await asyncio.sleep(random.uniform(0, 0.3))

    async def _send(self, ws, id: str) -> None:
        frame = self.pending.get(id)
        if frame is not None:
            self._sent_at[id] = time.monotonic()
            self._retry_at.pop(id, None)
            await ws.send(frame)

    async def _read(self, ws) -> None:
        heard = time.monotonic()
        while True:
            try:
                # Idle sockets wake rarely: the storm runs 500 of these in one process.
                frame = json.loads(await asyncio.wait_for(ws.recv(), 0.25 if self.pending else 1.0))
                heard = time.monotonic()
                self._receive(frame)
            except TimeoutError:
                pass
            now = time.monotonic()
            for id in list(self.pending):
                due = self._retry_at.get(id)
                if (due is not None and now >= due) or (
                    due is None and now - self._sent_at.get(id, now) > self.ack_timeout
                ):
                    await self._send(ws, id)
            if self.pending and now - heard > 3 * self.ack_timeout:
                return  # a server that answers nothing is as good as gone: reconnect elsewhere

    def _receive(self, frame: dict) -> None:
        if frame.get("t") == "error":
            self.errors.append(frame)
            return
        if frame.get("t") != "ack":
            return
        id = frame["id"]
        if id.startswith("join-"):
            if frame["ok"]:
                self.joined.set()
            return
        if frame["ok"]:
            self.acks[id].append(frame)
            self.pending.pop(id, None)
        elif frame["error"]["retry"]:
            self.retryable[frame["error"]["code"]] += 1
            self._retry_at[id] = time.monotonic() + frame["error"].get("retry_after", 0.2)
        else:
            self.refused[id] = frame
            self.pending.pop(id, None)


async def settle(outboxes: list[Outbox], timeout: float = 90) -> None:
    await asyncio.gather(*(o.settled(timeout) for o in outboxes))


def verify(outboxes: list[Outbox]) -> dict:
    """The invariants, checked against the database. Returns a few counts for the report.

    * nothing lost: every command was eventually acked `ok`;
    * every acked id is stored exactly once, under the seq its acks carry;
    * all acks for one id carry the same `d`, at most one of them `dup: false`;
    * seqs are gapless per room, and nothing was stored that nobody sent.
    """
    lost = {id for o in outboxes for id in o.pending}
    assert not lost, f"{len(lost)} commands never acked"
    assert not [o.refused for o in outboxes if o.refused], "refused commands"
    assert not [o.errors for o in outboxes if o.errors], "bad_frame errors"
    closes = sum((o.closes for o in outboxes), Counter())
    assert not closes.get(1011), f"a consumer died: {closes}"

    stored = list(Message.objects.values_list("room__slug", "seq", "client_msg_id", "sent_at"))
    by_id = Counter(id for _, _, id, _ in stored)
    assert not [id for id, n in by_id.items() if n > 1], "an id stored twice"
    rows = {id: {"room": room, "seq": seq, "at": format_time(at)} for room, seq, id, at in stored}
    submitted = {id for o in outboxes for id in o.submitted}
    assert set(rows) == submitted, "stored messages differ from the commands sent"
    assert CommandRecord.objects.filter(command_id__in=submitted).count() == len(submitted)

    dups = 0
    for o in outboxes:
        for id in o.submitted:
            acks = o.acks[id]
            assert acks, f"{id} never acked"
            assert all(a["d"] == rows[id] for a in acks), f"acks of {id} disagree: {acks} vs {rows[id]}"
            assert sum(not a["dup"] for a in acks) <= 1, f"{id} applied twice: {acks}"
            dups += sum(a["dup"] for a in acks)

    seqs: dict[str, list[int]] = defaultdict(list)
    for room, seq, _, _ in stored:
        seqs[room].append(seq)
    for room, found in seqs.items():
        assert sorted(found) == list(range(1, len(found) + 1)), f"gap in {room}"
    assert dict(Room.objects.filter(slug__in=seqs).values_list("slug", "last_seq")) == {
        r: len(s) for r, s in seqs.items()
    }
    retryable = sum((o.retryable for o in outboxes), Counter())
    return {
        "commands": len(submitted),
        "dup_acks": dups,
        "retryable": dict(retryable),
        "connects": sum(o.connects for o in outboxes),
        "closes": dict(closes),
    }
