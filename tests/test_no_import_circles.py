"""No two modules of ``helpers`` import each other, directly or around a loop: every import statement counts,
wherever it is written (top level, inside a function, under ``if TYPE_CHECKING``).

A package's face (its ``__init__``, which hands its modules' names on) is left out, as ``farm-studio look`` leaves
it out: an edge *into* a package face is not followed. (``helpers.interview._widgets`` importing names from
``helpers.interview`` is such an edge; the lesson registry of issue 16 removes those.)"""

from __future__ import annotations

import ast
from pathlib import Path

from test_doctor_structure import find_cycle

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "helpers"


def _name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_name(p): p for p in PACKAGE.rglob("*.py")}


def _owner(name: str) -> str | None:
    while name:
        if name in MODULES:
            return name
        name = name.rpartition(".")[0]
    return None


def imports_of(name: str, path: Path) -> set[str]:
    package = name if path.stem == "__init__" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[:len(parts) - (node.level - 1)] + ([node.module] if node.module else []))
            targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in MODULES else base for a in node.names]
        else:
            continue
        found |= {m for m in map(_owner, targets) if m is not None and m != name}
    return found


FACES = {name for name, path in MODULES.items() if path.stem == "__init__"}


def graph_without_faces() -> dict[str, set[str]]:
    """The import graph between modules, package faces left out."""
    return {name: imports_of(name, path) - FACES for name, path in MODULES.items() if name not in FACES}


def test_the_library_has_no_import_circle():
    cycle = find_cycle(graph_without_faces())
    assert cycle is None, " -> ".join(cycle)


def test_the_check_sees_a_circle():
    graph = graph_without_faces()
    graph["helpers.host"] = graph["helpers.host"] | {"helpers.lessons.bucketing"}  # bucketing imports host
    assert find_cycle(graph) is not None
