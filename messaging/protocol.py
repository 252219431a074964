"""Wire protocol v1: parse and encode frames, validate field shapes.

Pure functions, no Django and no I/O, so every bad input can be unit-tested.
See PROTOCOL.md (docs/PROTOCOL.md in this repository) for the contract.
"""
from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, Literal, NotRequired, TypedDict

import orjson

from .exceptions import BadFrame, Invalid

COMMAND_ID = re.compile(r"[A-Za-z0-9_-]{1,64}")
ROOM_SLUG = re.compile(r"[a-z0-9][a-z0-9-]{0,63}")
LONE_SURROGATE = re.compile(r"[\ud800-\udfff]")


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


@dataclass(frozen=True, slots=True)
class Command:
    """A parsed client command: its id, type and data, as sent."""

    id: str
    t: Any
    d: Any

    @property
    def fingerprint(self) -> str:
        """Identifies `(t, d)`: a retry must carry the same one, else `id_reused`."""
        canonical = orjson.dumps([self.t, self.d], option=orjson.OPT_SORT_KEYS)
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
    return orjson.dumps(frame).decode()


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
    return moment.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


# Field validators shared by command handlers. Each raises `Invalid`.


def require_object(data: Any) -> dict:
    if not isinstance(data, dict):
        raise Invalid("d must be an object")
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
