"""Predictions: the learner answers first, then the real pipeline says what happens.

A :class:`Question` has a prompt, a few options and a ``reveal`` function that *runs the real thing*
(export, lowering, the runtime) and returns ``(actual, explanation)``. The reveal logic lives here,
not in a notebook cell above the question, so nothing on the page gives the answer away.

In a lesson, either a widget::

    questions.ask("03.zero_side")          # options + Reveal button (runs the reveal on click)

or a prediction written in code::

    my_prediction = None                    # the learner sets it: "match", "diverge" or "rejected"
    questions.reveal("01.counted_four", my_prediction)

``reveal`` with ``None`` only says *make a prediction first*: a saved notebook holds questions, not
answers. Tests drive every question through :meth:`Question.actual` and :meth:`PredictThenReveal.answer`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Question", "STATUS_OPTIONS", "catalog", "get", "ask", "reveal"]

STATUS_OPTIONS = ("match", "diverge", "rejected")  # what the device does with an input, compared with eager



@dataclass
class Question:
    """One prediction. ``reveal()`` runs the real pipeline and returns ``(actual, explanation)``."""

    id: str
    lesson: str
    prompt: str
    options: tuple[str, ...]
    reveal_fn: Callable[[], tuple[str, str]]
    _answer: tuple[str, str] | None = field(default=None, repr=False)

    def actual(self) -> tuple[str, str]:
        """``(actual outcome, explanation)``, computed once per process from the real pipeline."""
        if self._answer is None:
            actual, why = self.reveal_fn()
            if actual not in self.options:
                raise ValueError(f"question {self.id}: the pipeline says {actual!r}, not one of {self.options}")
            self._answer = (actual, why)
        return self._answer


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
    print(f"actual: {actual} — {mark}\n{why}")
    return right
