"""The app's one exception hierarchy.

Every expected failure of a command is a `CommandError` carrying the protocol's
`code` and `retry` flag; the consumer turns it into a refusal ack in exactly one
place. The docstring of each class is its default message.
"""

from __future__ import annotations

from typing import Any


class CommandError(Exception):
    """the command failed"""

    code = "error"
    retry = False

    def __init__(self, message: str | None = None, **extra: object) -> None:
        self.message = message or (self.__doc__ or "").strip()
        self.extra = extra
        super().__init__(self.message)

    def as_error(self) -> dict[str, Any]:
        error = {"code": self.code, "message": self.message, "retry": self.retry}
        error.update(self.extra)
        return error


class Invalid(CommandError):
    """the command's data failed validation"""

    code = "invalid"


class UnknownType(CommandError):
    """no handler for this command type"""

    code = "unknown_type"


class Forbidden(CommandError):
    """not allowed"""

    code = "forbidden"


class IdReused(CommandError):
    """this id was already used with a different command"""

    code = "id_reused"


class InProgress(CommandError):
    """the first attempt with this id is still running"""

    code = "in_progress"
    retry = True


class Unavailable(CommandError):
    """storage failed; nothing was applied"""

    code = "unavailable"
    retry = True


class RateLimited(CommandError):
    """too many commands; try later"""

    code = "rate_limited"
    retry = True


class BadFrame(Exception):
    """A frame that cannot be answered with an ack: it has no valid id."""

    def __init__(self, message: str) -> None:
        self.message = message
        super().__init__(message)
