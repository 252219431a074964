"""Which command a log line belongs to.

The consumer opens a `command_scope` around each command; every log record
made inside it, in the consumer or in the database thread that runs the
handler (asgiref copies context variables into it), can then carry the
command's id, type and user. `CommandContextFilter` puts them on records and
`JsonFormatter` writes one JSON object per line; a host project adds both to
its `LOGGING` (docs/INTEGRATION.md).

The command's type is the client's text: it reaches the record through
`loggable`, escaped and bounded, so a `t` with a newline cannot forge a log
line in the plain format, and a `t` that is not a string (a list nested 990
levels, say) is never turned into one.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from datetime import UTC, datetime
from typing import Any

import orjson

FIELDS = ("command_id", "command_type", "user")
_current: ContextVar[dict[str, Any] | None] = ContextVar("messaging_command", default=None)

# What a log shows for client text that is not a string: never its str().
NOT_A_STRING = "<not a string>"
# Most characters of client text a log line carries, escapes included.
LOGGED_CHARS = 64


def loggable(text: Any, limit: int = LOGGED_CHARS) -> str:
    """Client text as a bounded piece of one log line.

    Characters that are not printable (newlines and every other control
    character, lone surrogates, bidirectional overrides) and backslashes are
    written as Python escapes (`\\n`, `\\ud800`, `\\u202e`, `\\\\`), so no
    client can start a line or make one read otherwise; at most `limit`
    characters, escapes included, then `...`. Anything but a string is
    `NOT_A_STRING`.
    """
    if not isinstance(text, str):
        return NOT_A_STRING
    if len(text) <= limit and text.isprintable() and "\\" not in text:
        return text
    shown: list[str] = []
    length = 0
    for char in text:
        piece = char if char.isprintable() and char != "\\" else repr(char)[1:-1]
        if length + len(piece) > limit:
            return "".join(shown) + "..."
        shown.append(piece)
        length += len(piece)
    return "".join(shown)


@contextmanager
def command_scope(command_id: str, command_type: Any, user: Any) -> Iterator[None]:
    token = _current.set({"command_id": command_id, "command_type": loggable(command_type), "user": user})
    try:
        yield
    finally:
        _current.reset(token)


class CommandContextFilter(logging.Filter):
    """Adds `command_id`, `command_type` and `user` (the user's pk) to every record; `-` outside a command."""

    def filter(self, record: logging.LogRecord) -> bool:
        context = _current.get() or {}
        for name in FIELDS:
            if not hasattr(record, name):
                setattr(record, name, context.get(name, "-"))
        return True


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time, level, logger, message, the command fields, and the traceback if any."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "at": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        for name in FIELDS:
            value = getattr(record, name, "-")
            if value != "-":
                entry[name] = value
        if record.exc_info:
            entry["exc"] = self.formatException(record.exc_info)
        try:
            return orjson.dumps(entry, default=str).decode()
        except orjson.JSONEncodeError:
            # A lone surrogate in the message or the traceback: orjson writes
            # UTF-8 only, so it is written as its escape, and the line stays JSON.
            return orjson.dumps({key: _utf8(value) for key, value in entry.items()}, default=str).decode()


def _utf8(value: Any) -> Any:
    return value.encode("utf-8", "backslashreplace").decode("utf-8") if isinstance(value, str) else value
