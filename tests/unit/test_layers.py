"""The layers of docs/ARCHITECTURE.md hold: imports go only downward, and every module reads in one sitting."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "messaging"
# The most lines of one module of the app (docs/ARCHITECTURE.md).
MODULE_LINES = 400
# Over it, until split (none now).
LONGER_FOR_NOW: dict[str, int] = {}

# Per layer, what its modules may not import (a package and everything under it).
FORBIDDEN = {
    "messaging.core": (
        "channels",
        "daphne",
        "messaging.chat",
        "messaging.transport",
        "messaging.federation",
        "messaging.contrib",
        "messaging.reactions",
        "messaging.views",
    ),
    "messaging.chat": (
        "channels",
        "daphne",
        "messaging.transport",
        "messaging.federation",
        "messaging.contrib",
        "messaging.reactions",
        "messaging.views",
    ),
    "messaging.ops": ("channels", "messaging.chat", "messaging.transport", "messaging.contrib", "messaging.federation"),
    # Above the transport (it publishes to its hub), below the contrib apps.
    "messaging.transport": ("messaging.federation", "messaging.contrib"),
    "messaging.federation": ("messaging.contrib",),
    # The uploads' rows, bytes and rules: used by the chat and the transport, like the events' outbox.
    "messaging.files": (
        "channels",
        "messaging.chat",
        "messaging.transport",
        "messaging.federation",
        "messaging.contrib",
    ),
    "messaging.client": ("django", "channels", "messaging.core", "messaging.chat", "messaging.transport"),
}


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports(path: Path) -> set[str]:
    """Every module `path` imports, relative imports resolved, anywhere in the file."""
    name = module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package.split(".")
                parent = parent[: len(parent) - (node.level - 1)]
                base = ".".join([*parent, base] if base else parent)
            found.add(base)
            # `from . import metrics` imports a module too.
            found.update(f"{base}.{alias.name}" for alias in node.names)
    return found


def modules() -> list[Path]:
    return sorted(p for p in PACKAGE.rglob("*.py") if "migrations" not in p.parts)


@pytest.mark.parametrize("layer", sorted(FORBIDDEN))
def test_a_layer_imports_nothing_above_it(layer):
    root = PACKAGE.parent.joinpath(*layer.split("."))
    wrong = {}
    for path in sorted(root.rglob("*.py")):
        bad = sorted(i for i in imports(path) if any(i == f or i.startswith(f + ".") for f in FORBIDDEN[layer]))
        if bad:
            wrong[module_name(path)] = bad
    assert wrong == {}


def test_relative_imports_are_resolved_to_the_modules_they_name():
    # `from ..conf import x` in messaging/core is messaging.conf, `from .exceptions` messaging.core.exceptions.
    path = PACKAGE / "core" / "protocol.py"
    assert "messaging.conf" in imports(PACKAGE / "core" / "claims.py")
    assert "messaging.core.exceptions" in imports(path)


def test_no_module_of_the_app_is_longer_than_one_sitting():
    long = {
        name: n
        for p in modules()
        if (n := len(p.read_text().splitlines())) > LONGER_FOR_NOW.get(name := module_name(p), MODULE_LINES)
    }
    assert long == {}


# A connected client and what it talks through (docs/ARCHITECTURE.md): no server or framework of sockets.
SESSION_MODULES = ("session", "ports", "answers", "live", "outgoing")


@pytest.mark.parametrize("name", SESSION_MODULES)
def test_the_session_imports_no_framework_of_sockets(name):
    path = PACKAGE / "transport" / f"{name}.py"
    framework = ("channels", "daphne", "twisted", "uvicorn", "websockets", "messaging.transport.consumers")
    assert sorted(i for i in imports(path) if any(i == f or i.startswith(f + ".") for f in framework)) == []
