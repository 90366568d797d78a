"""Reading a package's import graph from its source (every import statement, wherever it is written: top level,
inside a function, under ``if TYPE_CHECKING``), and finding a circle in it. Used by the structure tests."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules_under(folder: Path) -> dict[str, Path]:
    """``{dotted name: path}`` of every module under ``folder`` (a package's face is named as the package)."""
    return {module_name(p): p for p in sorted(folder.rglob("*.py"))}


def imports_of(name: str, source: str, modules: dict[str, Path], is_package: bool = False) -> set[str]:
    """The modules of ``modules`` that module ``name`` (with this source) imports, anywhere in its code."""
    package = name if is_package else name.rpartition(".")[0]

    def owner(target: str) -> str | None:
        while target:
            if target in modules:
                return target
            target = target.rpartition(".")[0]
        return None

    found: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[:len(parts) - (node.level - 1)] + ([node.module] if node.module else []))
            targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names]
        else:
            continue
        found |= {m for m in map(owner, targets) if m is not None and m != name}
    return found


def import_graph(modules: dict[str, Path]) -> dict[str, set[str]]:
    return {name: imports_of(name, path.read_text(encoding="utf-8"), modules, path.stem == "__init__")
            for name, path in modules.items()}


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
