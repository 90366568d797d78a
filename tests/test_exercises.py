"""The exercise catalog as a whole: its API, its size and spread over the lessons, and that each
exercise's starter is a cell of its lesson (the learner edits the cell the tests run)."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest

from helpers import exercises

ROOT = Path(__file__).resolve().parent.parent
TRACK_FILES = ("test_exercises_track1", "test_exercises_track2", "test_exercises_lesson11", "test_exercises_interview")


def _wrong_answers() -> dict:
    merged: dict = {}
    for name in TRACK_FILES:
        if (ROOT / "tests" / f"{name}.py").exists():
            merged.update(importlib.import_module(name).WRONG)
    return merged


def test_catalog_api_and_spread():
    catalog = exercises.catalog()
    ids = [e.id for e in catalog]
    assert len(ids) == len(set(ids))
    for e in catalog:
        assert e.id.split(".")[0] == e.lesson[:2], e
        assert (ROOT / "notebooks" / f"{e.lesson}.ipynb").exists(), e
        assert e.title and e.goal and callable(e.check)
    lessons = {e.lesson for e in catalog if e.lesson[:2] <= "11"}
    assert len([e for e in catalog if e.lesson[:2] <= "11"]) >= 12 and len(lessons) >= 9, (len(catalog), lessons)


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
