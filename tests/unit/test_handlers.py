"""The command registry's contract: what a handler may declare."""
from __future__ import annotations

import pytest

from messaging.core import handlers


async def loop_form(ctx, data):
    return {}


def test_an_exactly_once_type_cannot_take_a_loop_form_that_writes_no_record():
    with pytest.raises(ValueError, match="apply_recorded_many_async"):
        handlers.command("test.unrecorded", apply_async=loop_form)
    with pytest.raises(KeyError):
        handlers._registry["test.unrecorded"]


def test_a_type_that_is_not_exactly_once_takes_its_loop_form():
    handlers.command("test.loop-form", exactly_once=False, apply_async=loop_form)(lambda ctx, data: {})
    try:
        assert handlers.lookup("test.loop-form").apply_async is loop_form
    finally:
        del handlers._registry["test.loop-form"]
