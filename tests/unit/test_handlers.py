"""The command registry's contract: what a handler may declare."""

from __future__ import annotations

import pytest

from messaging.core import handlers


async def batch_form(gateway, entries):
    return [{} for _ in entries]


def test_a_type_takes_a_batch_form_per_database_vendor_and_none_elsewhere():
    handlers.command("test.batched", batch={"postgresql": batch_form})(lambda ctx, data: {})
    try:
        handler = handlers.lookup("test.batched")
        assert handler.batch_form("postgresql") is batch_form
        assert handler.batch_form("sqlite") is None
    finally:
        del handlers._registry["test.batched"]


def test_a_type_registered_twice_differently_is_refused():
    handlers.command("test.twice")(lambda ctx, data: {})
    try:
        with pytest.raises(ValueError, match="already registered"):
            handlers.command("test.twice", exactly_once=False)(lambda ctx, data: {})
    finally:
        del handlers._registry["test.twice"]
