"""The bench is a program of its own: nothing in `bench/` imports the test suite."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def imported_modules(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module)
    return names


def test_nothing_in_bench_imports_tests():
    files = sorted((ROOT / "bench").rglob("*.py"))
    assert files
    offending = {
        str(path.relative_to(ROOT)): sorted(name for name in imported_modules(path) if name.split(".")[0] == "tests")
        for path in files
    }
    assert {path: names for path, names in offending.items() if names} == {}
