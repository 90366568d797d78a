"""Hands-on exercises, graded by the real pipeline.

Each :class:`Exercise` asks the learner for something concrete (a model, a ``dynamic_shapes`` dict,
a list of bucket sizes, a host-side function) and :meth:`Exercise.check` judges it by *behaviour*:
it exports, lowers and runs the answer in the ExecuTorch runtime and compares it with the
**intended** behaviour (the reference model's eager outputs on probes that cover both sides of every
branch and every bound), plus the lesson's own criterion where there is one (delegated share, arena
bytes, refusing out-of-contract inputs, padding waste). Matching its own ``.pte`` proves nothing: a
model that returns zeros matches its own program and fails here.

In a lesson::

    # ✏️ Exercise 03.cond_rewrite — the starter cell: edit it, then run the check
    class RouterForExport(Router):
        def forward(self, x): ...
    answer = RouterForExport()

    exercises.check("03.cond_rewrite", answer)   # prints the grade, offers the solution behind a button

The starter is the lesson's own cell (read from ``notebooks/src``: one source for the learner and
the tests); the solution lives here, in the library, and is shown only when the learner asks.

API: :func:`catalog`, :func:`get`, :func:`check`, :func:`solution`, :class:`Exercise`, :class:`Grade`.
"""

from __future__ import annotations

from .grading import Exercise, Grade, Verdict

__all__ = ["catalog", "get", "check", "solution", "solution_button", "Exercise", "Grade", "Verdict"]



def _load() -> dict[str, Exercise]:
    from .. import course

    return course.by_id("EXERCISES")


def catalog() -> list[Exercise]:
    """Every exercise, in lesson order."""
    return list(_load().values())


def get(exercise_id: str) -> Exercise:
    """The exercise with this id (e.g. ``"03.cond_rewrite"``)."""
    exercises = _load()
    if exercise_id not in exercises:
        raise KeyError(f"no exercise {exercise_id!r}; there are: {', '.join(exercises)}")
    return exercises[exercise_id]


def check(exercise_id: str, answer: object, *, show_solution_button: bool = True) -> Grade:
    """Grade ``answer`` with the real pipeline, print the grade, and (in a notebook) offer the solution
    behind a button. Returns the :class:`Grade`."""
    from ..lowering import progress_lines

    exercise = get(exercise_id)
    with progress_lines(False):  # the grade says what was built and run; no progress lines between it and the learner
        grade = exercise.check(answer)
    print(grade.report())
    if show_solution_button:
        _display_button(exercise)
    return grade


def solution(exercise_id: str) -> object:
    """The solution object (built from the library's solution source): one deliberate call away."""
    return get(exercise_id).solution


def solution_button(exercise_id: str):
    """A button that reveals the solution's source (nothing of it is in the saved notebook)."""
    from ._widgets import SolutionButton

    return SolutionButton(get(exercise_id))


def _display_button(exercise: Exercise) -> None:
    try:
        from IPython import get_ipython
        from IPython.display import display
    except ImportError:  # pragma: no cover - IPython is installed with Jupyter
        return
    if get_ipython() is None:
        return
    from ._widgets import SolutionButton

    display(SolutionButton(exercise))
