"""No module of the app imports, however indirectly, a module that imports it.

The graph is read from the source (imports anywhere in a module, those made
inside functions too), less those under `if TYPE_CHECKING:`, which never run.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from .test_layers import module_name, modules


def is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def run_time_imports(tree: ast.AST) -> list[ast.Import | ast.ImportFrom]:
    """The import statements of `tree` that run: those of an `if TYPE_CHECKING:` body left out."""
    found: list[ast.Import | ast.ImportFrom] = []
    pending: list[ast.AST] = [tree]
    while pending:
        node = pending.pop()
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            found.append(node)
        elif isinstance(node, ast.If) and is_type_checking(node):
            pending.extend(node.orelse)
            continue
        pending.extend(ast.iter_child_nodes(node))
    return found


def imported_modules(name: str, package: str, source: str, known: set[str]) -> set[str]:
    """The modules of `known` that the module `name` (of `package`) imports at run time, relative imports resolved."""
    names: set[str] = set()
    for node in run_time_imports(ast.parse(source, name)):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
            continue
        base = node.module or ""
        if node.level:
            parent = package.split(".")
            parent = parent[: len(parent) - (node.level - 1)]
            base = ".".join([*parent, base] if base else parent)
        names.add(base)
        # `from . import metrics` imports a module; `from .x import y` a name of x.
        names.update(f"{base}.{alias.name}" for alias in node.names)
    found = set()
    for imported in names:
        parts = imported.split(".")
        while parts and ".".join(parts) not in known:
            parts.pop()
        if parts and ".".join(parts) != name:
            found.add(".".join(parts))
    return found


def package_of(path: Path) -> str:
    name = module_name(path)
    return name if path.name == "__init__.py" else name.rpartition(".")[0]


def import_graph(paths: list[Path]) -> dict[str, set[str]]:
    known = {module_name(p) for p in paths}
    return {module_name(p): imported_modules(module_name(p), package_of(p), p.read_text(), known) for p in paths}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's, without recursion), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return sorted(found)


def test_no_module_of_the_app_is_part_of_an_import_cycle():
    graph = import_graph(modules())
    assert len(graph) > 100, "the graph holds the app's modules"
    assert cycles(graph) == []


@pytest.mark.parametrize(
    "source, imports",
    [
        ("import messaging.core.claims\n", {"messaging.core.claims"}),
        # A name of a module is that module; a module of a package is that module.
        ("from ..conf import get_settings\n", {"messaging.conf"}),
        # The package's own `__init__` runs too.
        ("from . import metrics\n", {"messaging.ops", "messaging.ops.metrics"}),
        # Inside a function: it runs when the function does.
        ("def f():\n    from .metrics import REGISTRY\n", {"messaging.ops.metrics"}),
        # Under TYPE_CHECKING: never at run time; its `else` does.
        (
            "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from ..conf import X\nelse:\n    from . import metrics\n",
            {"messaging.ops", "messaging.ops.metrics"},
        ),
        ("import typing\nif typing.TYPE_CHECKING:\n    from ..conf import X\n", set()),
    ],
)
def test_the_graph_reads_imports_as_python_runs_them(source, imports):
    known = {module_name(p) for p in modules()}
    assert imported_modules("messaging.ops.health", "messaging.ops", source, known) == imports


def test_a_cycle_is_found_however_long():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": {"e"}, "f": set()}
    assert cycles(graph) == [["a", "b", "c"]]
    assert cycles({"x": {"y"}, "y": {"x"}, "z": {"w"}, "w": {"z"}}) == [["w", "z"], ["x", "y"]]
