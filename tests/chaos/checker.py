"""The properties of a run, over its history and the database.

While the run goes on, `Observer` reads the database every `interval`:
every command acked `ok` since its last look must have its durable record,
with the ack's `d` as its result (the ack is sent after the commit); no
message's state and no member's watermark may be lower than it was at an
earlier look. At the end, `check` proves the rest over the final database
(`truth`), once the nemesis has healed everything and the clients' retries
are done:

* every command acked `ok` was applied exactly once: its record holds the
  ack's `d`; a post's message is stored once under the acked seq; each
  message's reaction count is the number of applied `reaction.add`s for it
  and their acks counted 1, 2, ... N; each wallet's balance is the sum of the
  applied `wallet.add`s and their acks form one chain of balances, each the
  one before plus its amount;
* no effect nobody asked for: every record and message belongs to a command
  a client sent, with that type;
* every command a client still held was, once its retries finished, acked
  `ok` (and so applied once); nothing was refused;
* each room's seqs are 1..last_seq without a gap; every copy of a message a
  client got equals the stored one, and every client ends with the whole
  room (its gapless prefix reaches the last seq);
* watermarks: the final ones lie between the highest value acked and the
  highest sent, `read <= delivered`; each message's state is what its
  recipients' final watermarks make it.

The history's own checks (acks that differ, unexplained `in_progress`,
values seen going backwards, failed handshakes, closes) are `history`'s.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from typing import Any

import psycopg

from .client import Client
from .history import History
from .stack import connect_params
from .truth import PROGRESS_STATES, PROGRESS_WATERMARKS, RECORDS_OF, STATES, Truth

EXACTLY_ONCE = ("room.post", "reaction.add", "wallet.add")


class Observer:
    """The database, looked at while the run goes on."""

    def __init__(self, history: History, database_url: str, interval: float = 2.0) -> None:
        self.history = history
        self.database_url = database_url
        self.interval = interval
        self.checked: set[tuple[int, str]] = set()
        self.states: dict[tuple[int, int], int] = {}
        self.watermarks: dict[tuple[int, Any], tuple[int, int]] = {}
        self.looks = 0

    async def run(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            try:
                await self.look()
            except psycopg.OperationalError:
                pass  # its session terminated by the nemesis: look again next time
            try:
                await asyncio.wait_for(stop.wait(), self.interval)
            except TimeoutError:
                pass

    async def look(self) -> None:
        acked = [
            key
            for key, c in self.history.commands.items()
            if c.acked and key not in self.checked and key[0] in self.history.users
        ]
        async with await psycopg.AsyncConnection.connect(**connect_params(self.database_url), autocommit=True) as db:
            states = await (await db.execute(PROGRESS_STATES)).fetchall()
            watermarks = await (await db.execute(PROGRESS_WATERMARKS)).fetchall()
            users = [str(self.history.users[client]) for client, _ in acked]
            found = await (await db.execute(RECORDS_OF, {"users": users, "ids": [id for _, id in acked]})).fetchall()
        self.looks += 1
        self.check_records(acked, {(user, id): result for user, id, result in found})
        self.check_progress(states, watermarks)

    def check_records(self, acked: list[tuple[int, str]], found: dict[tuple[str, str], dict]) -> None:
        for key in acked:
            self.checked.add(key)
            command = self.history.commands[key]
            result = found.get((str(self.history.users[key[0]]), key[1]))
            if result is None:
                self.history.violate(
                    "acked-not-applied", f"{command.t} {command.id} was acked ok, and has no record", [key]
                )
            elif result != command.first_ok["d"]:
                self.history.violate(
                    "ack-differs-from-record",
                    f"{command.t} {command.id}: acked {command.first_ok['d']}, recorded {result}",
                    [key],
                )

    def check_progress(self, states: list[tuple], watermarks: list[tuple]) -> None:
        now = {(room, seq): STATES.index(state) for room, seq, state in states}
        for key, rank in self.states.items():
            if now.get(key, 0) < rank:
                self.history.violate(
                    "state-backwards", f"message {key} went from {STATES[rank]} to {STATES[now.get(key, 0)]}"
                )
        self.states = {key: max(rank, self.states.get(key, 0)) for key, rank in now.items()} | {
            key: rank for key, rank in self.states.items() if key not in now
        }
        for room, user, delivered, read in watermarks:
            before = self.watermarks.get((room, user), (0, 0))
            if delivered < before[0] or read < before[1]:
                self.history.violate(
                    "watermark-backwards",
                    f"room {room} user {user}: watermarks went from {before} to {(delivered, read)}",
                )
            self.watermarks[(room, user)] = (max(delivered, before[0]), max(read, before[1]))


def check(history: History, truth: Truth, clients: list[Client]) -> None:
    """The final properties; each failure is a violation in the history."""
    users = {client: str(user) for client, user in history.users.items()}
    sent = {(users[c], id): command for (c, id), command in history.commands.items() if c in users}
    check_outboxes(history, clients)
    check_records(history, truth, sent)
    check_rooms(history, truth, clients)
    check_reactions(history, truth, sent)
    check_wallets(history, truth, sent)
    check_watermarks(history, truth, users)


def check_outboxes(history: History, clients: list[Client]) -> None:
    for client in clients:
        for id in client.pending:
            command = history.commands[(client.index, id)]
            history.violate(
                "never-acked",
                f"{command.t} {command.id} was still unacked when the retries stopped",
                [(client.index, id)],
            )


def check_records(history: History, truth: Truth, sent: dict) -> None:
    for (user, id), (t, _result) in truth.records.items():
        command = sent.get((user, id))
        if command is None or command.t != t:
            history.violate("unasked-effect", f"a {t} record {id} of user {user} that no client sent as such")
    for (user, id), command in sent.items():
        if command.t not in EXACTLY_ONCE:
            continue
        record = truth.records.get((user, id))
        key = (command.client, command.id)
        if command.acked and record is None:
            history.violate("acked-not-applied", f"{command.t} {command.id} was acked ok, and has no record", [key])
        elif command.acked and record[1] != command.first_ok["d"]:
            history.violate(
                "ack-differs-from-record",
                f"{command.t} {command.id}: acked {command.first_ok['d']}, recorded {record[1]}",
                [key],
            )
    for message in truth.messages:
        record = truth.records.get((str(message.sender), message.id))
        expected = {"room": message.room, "seq": message.seq, "at": message.at}
        if record is None or record != ("room.post", expected):
            history.violate("post-without-its-record", f"{message.room}#{message.seq} ({message.id}): record {record}")
    posts = {(str(m.sender), m.id) for m in truth.messages}
    for (user, id), (t, _) in truth.records.items():
        if t == "room.post" and (user, id) not in posts:
            history.violate("record-without-its-post", f"room.post record {id} of user {user} has no message")


def check_rooms(history: History, truth: Truth, clients: list[Client]) -> None:
    seqs: dict[str, list[int]] = defaultdict(list)
    for message in truth.messages:
        seqs[message.room].append(message.seq)
        copy = history.messages.get((message.room, message.seq))
        stored = (message.id, str(message.sender), message.body)
        if copy is not None and (copy[0], str(copy[1]), copy[2]) != stored:
            history.violate("views-differ", f"{message.room}#{message.seq} was seen as {copy}, stored as {stored}")
    for room, last_seq in truth.rooms.items():
        if sorted(seqs[room]) != list(range(1, last_seq + 1)):
            missing = sorted(set(range(1, last_seq + 1)) - set(seqs[room]))[:10]
            history.violate(
                "seq-gap", f"room {room}: last_seq {last_seq}, {len(seqs[room])} messages, missing {missing}"
            )
    seen = {key for key in history.messages}
    stored = {(m.room, m.seq) for m in truth.messages}
    for key in sorted(seen - stored)[:10]:
        history.violate("views-differ", f"a client got {key[0]}#{key[1]}, which is not stored")
    for client in clients:
        for room in client.rooms:
            if client.contiguous[room] != truth.rooms.get(room, 0):
                history.violate(
                    "view-incomplete",
                    f"client {client.index} holds {room} up to "
                    f"{client.contiguous[room]} without a gap, the room's last seq is {truth.rooms.get(room)}",
                )


def applied(truth: Truth, sent: dict, t: str) -> list[tuple[Any, dict]]:
    """The applied commands of type `t`: (command, recorded result), from the records."""
    return [(sent.get(key), result) for key, (type_, result) in truth.records.items() if type_ == t]


def check_reactions(history: History, truth: Truth, sent: dict) -> None:
    counts: dict[tuple[str, int], list[int]] = defaultdict(list)
    for _, result in applied(truth, sent, "reaction.add"):
        counts[(result["room"], result["seq"])].append(result["count"])
    for key in set(counts) | set(truth.reactions):
        got = sorted(counts.get(key, []))
        total = truth.reactions.get(key, 0)
        if got != list(range(1, total + 1)):
            history.violate(
                "reaction-count",
                f"{key[0]}#{key[1]}: count {total}, the applied reactions' acks "
                f"counted {got[:20]}{'...' if len(got) > 20 else ''}",
            )


def check_wallets(history: History, truth: Truth, sent: dict) -> None:
    chains: dict[str, list[tuple[int, Any]]] = defaultdict(list)
    for command, result in applied(truth, sent, "wallet.add"):
        chains[result["wallet"]].append((result["balance"], command))
    for wallet, balance in truth.wallets.items():
        chain = sorted(chains.get(wallet, []), key=lambda link: link[0])
        before = 0
        for after, command in chain:
            amount = command.d["amount"] if command is not None else None
            if amount is None or after != before + amount:
                history.violate(
                    "wallet-chain",
                    f"wallet {wallet}: {after} follows {before}, but the command added {amount}",
                    [(command.client, command.id)] if command is not None else [],
                )
                break
            before = after
        if before != balance:
            history.violate(
                "wallet-balance", f"wallet {wallet}: balance {balance}, its applied commands add up to {before}"
            )


def check_watermarks(history: History, truth: Truth, users: dict[int, str]) -> None:
    for (client, room), (sent_delivered, sent_read) in history.receipts_sent.items():
        user = users.get(client)
        membership = truth.memberships.get((room, user))
        if membership is None:
            history.violate("watermarks", f"client {client} sent receipts for {room}, but is no member")
            continue
        _, delivered, read = membership
        acked_delivered, acked_read = history.receipts_acked[(client, room)]
        if not (
            acked_delivered <= delivered <= sent_delivered and acked_read <= read <= sent_read and read <= delivered
        ):
            history.violate(
                "watermarks",
                f"client {client} {room}: final {delivered}/{read}, acked up to "
                f"{acked_delivered}/{acked_read}, sent up to {sent_delivered}/{sent_read}",
            )
    members: dict[str, list[tuple[str, int, int, int]]] = defaultdict(list)
    for (room, user), (joined, delivered, read) in truth.memberships.items():
        members[room].append((user, joined, delivered, read))
    for message in truth.messages:
        recipients = [m for m in members[message.room] if m[0] != str(message.sender) and m[1] < message.seq]
        if recipients and all(m[3] >= message.seq for m in recipients):
            expected = "read"
        elif recipients and all(m[2] >= message.seq for m in recipients):
            expected = "delivered"
        else:
            expected = "sent"
        if message.state != expected:
            history.violate(
                "state",
                f"{message.room}#{message.seq} is {message.state}; its recipients' watermarks make it {expected}",
            )
        if message.state == "read" and (
            message.read_at is None or message.delivered_at is None or message.delivered_at > message.read_at
        ):
            history.violate(
                "state", f"{message.room}#{message.seq} is read with times {message.delivered_at}, {message.read_at}"
            )
