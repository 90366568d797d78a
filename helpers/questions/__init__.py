"""Predictions: the learner answers first, then the real pipeline says what happens.

A :class:`Question` has a prompt, a few options and a ``reveal`` function that *runs the real thing*
(export, lowering, the runtime) and returns a :class:`Reveal`: the option the run picked, why, and for every
other option what in the run rules it out. The reveal logic lives in the lesson's module, not in a notebook
cell above the question, so nothing on the page gives the answer away.

In a lesson, either a widget::

    questions.ask("03.zero_side")          # options + Reveal button (runs the reveal on click)

or a prediction written in code::

    my_prediction = None                    # the learner sets it: "match", "diverge" or "rejected"
    questions.reveal("01.counted_four", my_prediction)

``reveal`` with ``None`` only says *make a prediction first*: a saved notebook holds questions, not
answers. Tests drive every question through :meth:`Question.actual` and :meth:`PredictThenReveal.answer`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Question", "Reveal", "STATUS_OPTIONS", "catalog", "get", "ask", "reveal"]

STATUS_OPTIONS = ("match", "diverge", "rejected")  # what the device does with an input, compared with eager


@dataclass(frozen=True)
class Reveal:
    """What the run showed: the option it picked (``actual``), why, and for each other option what in the
    same run rules it out (``why_not``: option → reason, written from the run's own evidence)."""

    actual: str
    why: str
    why_not: Mapping[str, str]


@dataclass
class Question:
    """One prediction. ``reveal_fn()`` runs the real pipeline and returns a :class:`Reveal`."""

    id: str
    lesson: str
    prompt: str
    options: tuple[str, ...]
    reveal_fn: Callable[[], Reveal]
    _outcome: Reveal | None = field(default=None, repr=False)

    def outcome(self) -> Reveal:
        """The reveal, computed once per process from the real pipeline; it must explain every wrong option."""
        if self._outcome is None:
            outcome = self.reveal_fn()
            if outcome.actual not in self.options:
                raise ValueError(f"question {self.id}: the pipeline says {outcome.actual!r}, not one of "
                                 f"{self.options}")
            wrong = [o for o in self.options if o != outcome.actual]
            unexplained = [o for o in wrong if not outcome.why_not.get(o, "").strip()]
            strays = sorted(set(outcome.why_not) - set(wrong))
            if unexplained or strays:
                raise ValueError(f"question {self.id}: the reveal must say why each wrong option is wrong; "
                                 f"unexplained: {unexplained}, not a wrong option: {strays}")
            self._outcome = outcome
        return self._outcome

    def actual(self) -> tuple[str, str]:
        """``(actual outcome, explanation)``: why the run picked it, then why each other option is wrong."""
        outcome = self.outcome()
        others = [f"Not {o!r}: {outcome.why_not[o]}" for o in self.options if o != outcome.actual]
        return outcome.actual, "\n".join([outcome.why, *others])


def _load() -> dict[str, Question]:
    from .. import course

    return course.by_id("QUESTIONS")


def catalog() -> list[Question]:
    return list(_load().values())


def get(question_id: str) -> Question:
    questions = _load()
    if question_id not in questions:
        raise KeyError(f"no question {question_id!r}; there are: {', '.join(questions)}")
    return questions[question_id]


def ask(question_id: str):
    """The question as a widget: pick an option, press Reveal (which runs the real thing)."""
    from ..widgets import PredictThenReveal

    q = get(question_id)
    return PredictThenReveal(q.prompt, list(q.options), q.actual)


def reveal(question_id: str, prediction: Any) -> bool | None:
    """Judge a prediction written in code. With ``None``: only ask for a prediction (reveals nothing)."""
    q = get(question_id)
    if prediction is None:
        print(f"No prediction yet: set it to one of {', '.join(repr(o) for o in q.options)}, then run this cell "
              "again.")
        return None
    text = str(prediction).strip()
    if text not in q.options:
        print(f"{text!r} is not one of the options: {', '.join(repr(o) for o in q.options)}")
        return None
    actual, why = q.actual()
    right = text == actual
    mark = "✓ right" if right else f"✗ not quite — you predicted {text!r}"
    lines = why.split("\n")
    yours = [line for line in lines if line.startswith(f"Not {text!r}:")]  # why your pick is wrong, first
    print(f"actual: {actual} — {mark}\n" + "\n".join(lines[:1] + yours + [x for x in lines[1:] if x not in yours]))
    return right
