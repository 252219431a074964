"""Command types registered for one test: the registry is put back as it was after.

The registry is global to the process (`messaging.command` registers at
import time, once), so a type a test adds would otherwise outlive the test,
and one it replaces would stay replaced for every test after it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from messaging.core import handlers


@contextmanager
def override_registry() -> Iterator[None]:
    """Inside, register and replace command types freely (`messaging.command`,
    `override_command`); on leaving, the registry is exactly what it was."""
    saved = dict(handlers._registry)
    try:
        yield
    finally:
        handlers._registry.clear()
        handlers._registry.update(saved)


@contextmanager
def override_command(type: str, apply: Callable[..., Any], **options: Any) -> Iterator[str]:
    """`type` handled by `apply` for the block, registered as `messaging.command(type, **options)`
    would; yields `type`. A type registered already (a built-in one too) is
    replaced for the block and comes back after it."""
    with override_registry():
        handlers._registry.pop(type, None)
        handlers.command(type, **options)(apply)
        yield type
