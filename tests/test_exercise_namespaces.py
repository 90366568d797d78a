"""Every exercise's solution, typed into its lesson's starter cell, finds the names it uses: the lesson defines
them before the starter or in the starter as it was run (an import, an assignment, a def), or Python does. The check runs on the lessons' sources,
without a kernel: the browser tests type the solution into the starter of the lessons they use, this covers
every lesson."""

from __future__ import annotations

import ast
import builtins
import symtable

import pytest

from helpers import exercises
from helpers.exercises.grading import lesson_cells

KERNEL_NAMES = {"display", "get_ipython"}  # what IPython adds to a notebook's namespace


def _bound(tree: ast.AST) -> set[str]:
    """Names a cell binds at the top level of the notebook's namespace."""
    names: set[str] = set()

    def targets(node: ast.AST) -> None:
        if isinstance(node, ast.Name):
            names.add(node.id)
        elif isinstance(node, (ast.Tuple, ast.List)):
            for element in node.elts:
                targets(element)
        elif isinstance(node, ast.Starred):
            targets(node.value)

    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, ast.Assign):
            for target in node.targets:
                targets(target)
        elif isinstance(node, (ast.AnnAssign, ast.AugAssign, ast.For, ast.AsyncFor)):
            targets(node.target)
        elif isinstance(node, ast.withitem) and node.optional_vars is not None:
            targets(node.optional_vars)
        elif isinstance(node, ast.NamedExpr):
            targets(node.target)
        elif isinstance(node, ast.ExceptHandler) and node.name:
            names.add(node.name)
    return names


def _code(cell: str) -> str:
    """A py:percent cell as Python: markdown cells are all comments; magics dropped."""
    return "\n".join(line for line in cell.splitlines() if not line.lstrip().startswith(("%", "!")))


def defined_before_starter(exercise: exercises.Exercise) -> set[str]:
    """Names bound by the lesson's cells up to its starter cell, the starter included (Run All ran it before the
    learner replaced it)."""
    cells = lesson_cells(exercise.lesson)
    index = next(i for i, c in enumerate(cells) if c.strip().startswith(exercise.marker))
    names: set[str] = set()
    for cell in cells[:index + 1]:
        names |= _bound(ast.parse(_code(cell)))
    return names


def free_names(source: str) -> set[str]:
    """Names ``source`` reads from the namespace it runs in (not bound by itself, at any depth)."""
    top = symtable.symtable(source, "<solution>", "exec")
    bound_at_top = {s.get_name() for s in top.get_symbols() if s.is_assigned() or s.is_imported()}
    free = {s.get_name() for s in top.get_symbols() if s.is_referenced() and s.get_name() not in bound_at_top}

    def walk(table: symtable.SymbolTable) -> None:
        for child in table.get_children():
            for symbol in child.get_symbols():
                if symbol.is_global() and symbol.get_name() not in bound_at_top:
                    free.add(symbol.get_name())
            walk(child)

    walk(top)
    return free


@pytest.mark.parametrize("exercise", exercises.catalog(), ids=lambda e: e.id)
def test_the_solution_finds_its_names_in_the_lesson(exercise):
    missing = free_names(exercise.solution_source) - defined_before_starter(exercise) - set(dir(builtins)) \
        - KERNEL_NAMES
    assert not missing, (f"{exercise.id}: the solution uses {sorted(missing)}, which {exercise.lesson} does not define "
                         "up to its starter cell")


def test_the_check_sees_a_name_the_lesson_does_not_define():
    source = "class Fix(nn.Module):\n    def forward(self, x):\n        return torch.clamp(x, max=LIMIT)\nanswer = Fix()\n"
    assert free_names(source) == {"nn", "torch", "LIMIT"}
    cell = "import torch\nfrom torch import nn\nfor i, (a, b) in enumerate([]):\n    pass\nwith open('f') as fh:\n    x = 1\n"
    assert _bound(ast.parse(cell)) >= {"torch", "nn", "i", "a", "b", "fh", "x"}
    exercise = exercises.get("17.keep_state")
    assert {"nn", "torch", "SAMPLES"} <= defined_before_starter(exercise)
    assert "SAMPLES" in free_names(exercise.solution_source)
