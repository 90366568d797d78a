"""The exercise catalog as a whole: its API, its size and spread over the lessons, and that each
exercise's starter is a cell of its lesson (the learner edits the cell the tests run)."""

from __future__ import annotations

import ast
import builtins
import importlib
from pathlib import Path

import pytest

from helpers import exercises

ROOT = Path(__file__).resolve().parent.parent


def _wrong_answers() -> dict:
    return importlib.import_module("test_exercises_lessons").WRONG


def test_catalog_api_and_spread():
    catalog = exercises.catalog()
    ids = [e.id for e in catalog]
    assert len(ids) == len(set(ids))
    for e in catalog:
        assert e.id.split(".")[0] == e.lesson[:2], e
        assert (ROOT / "notebooks" / f"{e.lesson}.ipynb").exists(), e
        assert e.title and e.goal and callable(e.check)
    lessons = {e.lesson for e in catalog}
    assert len(catalog) >= 15 and len(lessons) >= 10, (len(catalog), lessons)


@pytest.mark.parametrize("exercise", exercises.catalog(), ids=lambda e: e.id)
def test_starter_is_the_lessons_cell_and_has_wrong_answers(exercise):
    source = (ROOT / "notebooks" / "src" / f"{exercise.lesson}.py").read_text()
    assert exercise.starter_source.strip() in source
    assert f'exercises.check("{exercise.id}"' in source, "the lesson runs the check after the starter"
    assert exercise.solution_source.strip() not in source, "the solution must not be in the lesson"
    assert _wrong_answers().get(exercise.id), f"{exercise.id}: no wrong answers are tested"


def test_check_prints_a_grade_and_unknown_ids_are_named(capsys):
    grade = exercises.check("01.vectorize_loop", object(), show_solution_button=False)
    assert not grade.passed and "not an nn.Module" in grade.feedback
    assert capsys.readouterr().out.startswith("✗ not yet — 01.vectorize_loop")
    with pytest.raises(KeyError, match="01.vectorize_loop"):
        exercises.get("99.nothing")


def test_solution_button_reveals_only_on_click():
    button = exercises.solution_button("01.vectorize_loop")
    assert button.output.value == "" and "hidden" in button._repr_mimebundle_()["text/plain"]
    source = button.reveal()
    assert "class" in source and "data-solution='shown'" in button.output.value


def _bound_names(tree: ast.AST) -> set[str]:
    """Names a piece of code binds anywhere (imports, assignments, defs, classes, loop and comprehension targets)."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            names |= {(a.asname or a.name).split(".")[0] for a in node.names}
        elif isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.arg):  # parameters of functions and lambdas
            names.add(node.arg)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
    return names


@pytest.mark.parametrize("exercise", exercises.catalog(), ids=lambda e: e.id)
def test_the_solution_runs_in_its_lesson(exercise):
    """A learner who copies the solution into the starter cell needs every name it uses in the lesson."""
    solution = ast.parse(exercise.solution_source)
    used = {n.id for n in ast.walk(solution) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
    lesson = ast.parse((ROOT / "notebooks" / "src" / f"{exercise.lesson}.py").read_text())
    missing = used - _bound_names(solution) - _bound_names(lesson) - set(dir(builtins))
    assert not missing, f"{exercise.id}: the solution uses {sorted(missing)}, which its lesson never defines"


def test_a_lowering_failure_in_a_check_names_the_learners_line_from_the_exported_program():
    """The checks' pipeline keeps the exported program, so a lowering failure caused by a write export lifted as a
    constant is named with the line that wrote it (the diagnosis needs the program), not only torch's assertion."""
    import torch
    from test_diagnose import STATE_ARGS, HeldStart

    from helpers.exercises.grading import lowered

    with torch.no_grad():
        program, verdict = lowered(HeldStart(), STATE_ARGS, backend="portable", hint="a hint")
        fixed, passed = lowered(HeldStart(), STATE_ARGS, backend="portable", strict=True)
    assert program is None and not verdict.passed and verdict.hint == "a hint"
    assert verdict.detail.startswith("lower failed at `forward(): self.holder.start.copy_(pos[0])` — "), verdict
    assert "`lifted_tensor_0`, a tensor export lifted as a constant" in verdict.detail, verdict
    assert fixed is not None and passed.passed
