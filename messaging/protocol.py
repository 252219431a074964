"""Wire protocol v1: parse and encode frames, validate field shapes.

Pure functions, no Django and no I/O, so every bad input can be unit-tested.
See PROTOCOL.md (docs/PROTOCOL.md in this repository) for the contract.
"""
from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from datetime import datetime, timezone
from functools import cached_property
from typing import Any, Literal, NotRequired, TypedDict

import orjson

from .exceptions import BadFrame, Invalid

COMMAND_ID = re.compile(r"[A-Za-z0-9_-]{1,64}")
ROOM_SLUG = re.compile(r"[a-z0-9][a-z0-9-]{0,63}")
LONE_SURROGATE = re.compile(r"[\ud800-\udfff]")

# What any command's `d` may hold (PROTOCOL 1.1, "Safety limits"): nesting
# and integers every part of the server can write (orjson writes 254 levels,
# PostgreSQL's bigint holds int64), so no command's data can fail further on.
MAX_DATA_DEPTH = 32
INT_MIN, INT_MAX = -(2**63), 2**63 - 1
FLOAT_LIMIT = 2.0**63
OUTSIDE_INT64 = "a number in d is outside -2^63..2^63-1"


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

    @cached_property
    def fingerprint(self) -> str:
        """Identifies `(t, d)`: a retry must carry the same one, else `id_reused`.

        Computed once, when the command is prepared (`check_data` has passed):
        a `d` that cannot be written raises `Invalid` there, for this command
        alone, never inside a batch it shares with others.
        """
        try:
            canonical = orjson.dumps([self.t, self.d], option=orjson.OPT_SORT_KEYS)
        except orjson.JSONEncodeError:
            raise Invalid("d cannot be encoded") from None
        return hashlib.sha256(canonical).hexdigest()


def parse_command(text: str) -> Command:
    """Parse one text frame into a `Command`, or raise `BadFrame`.

    Only the envelope is checked here: a frame with a valid id is always
    answered with an ack, so problems with `t` or `d` are the handler's.
    """
    if not text or not text.strip():
        raise BadFrame("empty frame")
    try:
        # orjson is strict RFC 8259: no NaN, no Infinity, no lone surrogates.
        frame = orjson.loads(text)
    except orjson.JSONDecodeError as exc:
        raise BadFrame(f"not JSON: {exc}") from None
    if not isinstance(frame, dict):
        raise BadFrame("a frame must be a JSON object")
    command_id = frame.get("id")
    if command_id is None:
        raise BadFrame("missing id")
    if not isinstance(command_id, str) or not COMMAND_ID.fullmatch(command_id):
        raise BadFrame("id must be 1-64 characters of A-Z a-z 0-9 _ -")
    return Command(id=command_id, t=frame.get("t"), d=frame.get("d"))


def encode(frame: dict) -> str:
    """The frame as JSON text: orjson's, or the standard library's for what
    orjson refuses and JSON holds (a handler's integer beyond 64 bits, a lone
    surrogate as an escape), so one command's result fails no other frame."""
    try:
        return orjson.dumps(frame).decode()
    except orjson.JSONEncodeError:
        return json.dumps(frame, separators=(",", ":"), allow_nan=False)


def ack_ok(command_id: str, data: dict, *, dup: bool = False) -> AckFrame:
    return {"t": "ack", "id": command_id, "ok": True, "dup": dup, "d": data}


def ack_error(command_id: str, error: dict) -> AckFrame:
    return {"t": "ack", "id": command_id, "ok": False, "error": error}  # type: ignore[typeddict-item]


def bad_frame(message: str) -> ErrorFrame:
    return {"t": "error", "error": {"code": "bad_frame", "message": message}}


def format_time(moment: datetime) -> str:
    """ISO 8601 in UTC with microseconds, the same text for the same instant."""
    return moment.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


# Field validators shared by command handlers. Each raises `Invalid`.


def require_object(data: Any) -> dict:
    if not isinstance(data, dict):
        raise Invalid("d must be an object")
    return data


def check_data(data: dict) -> dict:
    """`data` if it is within the limits every command's `d` has, else `Invalid`.

    At most `MAX_DATA_DEPTH` levels of objects and arrays (`d` itself the
    first) and no number outside int64, wherever it is, read or not by the
    handler. One level at a time, without recursion: nothing here is deeper
    than the parser allows, but nothing need rely on that.
    """
    level: list = [data]
    depth = 1
    while level:
        if depth > MAX_DATA_DEPTH:
            raise Invalid(f"d is nested deeper than {MAX_DATA_DEPTH} levels")
        inner: list = []
        for container in level:
            for value in container.values() if isinstance(container, dict) else container:
                if isinstance(value, (dict, list)):
                    inner.append(value)
                elif isinstance(value, int) and not INT_MIN <= value <= INT_MAX:
                    raise Invalid(OUTSIDE_INT64)
                elif isinstance(value, float) and not -FLOAT_LIMIT < value < FLOAT_LIMIT:
                    # orjson reads an integer beyond 64 bits as a float (and
                    # -2^63-1 as the float -2^63, so that bound is out too);
                    # to a JavaScript client 1e300 is an integer as well.
                    raise Invalid(OUTSIDE_INT64)
        level = inner
        depth += 1
    return data


def room_slug(data: dict) -> str:
    room = data.get("room")
    if not isinstance(room, str) or not ROOM_SLUG.fullmatch(room):
        raise Invalid("room must match ^[a-z0-9][a-z0-9-]{0,63}$")
    return room


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
    if LONE_SURROGATE.search(body):
        raise Invalid("body contains a lone surrogate")
    return body
