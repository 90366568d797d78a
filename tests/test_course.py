"""The course registry (``helpers.course``): lessons are found where they live, each has its notebook; engines pick up
a new lesson by its module alone; lesson N leans only on lessons before N; a solution is code, shown as a cell."""

from __future__ import annotations

import ast
import re
import sys
import textwrap
from pathlib import Path

import pytest

from helpers import course, exercises, interview, questions
from helpers.exercises.grading import solution_cell

ROOT = Path(__file__).resolve().parent.parent
LESSONS = course.lessons()


def test_every_notebook_is_a_lesson_module_and_numbers_are_in_order():
    sources = {p.stem for p in (ROOT / "notebooks" / "src").glob("[0-9][0-9]_*.py")}
    assert {item.name for item in LESSONS} == sources
    assert [item.number for item in LESSONS] == sorted(item.number for item in LESSONS)
    assert all((ROOT / "notebooks" / item.notebook).exists() for item in LESSONS)
    first = LESSONS[0]
    assert course.lesson(first.number) is course.lesson(f"{first.number:02d}") is course.lesson(first.name)
    with pytest.raises(KeyError, match="no lesson 99"):
        course.lesson(99)


@pytest.mark.parametrize("item", LESSONS, ids=lambda item: item.name)
def test_a_lessons_questions_exercises_and_cards_are_its_own_and_reach_the_engines(item):
    module = item.module
    for attribute, find in (("QUESTIONS", questions.get), ("EXERCISES", exercises.get), ("CARDS", interview.card)):
        for entry in getattr(module, attribute, ()):
            assert entry.lesson == item.name and entry.id.startswith(f"{item.number:02d}."), entry.id
            assert find(entry.id) is entry
    for exercise in getattr(module, "EXERCISES", ()):
        assert callable(exercise.solve) and exercise.solution_source.strip(), f"{exercise.id}: its solution is code"


def _lessons_used(source: str) -> set[int]:
    """Lesson numbers a module reaches: ``lesson(N)`` / ``lesson("NN…")`` calls and ``helpers.lessons.NN_…`` names."""
    used: set[int] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call) and getattr(node.func, "id", getattr(node.func, "attr", "")) == "lesson":
            arg = node.args[0] if node.args else None
            if isinstance(arg, ast.Constant):
                used.add(int(str(arg.value)[:2]))
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            used |= {int(n) for n in re.findall(r"helpers\.lessons\.(\d\d)_", node.value)}
        if isinstance(node, ast.ImportFrom) and node.module:
            used |= {int(n) for n in re.findall(r"lessons\.(\d\d)_", node.module)}
    return used


@pytest.mark.parametrize("item", LESSONS, ids=lambda item: item.name)
def test_a_lesson_uses_only_lessons_before_it(item):
    later = {n for n in _lessons_used(Path(item.module.__file__).read_text()) if n > item.number}
    assert not later, f"{item.name} uses lesson(s) {sorted(later)}: a lesson may use only lessons before it"


def test_the_check_of_lesson_order_sees_a_later_lesson():
    source = 'from helpers.course import lesson\nlater = lesson(9)\nCASE = "helpers.lessons.10_x:Model"\n'
    assert _lessons_used(source) == {9, 10}


def test_engines_name_no_lesson_of_the_registry():
    names = [item.name for item in LESSONS]
    for package in ("questions", "exercises", "interview"):
        for path in (ROOT / "helpers" / package).glob("*.py"):
            text = path.read_text()
            assert not re.search(r"lessons\.\d\d_|lesson\(\d+\)", text), f"{path.relative_to(ROOT)} names a lesson"
            assert not [n for n in names if n in text], f"{path.relative_to(ROOT)} names a lesson of the registry"


# How a test or a tool picks lessons by number: a slice of a name compared, a name prefix, a range of notebooks.
LESSON_RANGE = re.compile(r"(stem|lesson|name)\[:2\]\s*(in\b|[<>])|\.startswith\(\"\d\d_\"\)|widget_notebooks\(\d|TRACK_FILES|"
                          r"int\(\w+\.name\[:2\]\)\s*<")


def test_nothing_in_tests_tools_or_benchmarks_names_a_range_of_lessons():
    for folder in ("tests", "tools", "benchmarks"):
        for path in (ROOT / folder).rglob("*.py"):
            if path.name != Path(__file__).name:
                assert not LESSON_RANGE.search(path.read_text()), f"{path.relative_to(ROOT)} names a range of lessons"


@pytest.mark.parametrize("code", ['e.lesson[:2] <= "11"', 'p.stem[:2] in {"06", "07"}', 'e.lesson.startswith("12_")',
                                  "widget_notebooks(0, 5)", "if first <= int(path.name[:2]) <= last"])
def test_the_range_check_sees_a_range(code):
    assert LESSON_RANGE.search(code)


THROWAWAY = textwrap.dedent('''
    """A lesson that exists only for this test."""
    import torch

    from helpers.exercises.grading import Exercise, Verdict
    from helpers.interview import Card
    from helpers.questions import Question, Reveal

    LESSON = "98_throwaway"


    def solve_answer():
        """The solution: what the button shows is this body."""
        value = 6 * 7
        return value


    def _grade(answer):
        return [Verdict("the answer is 42", answer == 42, "" if answer == 42 else f"got {answer!r}")]


    QUESTIONS = [Question("98.sign", LESSON, "Is 1 > 0?", ("yes", "no"),
                          lambda: Reveal("yes" if bool(torch.tensor(1.0) > 0) else "no", "torch says 1 > 0",
                                         {"no": "torch.tensor(1.0) > 0 is True"}))]
    EXERCISES = [Exercise("98.answer", LESSON, "The answer", "Return 42.", _grade, lambda: {}, solve_answer,
                          kind="value")]
    CARDS = [Card("98.why", LESSON, "the registry", "conceptual", "Why does a throwaway lesson exist?",
                  " ".join(["It proves the engines find a lesson by its module alone."] * 5),
                  ("engines", "registry", "module"))]
''')


def test_a_new_lesson_is_one_module(tmp_path, monkeypatch):
    """A lesson module on the package's path: the registry and all three engines find it, nothing else edited."""
    import helpers.lessons

    (tmp_path / "98_throwaway.py").write_text(THROWAWAY)
    monkeypatch.setattr(helpers.lessons, "__path__", [*helpers.lessons.__path__, str(tmp_path)])
    course.refresh()
    try:
        assert course.lessons()[-1].name == "98_throwaway"
        assert questions.get("98.sign").actual()[0] == "yes"
        exercise = exercises.get("98.answer")
        assert exercise.check(exercise.solution).passed and not exercise.check(41).passed
        assert exercise.solution_source == "value = 6 * 7\nanswer = value\n"
        assert "98_throwaway" in {c.lesson for c in interview.cards()}
    finally:
        monkeypatch.undo()
        course.refresh()
        sys.modules.pop("helpers.lessons.98_throwaway", None)
    assert "98_throwaway" not in [item.name for item in course.lessons()]
    with pytest.raises(KeyError):
        exercises.get("98.answer")


def test_two_lessons_with_one_number_are_refused(tmp_path, monkeypatch):
    import helpers.lessons

    (tmp_path / f"{LESSONS[0].number:02d}_twin.py").write_text("")
    monkeypatch.setattr(helpers.lessons, "__path__", [*helpers.lessons.__path__, str(tmp_path)])
    course.refresh()
    try:
        with pytest.raises(ValueError, match=f"two lessons are numbered {LESSONS[0].number:02d}"):
            course.lessons()
    finally:
        monkeypatch.undo()
        course.refresh()


def _solve_with_comment_and_helper():
    """Docstrings are dropped."""
    # a comment the learner keeps

    def double(x):
        return 2 * x

    return (double,
            3)


def _solve_without_return():
    answer = 3  # noqa: F841 - the test's point: the solution does not return


def test_a_solution_is_shown_as_the_cell_a_learner_writes():
    assert solution_cell(_solve_with_comment_and_helper) == (
        "# a comment the learner keeps\n\ndef double(x):\n    return 2 * x\n\nanswer = (double,\n          3)\n")
    with pytest.raises(TypeError, match="return <the answer>"):
        solution_cell(_solve_without_return)
    for exercise in exercises.catalog():
        namespace: dict = dict(exercise.context())
        namespace.update({k: v for k, v in vars(sys.modules[exercise.solve.__module__]).items()
                          if not k.startswith("__")})
        exec(compile(exercise.solution_source, exercise.id, "exec"), namespace)  # noqa: S102 - our solution
        assert "answer" in namespace, exercise.id
