"""Which loaded versions the replacements of daphne's, autobahn's and Twisted's internals take as checked."""

from __future__ import annotations

import sys
from types import SimpleNamespace

import pytest

from messaging.transport.versions import checked


@pytest.mark.parametrize(
    ("version", "versions", "expected"),
    [
        ("4.2.1", "4.", True),
        ("5.0.0", "4.", False),
        ("25.5.0", ("24.", "25.", "26."), True),
        ("23.10.0", ("24.", "25.", "26."), False),
        (None, "4.", False),
    ],
)
def test_a_loaded_module_is_checked_by_the_start_of_its_version(monkeypatch, version, versions, expected):
    module = SimpleNamespace() if version is None else SimpleNamespace(__version__=version)
    monkeypatch.setitem(sys.modules, "a_library", module)
    assert checked("a_library", versions) is expected


def test_a_module_not_loaded_is_not_checked():
    assert "a_library_never_loaded" not in sys.modules
    assert checked("a_library_never_loaded", "1.") is False
