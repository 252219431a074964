"""A session's frames as server-sent events (PROTOCOL.md 1.2, "Server-sent events"), and the stream's cursor.

`EventBuffer` is the `Buffer` (messaging/transport/ports.py) a stream's
session sends to: each frame becomes one event, `event:` its `t`, `data:` the
frame's JSON on one line, `id:` the stream's cursor after it; acks are kept
(`acks`) and never sent, as a command's ack is its HTTP response. Until the
stream is `ready`, what the joins send is held, so that the `ready` event goes
first; held bytes past `MAX_SEND_BUFFER` per room end the stream as an
overflowing socket is ended. The bound, the order, the close and the
overflow are those of the buffer it wraps (messaging/transport/servers/streams.py).

The cursor is the stream's rooms' revs (PROTOCOL.md, "One cursor for every
change: `rev`"): `<tag>.<rev>.<rev>...`, the revs in base 36 in the order of
the request's `rooms`, and the tag, the CRC-32 of those rooms joined by
commas in base 36, so that a cursor of other rooms is not read as this one's.
"""

from __future__ import annotations

import asyncio
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
    """A stream's session's buffer: frames in, events out to `inner`, acks kept in `acks`."""

    def __init__(self, inner: Buffer, rooms: Sequence[str], revs: Sequence[int]) -> None:
        self.inner = inner
        self.rooms = list(rooms)
        self.index = {room: n for n, room in enumerate(rooms)}
        self.revs = list(revs)
        self.acks: dict[str, dict[str, Any]] = {}
        self.acked = asyncio.Event()
        # The ids of the stream's joins, and their rooms.
        self.expected: dict[str, str] = {}
        # The events held until `ready`; None once it is sent.
        self.held: list[str] | None = []
        self.held_bytes = 0
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
            return self.put(event("message", text, self.cursor))
        t = frame.get("t")
        if t == "ack":
            room = self.expected.get(frame.get("id"))  # type: ignore[arg-type]
            if room is not None:
                self.acks[frame["id"]] = frame
                if frame.get("ok") and isinstance(frame.get("d"), dict):
                    self.joined(room, frame["d"])
                if self.expected.keys() <= self.acks.keys():
                    self.acked.set()
            return True
        d = frame.get("d")
        if isinstance(d, dict):
            n = self.index.get(d.get("room"))  # type: ignore[arg-type]
            rev = d.get("rev")
            if n is not None and type(rev) is int and rev > self.revs[n]:
                self.revs[n] = rev
        return self.put(event(t if isinstance(t, str) and t.isprintable() else "message", text, self.cursor))

    def put(self, text: str) -> bool:
        if self.held is None:
            return self.inner.send(text)
        if not self.inner.fits(text):
            return False
        if self.inner.overflowed:
            return True
        self.held.append(text)
        self.held_bytes += len(text)
        if self.held_bytes > self.hold_limit:
            self.overflow()
        return True

    def joined(self, room: str, ack: dict[str, Any]) -> None:
        """The cursor of `room` from its join's ack: the rev its backlog reaches (`rev_upto`, else `last_rev`)."""
        n = self.index[room]
        upto = ack.get("rev_upto", ack.get("last_rev"))
        if type(upto) is int and upto > self.revs[n]:
            self.revs[n] = upto

    def ready(self, data: str) -> None:
        """Send the `ready` event, then what was held."""
        held, self.held = self.held or [], None
        self.held_bytes = 0
        if self.inner.send(event("ready", data, self.cursor)):
            for text in held:
                self.inner.send(text)

    def ping(self) -> None:
        if self.held is None and not (self.inner.overflowed or self.inner.waiting):
            self.inner.send(PING)
