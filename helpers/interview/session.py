"""The mock interview: questions drawn from the cards no lesson asks (held back for it), answered before the
model answer is shown, each with the follow-ups an interviewer asks next, scored by the rubric points the learner ticks, plus live tasks graded by the exercise checker.

:class:`MockInterview` is a widget (one question at a time) with a plain-Python API that the tests and
the browser drive alike: :meth:`answer`, :meth:`reveal`, :meth:`tick`, :meth:`next`, :meth:`reshuffle`,
:meth:`record` (a live task's :class:`helpers.exercises.Grade`) and :meth:`summary`.
"""

from __future__ import annotations

import html
from dataclasses import dataclass, field
from typing import Any

from . import Card, card, draw

__all__ = ["MockInterview", "Summary"]


@dataclass
class _Asked:
    card: Card
    answer: str = ""
    revealed: bool = False
    ticked: set[int] = field(default_factory=set)


@dataclass
class Summary:
    """Score per topic, the live tasks, and the lessons to revisit."""

    rows: list[dict[str, Any]]
    tasks: list[dict[str, Any]]
    revisit: list[str]

    @property
    def answered(self) -> int:
        return sum(r["answered"] for r in self.rows)

    def text(self) -> str:
        lines = [f"mock interview: {self.answered} of {len(self.rows)} questions answered"]
        labels = [r["topic"] for r in self.rows] + [f"live task {t['id']}" for t in self.tasks]
        width = max(map(len, labels), default=0)
        for r in self.rows:
            state = (f"{r['covered']}/{r['points']} points" if r["revealed"] else
                     ("answered, not yet checked" if r["answered"] else "not answered"))
            lines.append(f"  {r['topic']:<{width}}  {state}")
        for t in self.tasks:
            lines.append(f"  {'live task ' + t['id']:<{width}}  {'passed' if t['passed'] else 'not yet passed'}")
        lines.append("revisit: " + (", ".join(self.revisit) if self.revisit else "nothing — well done"))
        return "\n".join(lines)

    def __repr__(self) -> str:
        return self.text()

    def _repr_html_(self) -> str:
        e = html.escape
        body = "".join(
            f"<tr data-topic='{e(r['topic'])}'><td>{e(r['topic'])}</td><td>{e(r['kind'])}</td>"
            f"<td>{r['covered'] if r['revealed'] else '—'}/{r['points']}</td>"
            f"<td>{'answered' if r['answered'] else 'not answered'}</td><td><code>{e(r['lesson'])}</code></td></tr>"
            for r in self.rows)
        tasks = "".join(f"<li data-task='{e(t['id'])}' data-passed='{str(t['passed']).lower()}'>{e(t['id'])}: "
                        f"{'✔ passed' if t['passed'] else 'not yet passed'}</li>" for t in self.tasks)
        revisit = ", ".join(f"<code>{e(r)}</code>" for r in self.revisit) or "nothing — well done"
        return (f"<div class='exportlab-interview-summary' data-answered='{self.answered}'>"
                f"<b>Mock interview: {self.answered} of {len(self.rows)} questions answered</b>"
                "<table><tr><th>topic</th><th>kind</th><th>rubric points</th><th>your answer</th><th>lesson</th></tr>"
                f"{body}</table>{f'<p>Live tasks:</p><ul>{tasks}</ul>' if tasks else ''}"
                f"<p><b>Revisit:</b> {revisit}</p></div>")


class MockInterview:
    """A seeded draw of interview cards, asked one at a time.

    A question's model answer and rubric appear only after :meth:`reveal`; the learner then ticks the
    rubric points their own answer covered. A topic scores the share of its points covered; a topic
    under two thirds, or a question left unanswered, sends the learner back to its lesson.
    """

    def __init__(self, n: int = 6, seed: int = 0, card_ids: list[str] | None = None):
        self.n = n
        self.seed = seed
        self._fixed = card_ids
        self.tasks: dict[str, bool] = {}
        self._widget: Any = None
        self._deal()

    # ----- plain-Python API ---------------------------------------------------------------------
    def _deal(self) -> None:
        cards = [card(i) for i in self._fixed] if self._fixed else draw(self.n, self.seed, held_back=True)
        self.asked = [_Asked(c) for c in cards]
        self.index = 0
        self._refresh()

    @property
    def current(self) -> _Asked:
        return self.asked[self.index]

    def reshuffle(self) -> None:
        """Draw another set of questions (the next seed)."""
        self.seed += 1
        self._fixed = None
        self._deal()

    def answer(self, text: str) -> None:
        self.current.answer = text
        self._refresh()

    def reveal(self) -> str:
        """Show the model answer and rubric of the current question; returns the model answer."""
        if self._widget is not None:
            self.current.answer = self._widget.text.value
        self.current.revealed = True
        self._refresh()
        return self.current.card.answer

    def tick(self, point: int, covered: bool = True) -> None:
        """Mark rubric point ``point`` (0-based) of the current question as covered by your answer."""
        if not self.current.revealed:
            raise RuntimeError("reveal the model answer first: you tick the points you covered against it")
        (self.current.ticked.add if covered else self.current.ticked.discard)(point)
        self._refresh(keep_rubric=True)

    def next(self) -> None:
        if self._widget is not None:
            self.current.answer = self._widget.text.value
        self.index = (self.index + 1) % len(self.asked)
        self._refresh()

    def record(self, grade: Any) -> Any:
        """Keep a live task's grade (what ``exercises.check`` returns) for the summary; returns it."""
        self.tasks[grade.exercise_id] = bool(grade.passed) or self.tasks.get(grade.exercise_id, False)
        return grade

    def summary(self) -> Summary:
        rows = []
        revisit: list[str] = []
        for a in self.asked:
            c = a.card
            rows.append({"id": c.id, "topic": c.topic, "kind": c.kind, "lesson": c.lesson, "points": len(c.points),
                         "covered": len(a.ticked), "revealed": a.revealed, "answered": bool(a.answer.strip())})
            weak = not a.answer.strip() or not a.revealed or len(a.ticked) < 2 * len(c.points) / 3
            if weak and c.lesson not in revisit:
                revisit.append(c.lesson)
        from ..exercises import get

        tasks = []
        for task_id, passed in sorted(self.tasks.items()):
            tasks.append({"id": task_id, "passed": passed})
            if not passed:
                task = get(task_id)
                for lesson in task.revisit or (task.lesson,):
                    if lesson not in revisit:
                        revisit.append(lesson)
        return Summary(rows, tasks, revisit)

    # ----- the widget ---------------------------------------------------------------------------
    def _build(self) -> Any:
        import ipywidgets as w

        box = w.VBox()
        box.add_class("exportlab-mock-interview")
        box.header = w.HTML()
        box.question = w.HTML()
        box.text = w.Textarea(placeholder="Your answer, as you would say it (about 30 seconds)…",
                              layout=w.Layout(width="100%", height="7em"))
        auto = w.Layout(width="auto")  # the whole label, however long
        box.reveal_button = w.Button(description="Reveal model answer", button_style="primary", icon="eye", layout=auto)
        box.next_button = w.Button(description="Next question", icon="arrow-right", layout=auto)
        box.shuffle_button = w.Button(description="Reshuffle", icon="random", tooltip="draw other questions",
                                      layout=auto)
        box.answer_area = w.HTML()
        box.answer_area.add_class("exportlab-interview-answer")
        box.rubric = w.VBox()
        box.score = w.HTML()
        box.score.add_class("exportlab-interview-score")
        box.reveal_button.on_click(lambda _b: self.reveal())
        box.next_button.on_click(lambda _b: self.next())
        box.shuffle_button.on_click(lambda _b: self.reshuffle())
        box.children = [box.header, box.question, box.text,
                        w.HBox([box.reveal_button, box.next_button, box.shuffle_button]),
                        box.answer_area, box.rubric, box.score]
        return box

    @property
    def widget(self) -> Any:
        if self._widget is None:
            self._widget = self._build()
            self._refresh()
        return self._widget

    def _refresh(self, keep_rubric: bool = False) -> None:
        box = self._widget
        if box is None:
            return
        import ipywidgets as w

        a = self.current
        c = a.card
        box.header.value = (f"<span data-index='{self.index}' data-seed='{self.seed}'>question {self.index + 1} of "
                            f"{len(self.asked)} · {html.escape(c.topic)} · {html.escape(c.kind)}</span>")
        box.question.value = f"<p class='exportlab-interview-question'><b>{html.escape(c.question)}</b></p>"
        if not keep_rubric:
            box.text.value = a.answer
        if a.revealed:
            from . import _render_answer

            box.answer_area.value = _render_answer(c, with_rubric=False)
            if not keep_rubric:
                boxes = []
                for i, point in enumerate(c.points):
                    check = w.Checkbox(value=i in a.ticked, description=point, indent=False,
                                       layout=w.Layout(width="100%"))
                    check.add_class("exportlab-rubric-point")
                    check.observe(lambda change, i=i: self.tick(i, change["new"]), names="value")
                    boxes.append(check)
                box.rubric.children = [w.HTML("<b>Tick what your answer covered:</b>"), *boxes]
        else:
            box.answer_area.value = ""
            box.rubric.children = []
        s = self.summary()
        checked = [r for r in s.rows if r["revealed"]]
        points = sum(r["points"] for r in checked)
        covered = sum(r["covered"] for r in checked)
        box.score.value = (f"<span data-covered='{covered}' data-points='{points}'>score so far: {covered}/{points} "
                           f"rubric points over {len(checked)} checked answer(s)</span>")

    def _repr_mimebundle_(self, **kwargs: Any) -> dict[str, Any]:
        bundle = self.widget._repr_mimebundle_(**kwargs)
        bundle["text/plain"] = (f"Mock interview: {len(self.asked)} questions (seed {self.seed}); answer each before "
                                "revealing the model answer")
        return bundle
