"""A session's frames as server-sent events (PROTOCOL.md 1.2, "Server-sent events"), and the stream's cursor.

`EventBuffer` is the `Buffer` (messaging/transport/ports.py) a stream's
session sends to: each frame becomes one event, `event:` its `t`, `data:` the
frame's JSON on one line, `id:` the stream's cursor after it; acks are kept
(`acks`) and never sent, as a command's ack is its HTTP response. Until the
stream is `ready`, what the joins send is held, so that the `ready` event goes
first: at most `MAX_SEND_BUFFER` per room. A room whose join sends more (its
50 latest messages, all long) is "deferred": what it held is dropped, and the
stream joins it again once `ready` is sent, when its backlog goes as fast
as the client reads. Past `MAX_SEND_BUFFER` times the rooms in all, or a
joined room's live frames past its share, the stream ends as an overflowing
socket is closed. The bound, the order, the close and the overflow are
those of the buffer it wraps (messaging/transport/servers/streams.py).

The cursor is the stream's rooms' revs (PROTOCOL.md, "One cursor for every
change: `rev`"): `<tag>.<rev>.<rev>...`, the revs in base 36 in the order of
the request's `rooms`, and the tag, the CRC-32 of those rooms joined by
commas in base 36, so that a cursor of other rooms is not read as this one's.

Every event's cursor is a safe resume point. A room's rev moves with the
frames of its live changes, and to the `rev_upto` of a join once the join's
backlog has been put (`joined`), not before: a stream that ends in the
middle of a backlog is resumed from before it. A replay cut short (the ack's
`rev_upto` below its `last_rev`) leaves its room "behind": frames of the
room past `rev_upto` are dropped, since the next page of the replay, which
the stream asks for once the client has read this one, sends them.
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence
from typing import Any

import orjson

from .ports import Buffer, Closer

PING = ": ping\n\n"


def rooms_tag(rooms: Sequence[str]) -> str:
    return base36(zlib.crc32(",".join(rooms).encode()))


def base36(n: int) -> str:
    digits = "0123456789abcdefghijklmnopqrstuvwxyz"
    text = ""
    while True:
        n, digit = divmod(n, 36)
        text = digits[digit] + text
        if not n:
            return text


def encode_cursor(rooms: Sequence[str], revs: Sequence[int]) -> str:
    return ".".join([rooms_tag(rooms), *(base36(rev) for rev in revs)])


def read_cursor(rooms: Sequence[str], cursor: str | None) -> list[int] | None:
    """The revs a cursor of these rooms holds; None if there is none or it cannot be read."""
    if not cursor or len(cursor) > 16 * (len(rooms) + 1):
        return None
    tag, *revs = cursor.split(".")
    if tag != rooms_tag(rooms) or len(revs) != len(rooms):
        return None
    try:
        values = [int(rev, 36) for rev in revs]
    except ValueError:
        return None
    return values if all(rev >= 0 and len(text) <= 13 for rev, text in zip(values, revs)) else None


def event(t: str, data: str, cursor: str) -> str:
    return f"event: {t}\ndata: {data}\nid: {cursor}\n\n"


class EventBuffer:
    """A stream's session's buffer: frames in, events out to `inner`, acks kept in `acks`.

    `revs`: each room's rev at the start, as the request's cursor says (None: it had none).
    """

    def __init__(self, inner: Buffer, rooms: Sequence[str], revs: Sequence[int] | None) -> None:
        self.inner = inner
        self.rooms = list(rooms)
        self.index = {room: n for n, room in enumerate(rooms)}
        self.resumed = revs is not None
        self.revs = list(revs) if revs is not None else [0] * len(rooms)
        self.start = self.cursor
        self.acks: dict[str, dict[str, Any]] = {}
        # The ids of the stream's joins, and their rooms.
        self.expected: dict[str, str] = {}
        # Each room whose join's ack came and whose backlog is not all put: the rev it brings the room to.
        self.joining: dict[int, int | None] = {}
        # The rooms behind (their replay was cut short): the rev their backlog reaches so far.
        self.behind: dict[int, int] = {}
        # The rooms whose backlog did not fit before `ready`: joined again after it.
        self.deferred: set[int] = set()
        # The events held until `ready`, each with its room's index; None once it is sent.
        self.held: list[tuple[int | None, str]] | None = []
        self.held_bytes = 0
        self.held_by_room = [0] * len(rooms)
        self.hold_limit = inner.limit * max(1, len(rooms))

    # The wrapped buffer's state, as the session reads it.

    @property
    def limit(self) -> int:
        return self.inner.limit

    @limit.setter
    def limit(self, value: int) -> None:
        self.inner.limit = value

    @property
    def largest(self) -> int:
        return self.inner.largest

    @largest.setter
    def largest(self, value: int) -> None:
        self.inner.largest = value

    @property
    def overflowed(self) -> bool:
        return self.inner.overflowed

    @overflowed.setter
    def overflowed(self, value: bool) -> None:
        self.inner.overflowed = value

    @property
    def waiting(self) -> int:
        return self.inner.waiting + self.held_bytes

    def fits(self, text: str) -> bool:
        return self.inner.fits(text)

    async def room(self, size: int = 0) -> None:
        await self.inner.room(size)

    def stop(self) -> None:
        self.held = None
        self.held_bytes = 0
        self.inner.stop()

    async def close(self, closer: Closer) -> None:
        await self.inner.close(closer)

    def overflow(self, held_frames: int = 0, held_bytes: int = 0) -> None:
        held = self.held or []
        self.held = None
        frames, size = len(held), self.held_bytes
        self.held_bytes = 0
        self.inner.overflow(held_frames + frames, held_bytes + size)

    @property
    def cursor(self) -> str:
        return encode_cursor(self.rooms, self.revs)

    def send(self, text: str) -> bool:
        """One frame of the session: an ack is kept; anything else goes as an event, held until `ready`."""
        try:
            frame = orjson.loads(text)
        except orjson.JSONDecodeError:
            frame = None
        if not isinstance(frame, dict):
            return self.put(None, event("message", text, self.cursor))
        t = frame.get("t")
        if t == "ack":
            room = self.expected.get(frame.get("id"))  # type: ignore[arg-type]
            if room is not None:
                self.acks[frame["id"]] = frame
                if frame.get("ok") and isinstance(frame.get("d"), dict):
                    self.answered(self.index[room], frame["d"])
            return True
        d = frame.get("d")
        n = self.index.get(d.get("room")) if isinstance(d, dict) else None  # type: ignore[arg-type]
        if n is not None:
            rev = d.get("rev")  # type: ignore[union-attr]
            if n in self.deferred or type(rev) is int and rev > self.behind.get(n, rev):
                return True  # a later join of the room sends it
            if type(rev) is int and rev > self.revs[n] and n not in self.joining:
                self.revs[n] = rev
        return self.put(n, event(t if isinstance(t, str) and t.isprintable() else "message", text, self.cursor))

    def put(self, n: int | None, text: str) -> bool:
        if self.held is None:
            return self.inner.send(text)
        if not self.inner.fits(text):
            return False
        if self.inner.overflowed:
            return True
        if n is not None and n in self.joining and self.held_by_room[n] + len(text) > self.inner.limit:
            # Its join's backlog: nothing of the room has moved the cursor yet, so it can be sent later.
            self.defer(n)
            return True
        self.held.append((n, text))
        self.held_bytes += len(text)
        if n is not None:
            self.held_by_room[n] += len(text)
        if self.held_bytes > self.hold_limit or n is not None and self.held_by_room[n] > self.inner.limit:
            self.overflow()
        return True

    def defer(self, n: int) -> None:
        """Drop what room `n` holds, and all it sends until it is joined again after `ready`."""
        assert self.held is not None
        self.held = [(m, text) for m, text in self.held if m != n]
        self.held_bytes -= self.held_by_room[n]
        self.held_by_room[n] = 0
        self.deferred.add(n)
        self.behind.pop(n, None)

    def answered(self, n: int, ack: dict[str, Any]) -> None:
        """A join of room `n` was answered: its backlog follows; behind if it stops short of `last_rev`."""
        self.deferred.discard(n)
        upto, last = ack.get("rev_upto", ack.get("last_rev")), ack.get("last_rev")
        self.joining[n] = upto if type(upto) is int else None
        if type(upto) is int and type(last) is int and upto < last:
            self.behind[n] = upto
        else:
            self.behind.pop(n, None)

    def joined(self, room: str) -> None:
        """The join of `room` is answered and its backlog put: the room's cursor moves to where it brought it."""
        n = self.index[room]
        upto = self.joining.pop(n, None)
        if upto is not None and n not in self.deferred and upto > self.revs[n]:
            self.revs[n] = upto

    def lagging(self) -> int | None:
        """The first room joined again after `ready` (deferred, or behind), or None."""
        return min([*self.deferred, *self.behind], default=None)

    def ready(self, data: str) -> None:
        """Send the `ready` event, with the cursor the stream started from, then what was held."""
        held, self.held = self.held or [], None
        self.held_bytes = 0
        if self.inner.send(event("ready", data, self.start)):
            for _, text in held:
                self.inner.send(text)

    def ping(self) -> None:
        if self.held is None and not (self.inner.overflowed or self.inner.waiting):
            self.inner.send(PING)
