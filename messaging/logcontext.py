"""Which command a log line belongs to.

The consumer opens a `command_scope` around each command; every log record
made inside it, in the consumer or in the database thread that runs the
handler (asgiref copies context variables into it), can then carry the
command's id, type and user. `CommandContextFilter` puts them on records and
`JsonFormatter` writes one JSON object per line; a host project adds both to
its `LOGGING` (docs/INTEGRATION.md).
"""
from __future__ import annotations

import logging
from contextlib import contextmanager
from contextvars import ContextVar
from datetime import datetime, timezone
from typing import Any, Iterator

import orjson

FIELDS = ("command_id", "command_type", "user")
_current: ContextVar[dict[str, Any] | None] = ContextVar("messaging_command", default=None)


@contextmanager
def command_scope(command_id: str, command_type: Any, user: Any) -> Iterator[None]:
    # `t` comes from the client and may be anything: log a bounded string.
    token = _current.set({"command_id": command_id, "command_type": str(command_type)[:64], "user": user})
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
            "at": datetime.fromtimestamp(record.created, timezone.utc).isoformat(timespec="milliseconds"),
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
        return orjson.dumps(entry, default=str).decode()
