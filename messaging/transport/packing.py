"""How the hub packs the frames of one publish into one Pub/Sub message, and unpacks them (messaging/transport/fanout.py)."""

from __future__ import annotations

import re
from collections.abc import Iterator

# A room's slug, or a federated room's address, `slug@node` (PROTOCOL.md 1.2).
ROOM_TAG = re.compile(rb"[a-z0-9][a-z0-9-]{0,63}(?:@[a-z][a-z0-9]{0,15})?")


def pack_tagged(frames: list[tuple[bytes, str]]) -> bytes:
    """Frames, in order, as one Pub/Sub message: per frame a line
    `<tag> <length>`, then that many bytes of UTF-8 text. A tag has no space
    and no newline."""
    parts = []
    for tag, text in frames:
        payload = text.encode()
        parts.append(b"%s %d\n%s" % (tag, len(payload), payload))
    return b"".join(parts)


def unpack_tagged(data: bytes) -> Iterator[tuple[bytes, str]]:
    """The frames of a `pack_tagged` message; ValueError if it is not one."""
    at = 0
    while at < len(data):
        newline = data.index(b"\n", at)
        tag, length = data[at:newline].split(b" ")
        size = int(length)
        end = newline + 1 + size
        if size < 0 or end > len(data):
            raise ValueError("a frame's length is negative or runs past the end of the message")
        yield tag, data[newline + 1 : end].decode()
        at = end


def pack(frames: list[tuple[int | None, str]]) -> bytes:
    """A room's frames as one Pub/Sub message, each tagged with its message's seq or `-`."""
    return pack_tagged([(b"-" if seq is None else b"%d" % seq, text) for seq, text in frames])


def unpack(data: bytes) -> Iterator[tuple[int | None, str]]:
    """The frames of a `pack`ed message; ValueError if it is not one."""
    for tag, text in unpack_tagged(data):
        yield None if tag == b"-" else int(tag), text


def pack_for_user(frames: list[tuple[str | None, str]]) -> bytes:
    """A user's frames as one Pub/Sub message, each tagged with the room whose
    joined sockets it is for, or `-` for all the user's sockets (a slug never
    is `-`, nor holds a space)."""
    return pack_tagged([(b"-" if room is None else room.encode(), text) for room, text in frames])


def unpack_for_user(data: bytes) -> Iterator[tuple[str | None, str]]:
    """The frames of a `pack_for_user` message; ValueError if it is not one."""
    for tag, text in unpack_tagged(data):
        if tag == b"-":
            yield None, text
        elif ROOM_TAG.fullmatch(tag):
            yield tag.decode(), text
        else:
            raise ValueError("a user's frame is tagged with neither a room nor -")
