"""What every exercise must do, checked the same way for each: the starter fails, the solution passes,
and each plausible wrong answer fails with feedback that says what failed (and, where it expects one,
on which input), without giving the solution away.

A track's test file lists its wrong answers as ``{exercise id: [WrongAnswer, ...]}`` and calls
:func:`assert_exercise_behaves` for each of its exercises.
"""

from __future__ import annotations

from dataclasses import dataclass

from helpers.exercises import Exercise


@dataclass(frozen=True)
class WrongAnswer:
    """A plausible mistake: code that assigns ``answer`` (run with the exercise's context), and text
    its feedback must contain (it shows the check caught *this* mistake, not something else)."""

    what: str
    code: str
    feedback_contains: tuple[str, ...]


def assert_exercise_behaves(exercise: Exercise, wrong: list[WrongAnswer]) -> None:
    assert wrong, f"{exercise.id}: give at least one plausible wrong answer"
    starter = exercise.check(exercise.starter)
    assert not starter.passed, f"{exercise.id}: the starter passes:\n{starter.report()}"
    assert starter.feedback.strip(), f"{exercise.id}: the starter fails without feedback"
    solution = exercise.check(exercise.solution)
    assert solution.passed, f"{exercise.id}: the solution fails:\n{solution.report()}"
    for mistake in wrong:
        grade = exercise.check(exercise.build(mistake.code))
        assert not grade.passed, f"{exercise.id}: the wrong answer '{mistake.what}' passes:\n{grade.report()}"
        for text in mistake.feedback_contains:
            assert text in grade.feedback, (f"{exercise.id}: the feedback for '{mistake.what}' does not mention "
                                             f"{text!r}:\n{grade.feedback}")
        assert exercise.solution_source.strip() not in grade.feedback, f"{exercise.id}: feedback gives the solution"
