"""The doctor's package has no import circle, and its layers import downwards only:
cli → examine → (bundle, draft, shipped) → render → report. The report (what was found, exit statuses, the
verdict's rules) imports no other module of the doctor; the renderers read the report; nothing but the
package's face and ``__main__`` imports the command line.

Every import statement counts wherever it is written (top level, inside a function, under ``if TYPE_CHECKING``).
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = "helpers.doctor"
FOLDER = Path(__file__).resolve().parent.parent / "helpers" / "doctor"
MODULES = {PACKAGE if p.stem == "__init__" else f"{PACKAGE}.{p.stem}": p for p in sorted(FOLDER.glob("*.py"))}


def _doctor_module(name: str) -> str | None:
    while name:
        if name in MODULES:
            return name
        name = name.rpartition(".")[0]
    return None


def imports_of(name: str, source: str) -> set[str]:
    """The doctor modules that module ``name`` (with this source) imports, anywhere in its code."""
    package = name if name == PACKAGE else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[:len(parts) - (node.level - 1)] + ([node.module] if node.module else []))
            targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in MODULES else base for a in node.names]
        else:
            continue
        found |= {m for m in map(_doctor_module, targets) if m is not None and m != name}
    return found


def import_graph() -> dict[str, set[str]]:
    return {name: imports_of(name, path.read_text(encoding="utf-8")) for name, path in MODULES.items()}


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle (``[a, b, …, a]``), or None."""
    state: dict[str, int] = {}  # 1 on the path, 2 done

    def visit(node: str, path: list[str]) -> list[str] | None:
        state[node] = 1
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return path[path.index(nxt):] + [nxt]
            if nxt not in state and (cycle := visit(nxt, path + [nxt])):
                return cycle
        state[node] = 2
        return None

    for start in sorted(graph):
        if start not in state and (cycle := visit(start, [start])):
            return cycle
    return None


def test_the_cycle_finder_finds_one():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None
    lazy = "def f():\n    from .cli import main\n"  # an import inside a function counts
    assert imports_of(f"{PACKAGE}.examine", lazy) == {f"{PACKAGE}.cli"}


def test_the_doctor_package_has_no_import_cycle():
    assert find_cycle(import_graph()) is None, find_cycle(import_graph())


def test_the_layers_import_downwards():
    graph = import_graph()
    assert graph[f"{PACKAGE}.report"] == set(), "the report imports no other module of the doctor"
    assert graph[f"{PACKAGE}.render"] == {f"{PACKAGE}.report"}, "the renderers read the report, nothing else"
    assert f"{PACKAGE}.cli" not in graph[f"{PACKAGE}.examine"], "the pipeline never imports the command line"
    importers = {name for name, deps in graph.items() if f"{PACKAGE}.cli" in deps}
    assert importers <= {PACKAGE, f"{PACKAGE}.__main__"}, importers
