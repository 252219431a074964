"""Waiting for an event from async tests, with a timeout that only bounds the wait."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable


async def wait_for(predicate: Callable[[], bool], timeout: float = 5, what: str = "a condition") -> None:
    """Poll `predicate` from the event loop, which keeps running meanwhile."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.01)
