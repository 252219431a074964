"""messaging: exactly-once real-time chat over WebSockets for Django Channels.

`messaging.command` is the decorator that registers a host project's own
command types (see docs/INTEGRATION.md). It is loaded on first use, so
importing this package never needs configured Django settings.
"""
from __future__ import annotations

from typing import Any

__version__ = "0.2.0"
__all__ = ["__version__", "command"]


def __getattr__(name: str) -> Any:
    if name == "command":
        from .handlers import command

        return command
    raise AttributeError(f"module 'messaging' has no attribute {name!r}")
