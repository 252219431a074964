"""The link run's properties, over its history and both deployments' databases (read by SQL).

- Exactly once at the home: every command acked `ok` has its record there
  (the acked result), a post its one message under the acked seq; no
  message no client sent. A loss is an acked command without its effect; a
  double, an effect twice (a post stored twice, an edit or delete that moved
  a version twice).
- The replica is the home: the same messages (seq, id, sender, body,
  version, rev), the same `last_seq` and `last_rev`, seqs without a gap.
- Every client's socket saw every message of its rooms, in its final state.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass
from typing import Any

from ...support.databases import connect
from .clients import History

MESSAGES = """
SELECT r.slug, m.seq, m.client_msg_id, u.username, m.body, m.version, m.rev
FROM messaging_message m JOIN messaging_room r ON r.id = m.room_id JOIN auth_user u ON u.id = m.sender_id
"""
ROOMS = "SELECT slug, last_seq, last_rev FROM messaging_room"
RECORDS = """
SELECT u.username, c.command_id, c.type, c.result FROM messaging_commandrecord c JOIN auth_user u ON u.id = c.user_id
"""
USERS = "SELECT id, username, first_name FROM auth_user"


@dataclass
class Side:
    node: str
    messages: dict[str, dict[int, tuple[Any, ...]]]  # slug -> seq -> (id, sender, body, version, rev)
    rooms: dict[str, tuple[int, int]]
    records: dict[tuple[str, str], tuple[str, dict]]
    users: dict[str, tuple[int, str]]  # first name -> (id, username)


def read(node: str, url: str) -> Side:
    with connect(url) as db, db.transaction():
        db.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
        messages: dict[str, dict[int, tuple[Any, ...]]] = defaultdict(dict)
        for slug, seq, id, sender, body, version, rev in db.execute(MESSAGES):
            messages[slug][seq] = (id, sender, body, version, rev)
        rooms = {slug: (last_seq, last_rev) for slug, last_seq, last_rev in db.execute(ROOMS)}
        records = {(user, id): (t, result) for user, id, t, result in db.execute(RECORDS)}
        users = {name: (id, username) for id, username, name in db.execute(USERS)}
    return Side(node, dict(messages), rooms, records, users)


def home_of(room: str, client_node: str) -> tuple[str, str]:
    """(home node, slug there) of a room as a client of `client_node` names it."""
    slug, _, node = room.partition("@")
    return (node or client_node), slug


class Checker:
    def __init__(self, history: History, sides: dict[str, Side], clients: dict[int, tuple[str, str]]) -> None:
        """`clients`: per client index, its node and display name."""
        self.history = history
        self.sides = sides
        self.clients = clients
        self.doubles = 0
        self.losses = 0

    def account(self, client: int, home: str) -> str | None:
        """The username of `client`'s account at `home`."""
        node, name = self.clients[client]
        found = self.sides[node].users.get(name)
        if found is None:
            return None
        return found[1] if node == home else f"{node}:{found[0]}"

    def sender_elsewhere(self, username: str, side: str, other: str) -> str:
        """How the other deployment names the account `username` of `side`."""
        head, _, tail = username.partition(":")
        if tail and head == other:
            # One of the other's own users: its account there.
            return next((u for i, u in self.sides[other].users.values() if str(i) == tail), username)
        found = next((i for i, u in self.sides[side].users.values() if u == username), None)
        return f"{side}:{found}"

    def check(self) -> None:
        self.check_commands()
        self.check_unasked()
        for home, other in (("a", "b"), ("b", "a")):
            for slug in ("hall", "yard"):
                if self.sides[home].rooms.get(slug) is not None and slug == {"a": "hall", "b": "yard"}[home]:
                    self.check_replica(home, other, slug)
            for slug, seqs in self.sides[home].messages.items():
                last = self.sides[home].rooms[slug][0]
                if sorted(seqs) != list(range(1, last + 1)):
                    self.history.violate(
                        f"{home} {slug}: seqs {sorted(set(range(1, last + 1)) - set(seqs))[:10]} missing"
                    )
        self.check_views()

    def check_commands(self) -> None:
        versions: dict[tuple[str, str, int], list[int]] = defaultdict(list)
        for (client, id), sent in self.history.commands.items():
            if sent.ok is None:
                if sent.refused is None:
                    self.history.violate(f"{sent.t} {id} of client {client} was never acked")
                continue
            node = self.clients[client][0]
            home, slug = home_of(sent.d["room"], node)
            account = self.account(client, home)
            record = self.sides[home].records.get((account or "", id))
            if record is None:
                self.losses += 1
                self.history.violate(f"loss: {sent.t} {id} acked {sent.ok['d']}, no record at {home}")
                continue
            acked = {k: v for k, v in sent.ok["d"].items() if k != "room"}
            if {k: v for k, v in record[1].items() if k != "room"} != acked or record[0] != sent.t:
                self.history.violate(f"{sent.t} {id}: acked {sent.ok['d']}, recorded {record}")
            if sent.t == "room.post":
                stored = [
                    seq
                    for seq, (mid, sender, *_rest) in self.sides[home].messages.get(slug, {}).items()
                    if mid == id and sender == account
                ]
                if len(stored) > 1:
                    self.doubles += len(stored) - 1
                    self.history.violate(f"double: post {id} stored at seqs {stored} of {home} {slug}")
                elif stored != [sent.ok["d"]["seq"]]:
                    self.losses += 1
                    self.history.violate(f"loss: post {id} acked seq {sent.ok['d']['seq']}, stored at {stored}")
            else:
                versions[(home, slug, sent.d["seq"])].append(sent.ok["d"]["version"])
        for (home, slug, seq), acked in versions.items():
            final = self.sides[home].messages.get(slug, {}).get(seq)
            repeated = [v for v, n in Counter(acked).items() if n > 1]
            if repeated or final is None or final[3] != 1 + len(acked):
                self.doubles += 1
                self.history.violate(
                    f"double: {home} {slug}#{seq} at version {final and final[3]} after edits and deletes acked {acked}"
                )

    def check_unasked(self) -> None:
        sent = set()
        for (client, id), command in self.history.commands.items():
            if command.t == "room.post":
                home, _ = home_of(command.d["room"], self.clients[client][0])
                sent.add((home, self.account(client, home), id))
        for home, side in self.sides.items():
            for slug, seqs in side.messages.items():
                if "@" in slug:
                    continue
                for seq, (id, sender, *_rest) in seqs.items():
                    if (home, sender, id) not in sent:
                        self.history.violate(f"unasked: {home} {slug}#{seq} {id} by {sender}, which no client sent")

    def check_replica(self, home: str, other: str, slug: str) -> None:
        mine, theirs = self.sides[home], self.sides[other]
        replica = f"{slug}@{home}"
        if mine.rooms.get(slug) != theirs.rooms.get(replica):
            self.history.violate(
                f"{replica} on {other} is at {theirs.rooms.get(replica)}, its home at {mine.rooms.get(slug)}"
            )
        copies = theirs.messages.get(replica, {})
        for seq, (id, sender, body, version, rev) in mine.messages.get(slug, {}).items():
            copy = copies.get(seq)
            expected = (id, self.sender_elsewhere(sender, home, other), body, version, rev)
            if copy != expected:
                self.history.violate(f"{replica}#{seq} on {other} is {copy}, at home {expected}")
        for seq in set(copies) - set(mine.messages.get(slug, {})):
            self.history.violate(f"{replica}#{seq} on {other} has no original at home")

    def check_views(self) -> None:
        for client, (node, _) in self.clients.items():
            for (index, room), seen in self.history.views.items():
                if index != client:
                    continue
                home, slug = home_of(room, node)
                stored = self.sides[home].messages.get(slug, {})
                if set(seen) != set(stored):
                    missing = sorted(set(stored) - set(seen))[:10]
                    self.history.violate(
                        f"client {client} saw {len(seen)} of {len(stored)} messages of {room}: {missing}"
                    )
                    continue
                for seq, (id, body, version) in seen.items():
                    if (id, body, version) != (stored[seq][0], stored[seq][2], stored[seq][3]):
                        self.history.violate(
                            f"client {client} shows {room}#{seq} as {(id, body, version)}, stored {stored[seq]}"
                        )
