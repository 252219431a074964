"""Wire protocol v1: parse and encode frames, validate field shapes.

Pure functions, no Django and no I/O, so every bad input can be unit-tested.
See PROTOCOL.md (docs/PROTOCOL.md in this repository) for the contract.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal, NotRequired, TypedDict

import orjson

from .exceptions import BadFrame, Invalid

COMMAND_ID = re.compile(r"[A-Za-z0-9_-]{1,64}")
ROOM_SLUG = re.compile(r"[a-z0-9][a-z0-9-]{0,63}")
# A room of a federated deployment (PROTOCOL 1.2, "Two deployments"): `slug@node`.
ROOM_ADDRESS = re.compile(r"([a-z0-9][a-z0-9-]{0,63})@([a-z][a-z0-9]{0,15})")

# What any command's `d` may hold (PROTOCOL 1.1, "Safety limits"): nesting,
# numbers and strings every part of the server can write (orjson writes 254
# levels, PostgreSQL's bigint holds int64, UTF-8 no lone surrogate), so no
# command's data can fail further on.
MAX_DATA_DEPTH = 32
INT_MIN, INT_MAX = -(2**63), 2**63 - 1
FLOAT_LIMIT = 2.0**63
OUTSIDE_INT64 = "a number in d is outside -2^63..2^63-1"
LONE_SURROGATE_IN_D = "a string in d holds a lone surrogate (half of a UTF-16 pair)"

# How deep `loads` reads text that only its fallback parser takes (orjson's
# own limit is 1,024 levels): the standard library's parser recurses once per
# level, and Python's recursion limit (1,000 frames, the caller's included)
# must never be met.
FALLBACK_MAX_DEPTH = 512
# A surrogate escaped as JSON allows, or one as a code point of the text: where
# orjson refused text that holds one, the fallback parser reads it again.
SURROGATE_IN_TEXT = re.compile(r"[\ud800-\udfff]|\\u[dD][89a-fA-F][0-9a-fA-F]{2}")
JSON_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"')


class ErrorBody(TypedDict):
    code: str
    message: str
    retry: bool


class AckFrame(TypedDict):
    t: Literal["ack"]
    id: str
    ok: bool
    dup: NotRequired[bool]
    d: NotRequired[dict[str, Any]]
    error: NotRequired[ErrorBody]


class ErrorFrame(TypedDict):
    t: Literal["error"]
    error: dict[str, str]


@dataclass(frozen=True)
class Command:
    """A parsed client command: its id, type and data, as sent."""

    id: str
    t: Any
    d: Any

    @property
    def fingerprint(self) -> str:
        """Identifies `(t, d)`: a retry must carry the same one, else `id_reused`.

        Computed once, when the command is prepared (`check_data` has passed):
        a `d` that cannot be written raises `Invalid` there, for this command
        alone, never inside a batch it shares with others.
        """
        # Kept by hand: functools.cached_property takes a lock on Python 3.11.
        known = self.__dict__.get("_fingerprint")
        if known is None:
            try:
                canonical = orjson.dumps([self.t, self.d], option=orjson.OPT_SORT_KEYS)
            except orjson.JSONEncodeError:
                raise Invalid("d cannot be encoded") from None
            known = self.__dict__["_fingerprint"] = hashlib.sha256(canonical).hexdigest()
        return known


def loads(text: str) -> Any:
    """The JSON value of `text`, strict RFC 8259 (no NaN or Infinity, no
    trailing data, numbers as doubles or 64-bit integers), or `BadFrame`.

    orjson reads it, except where it refuses for a lone surrogate, which JSON
    text may escape (`"\\ud800"`: what `JSON.stringify` writes for half an
    emoji) but UTF-8 cannot hold: such text is a command all the same, whose
    string holds the surrogate (`check_data` refuses it with an ack). It is
    read again by the standard library, held to orjson's rules and to
    `FALLBACK_MAX_DEPTH` levels; other text never takes that path.
    """
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError as exc:
        if not SURROGATE_IN_TEXT.search(text):
            raise BadFrame(f"not JSON: {exc}") from None
    if _nesting_over(JSON_STRING.sub('""', text), FALLBACK_MAX_DEPTH):
        raise BadFrame(f"not JSON: nested deeper than {FALLBACK_MAX_DEPTH} levels")
    try:
        return json.loads(text, parse_constant=_no_constant, parse_int=_integer, parse_float=_double)
    except (ValueError, RecursionError) as exc:
        raise BadFrame(f"not JSON: {exc}") from None


def _nesting_over(skeleton: str, limit: int) -> bool:
    """Whether JSON text whose strings are emptied (`skeleton`) nests arrays and objects deeper than `limit`."""
    if skeleton.count("[") + skeleton.count("{") <= limit:
        return False
    depth = 0
    for char in skeleton:
        if char in "[{":
            depth += 1
            if depth > limit:
                return True
        elif char in "]}":
            depth -= 1
    return False


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _integer(digits: str) -> int | float:
    # As orjson reads it: beyond 64 bits an integer is a double. The length
    # check spares int() a long run of digits.
    if len(digits) <= 20:
        value = int(digits)
        if INT_MIN <= value < 2**64:
            return value
    return _double(digits)


def _double(text: str) -> float:
    value = float(text)
    if math.isinf(value):
        raise ValueError("number is infinity when parsed as double")
    return value


def parse_command(text: str) -> Command:
    """Parse one text frame into a `Command`, or raise `BadFrame`.

    Only the envelope is checked here: a frame with a valid id is always
    answered with an ack, so problems with `t` or `d` are the handler's.
    The caller bounds the text's size (the consumer: `MAX_FRAME_BYTES`);
    nesting is bounded here (`loads`).
    """
    if not text or not text.strip():
        raise BadFrame("empty frame")
    frame = loads(text)
    if not isinstance(frame, dict):
        raise BadFrame("a frame must be a JSON object")
    command_id = frame.get("id")
    if command_id is None:
        raise BadFrame("missing id")
    if not isinstance(command_id, str) or not COMMAND_ID.fullmatch(command_id):
        raise BadFrame("id must be 1-64 characters of A-Z a-z 0-9 _ -")
    return Command(id=command_id, t=frame.get("t"), d=frame.get("d"))


def encode(frame: Mapping[str, Any]) -> str:
    """The frame as JSON text: orjson's, or the standard library's for what
    orjson refuses and JSON holds (a handler's integer beyond 64 bits, a lone
    surrogate as an escape), so one command's result fails no other frame."""
    try:
        return orjson.dumps(frame).decode()
    except orjson.JSONEncodeError:
        return json.dumps(frame, separators=(",", ":"), allow_nan=False)


def encoded_bytes(value: Any) -> int:
    """The bytes of `value` as `encode` writes it (the UTF-8 of its JSON text)."""
    try:
        return len(orjson.dumps(value))
    except orjson.JSONEncodeError:
        return len(json.dumps(value, separators=(",", ":"), allow_nan=False).encode())


def ack_ok(command_id: str, data: dict, *, dup: bool = False) -> AckFrame:
    return {"t": "ack", "id": command_id, "ok": True, "dup": dup, "d": data}


def ack_error(command_id: str, error: dict) -> AckFrame:
    return {"t": "ack", "id": command_id, "ok": False, "error": error}  # type: ignore[typeddict-item]


def bad_frame(message: str) -> ErrorFrame:
    return {"t": "error", "error": {"code": "bad_frame", "message": message}}


def frame_not_sent(code: str, message: str, command_id: str | None = None) -> ErrorFrame:
    """What the client gets in place of a frame the server could not send (an extension):
    `frame_too_large` or `frame_unencodable`, with the id of the command whose ack or reply it was."""
    error = {"code": code, "message": message}
    if command_id is not None:
        error["id"] = command_id
    return {"t": "error", "error": error}


def format_time(moment: datetime) -> str:
    """ISO 8601 in UTC with microseconds, the same text for the same instant."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


# Field validators shared by command handlers. Each raises `Invalid`.


def require_object(data: Any) -> dict:
    if not isinstance(data, dict):
        raise Invalid("d must be an object")
    return data


def check_data(data: dict) -> dict:
    """`data` if it is within the limits every command's `d` has, else `Invalid`.

    At most `MAX_DATA_DEPTH` levels of objects and arrays (`d` itself the
    first), no number outside int64 and no lone surrogate in a string or a
    key (neither UTF-8 nor PostgreSQL holds one), wherever it is, read or not
    by the handler. One level at a time, without recursion: nothing here is deeper
    than the parser allows, but nothing need rely on that.
    """
    level: list = [data]
    depth = 1
    while level:
        if depth > MAX_DATA_DEPTH:
            raise Invalid(f"d is nested deeper than {MAX_DATA_DEPTH} levels")
        inner: list = []
        for container in level:
            if type(container) is dict:
                # All keys in one call.
                if has_lone_surrogate("".join(container)):
                    raise Invalid(LONE_SURROGATE_IN_D)
                values = container.values()
            else:
                values = container
            # By exact type, as a JSON parser makes them (and fast: this runs
            # for every command); bool, None and the rest need no check.
            for value in values:
                kind = type(value)
                if kind is str:
                    if has_lone_surrogate(value):
                        raise Invalid(LONE_SURROGATE_IN_D)
                elif kind is int:
                    if not INT_MIN <= value <= INT_MAX:
                        raise Invalid(OUTSIDE_INT64)
                elif kind is dict or kind is list:
                    inner.append(value)
                elif kind is float and not -FLOAT_LIMIT < value < FLOAT_LIMIT:
                    # orjson reads an integer beyond 64 bits as a float (and
                    # -2^63-1 as the float -2^63, so that bound is out too);
                    # to a JavaScript client 1e300 is an integer as well.
                    raise Invalid(OUTSIDE_INT64)
        level = inner
        depth += 1
    return data


def has_lone_surrogate(text: str) -> bool:
    """Whether `text` holds a lone surrogate, which UTF-8 cannot encode.

    Asked of every string of every command: ASCII is answered at once, other
    text by one encode (3.6 times faster than a regular expression's scan of
    4,000 characters).
    """
    if text.isascii():
        return False
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


# Reads `slug@node` (the room's slug and its home's name) into the room as the
# handlers name it, or raises `Invalid`: set by messaging/federation while
# federation is on (`read_room_addresses`); None, an address is `invalid`.
RoomAddresses = Callable[[str, str], str]
_room_addresses: RoomAddresses | None = None


def read_room_addresses(reader: RoomAddresses | None) -> None:
    """Have `room_slug` read `slug@node` with `reader` (None: refuse it)."""
    global _room_addresses
    _room_addresses = reader


def room_slug(data: dict) -> str:
    room = data.get("room")
    if isinstance(room, str):
        if ROOM_SLUG.fullmatch(room):
            return room
        address = ROOM_ADDRESS.fullmatch(room) if _room_addresses is not None else None
        if address is not None and _room_addresses is not None:
            return _room_addresses(address.group(1), address.group(2))
    raise Invalid("room must match ^[a-z0-9][a-z0-9-]{0,63}$")


def optional_seq(data: dict, key: str) -> int | None:
    value = data.get(key)
    if value is None:
        return None
    # bool is an int in Python, but true is not a sequence number.
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise Invalid(f"{key} must be an integer >= 0")
    return value


def message_body(data: dict, max_chars: int) -> str:
    body = data.get("body")
    if not isinstance(body, str):
        raise Invalid("body must be a string")
    body = body.strip()
    if not body:
        raise Invalid("body is empty")
    if len(body) > max_chars:
        raise Invalid(f"body is longer than {max_chars} characters")
    if "\x00" in body:
        raise Invalid("body contains NUL")
    if has_lone_surrogate(body):
        raise Invalid("body contains a lone surrogate")
    return body
