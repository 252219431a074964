"""What a client has seen of a room, and what it must ask for to see the rest.

`(room, seq)` is a message's identity (PROTOCOL.md): repeats are dropped,
messages are taken in seq order, and a message past a gap is held until the
gap is filled by a `room.join` with `since`, the highest seq the client has
without a gap. A join whose backlog stops short of the ack's `last_seq` (more
than the server's replay limit was missed) is followed by another from where
it stopped. No I/O here: `messaging_client.Client` sends the joins this says
are needed.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any


class RoomView:
    """One room as a client holds it: its newest `keep` messages and its resume point."""

    def __init__(self, slug: str, *, keep: int = 1000) -> None:
        self.slug = slug
        self.keep = keep
        # Every message up to this seq has been taken; None until the first
        # message after a join without `since` says where the backlog starts.
        self.shown: int | None = None
        self.held: dict[int, dict[str, Any]] = {}
        self.messages: OrderedDict[int, dict[str, Any]] = OrderedDict()
        # The room's last seq as the newest join ack said, and that join's id while it runs.
        self.last_seq: int | None = None
        self.joining: str | None = None

    def join_data(self) -> dict[str, Any]:
        """The `d` of the next `room.join`: from where this view stops, if it has started."""
        return {"room": self.slug} if self.shown is None else {"room": self.slug, "since": self.shown}

    def joined(self, ack_d: dict[str, Any]) -> None:
        self.joining = None
        last_seq = ack_d.get("last_seq")
        if isinstance(last_seq, int):
            self.last_seq = last_seq if self.last_seq is None else max(self.last_seq, last_seq)
            if self.shown is None and last_seq == 0:
                self.shown = 0  # an empty room has no backlog to say where it starts

    def behind(self) -> bool:
        """Whether messages the server has told of are still missing (a gap, or a replay cut short)."""
        if self.held:
            return True
        return self.shown is not None and self.last_seq is not None and self.shown < self.last_seq

    def take(self, d: dict[str, Any]) -> list[dict[str, Any]]:
        """A `msg` frame's `d`: the messages it makes new to the client, in seq order (none for a repeat)."""
        seq = d.get("seq")
        if not isinstance(seq, int):
            return []
        if self.last_seq is None or seq > self.last_seq:
            self.last_seq = seq
        if self.shown is None:
            self.shown = seq - 1
        if seq <= self.shown or seq in self.held:
            return []
        if seq > self.shown + 1:
            if len(self.held) < self.keep:  # bounded: past it, the rejoin brings them again
                self.held[seq] = d
            return []
        taken = [self._keep(d)]
        while self.shown + 1 in self.held:
            taken.append(self._keep(self.held.pop(self.shown + 1)))
        return taken

    def changed(self, d: dict[str, Any]) -> dict[str, Any] | None:
        """A `msg.edit` or `msg.delete`: the message as it now is, if it is newer than the one held."""
        seq: Any = d.get("seq")  # the server's JSON
        held = self.messages.get(seq)
        if held is None or d.get("version", 0) <= held.get("version", 1):
            return None
        updated = {**held, **{k: v for k, v in d.items() if k != "rev"}}
        if "deleted_at" in d:
            updated.update(deleted=True, body="")
        self.messages[held["seq"]] = updated
        return updated

    def _keep(self, d: dict[str, Any]) -> dict[str, Any]:
        self.shown = d["seq"]
        self.messages[d["seq"]] = d
        while len(self.messages) > self.keep:
            self.messages.popitem(last=False)
        return d
