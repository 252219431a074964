"""messaging.testing's registry overrides: a type lives for its block, a replaced one comes back."""

from __future__ import annotations

import pytest

from messaging.core import handlers
from messaging.core.exceptions import UnknownType
from messaging.testing import override_command, override_registry


def test_a_type_lives_for_its_block_only():
    with override_command("test.block", lambda ctx, data: {}, exactly_once=False) as type:
        assert type == "test.block"
        assert handlers.lookup("test.block").exactly_once is False
    with pytest.raises(UnknownType):
        handlers.lookup("test.block")


def test_a_replaced_built_in_type_comes_back_even_after_an_error():
    built_in = handlers.lookup("room.post")
    with pytest.raises(RuntimeError):
        with override_command("room.post", lambda ctx, data: {"replaced": True}):
            assert handlers.lookup("room.post") is not built_in
            raise RuntimeError("the test failed inside")
    assert handlers.lookup("room.post") is built_in


def test_override_registry_undoes_whatever_the_block_registered():
    before = dict(handlers._registry)
    with override_registry():
        handlers.command("test.one")(lambda ctx, data: {})
        handlers.command("test.two", exactly_once=False)(lambda ctx, data: {})
        del handlers._registry["room.join"]
    assert handlers._registry == before
