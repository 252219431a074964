"""messaging: exactly-once real-time chat over WebSockets for Django Channels.

`messaging.command` is the decorator that registers a host project's own
command types; `messaging.submit` (sync) and `messaging.asubmit` run one
command from a view, a task or a script, exactly once, returning its ack (see
docs/INTEGRATION.md). They are loaded on first use, so importing this package
never needs configured Django settings.
"""
from __future__ import annotations

from typing import Any

__version__ = "0.2.0"
__all__ = ["__version__", "asubmit", "command", "submit"]


def __getattr__(name: str) -> Any:
    if name == "command":
        from .handlers import command

        return command
    if name in ("submit", "asubmit"):
        from . import submitting

        return getattr(submitting, name)
    raise AttributeError(f"module 'messaging' has no attribute {name!r}")
