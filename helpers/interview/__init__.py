"""Interview questions, model answers and rubrics: one source for the lessons, the mock interview
(the last lesson) and the printable answer cards (``make cards``).

A :class:`Card` holds a question, a 30-second model answer, the three points an interviewer listens
for, its topic and kind, the lesson to revisit, and the follow-ups an interviewer asks next ("why?",
"what if …?"), each with its own answer. Lessons end with :func:`ask` (the question, with the model answer
behind a button). A card ``held_back`` is asked by no lesson: the mock interview draws from those
(:func:`draw` with ``held_back=True``), so its questions are new to a learner who did every lesson.
"""

from __future__ import annotations

import html
import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["Card", "KINDS", "cards", "card", "ask", "draw", "topics", "cards_html"]

KINDS = ("conceptual", "constraints", "trade-off", "diagnosis")


@dataclass(frozen=True)
class Card:
    """One interview question with its model answer and rubric."""

    id: str
    lesson: str  # the notebook stem to revisit ("NN_name", as in helpers.course)
    topic: str
    kind: str
    question: str
    answer: str  # what a strong candidate says in about 30 seconds
    points: tuple[str, ...]  # what the interviewer listens for (three or more)
    follow_ups: tuple[tuple[str, str], ...] = ()  # (the interviewer's next question, its model answer)
    held_back: bool = False  # for the mock interview only: no lesson asks it

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"card {self.id}: kind must be one of {KINDS}, got {self.kind!r}")
        if len(self.points) < 3:
            raise ValueError(f"card {self.id}: give at least three rubric points")


def _load() -> dict[str, Card]:
    from .. import course

    return course.by_id("CARDS")


def cards(lesson: str | None = None) -> list[Card]:
    """Every card (or a lesson's), in lesson order."""
    return [c for c in _load().values() if lesson is None or c.lesson == lesson]


def card(card_id: str) -> Card:
    found = _load()
    if card_id not in found:
        raise KeyError(f"no interview card {card_id!r}; there are: {', '.join(found)}")
    return found[card_id]


def topics() -> list[str]:
    return sorted({c.topic for c in _load().values()})


def draw(n: int, seed: int = 0, kinds: Sequence[str] | None = None, held_back: bool | None = None) -> list[Card]:
    """``n`` cards drawn with ``seed``, spread over topics (one per topic before any topic repeats); with
    ``held_back`` True (False), only cards no lesson asks (only the lessons' own)."""
    rng = random.Random(seed)
    pool = [c for c in _load().values()
            if (kinds is None or c.kind in kinds) and (held_back is None or c.held_back == held_back)]
    by_topic: dict[str, list[Card]] = {}
    for c in pool:
        by_topic.setdefault(c.topic, []).append(c)
    for group in by_topic.values():
        rng.shuffle(group)
    order = sorted(by_topic)
    rng.shuffle(order)
    picked: list[Card] = []
    while len(picked) < min(n, len(pool)):
        for topic in order:
            if by_topic[topic] and len(picked) < n:
                picked.append(by_topic[topic].pop())
    return picked


def ask(card_id: str):
    """The lesson's interview question: the question now, the model answer and rubric on a click."""
    from ._widgets import InterviewQuestion

    return InterviewQuestion(card(card_id))


def cards_html(selected: Sequence[Card] | None = None, title: str = "exportlab · interview answer cards") -> str:
    """One self-contained HTML page: per card the question, the 30-second answer, the points an
    interviewer listens for, and the lesson to revisit (print it: one card per box)."""
    chosen = list(selected) if selected is not None else cards()
    e = html.escape
    boxes = []
    for c in chosen:
        points = "".join(f"<li>{e(p)}</li>" for p in c.points)
        follow = "".join(f"<dt>{e(q)}</dt><dd>{e(a)}</dd>" for q, a in c.follow_ups)
        boxes.append(
            f"<section class='card' data-card='{e(c.id)}' data-lesson='{e(c.lesson)}'>"
            f"<p class='meta'>{e(c.topic)} · {e(c.kind)} · revisit <code>{e(c.lesson)}</code></p>"
            f"<h2>{e(c.question)}</h2><p class='answer'>{e(c.answer)}</p>"
            f"<p class='listen'>An interviewer listens for:</p><ul>{points}</ul>"
            + (f"<p class='listen'>Then asks:</p><dl>{follow}</dl>" if follow else "") + "</section>")
    style = ("body{font-family:system-ui,sans-serif;max-width:60em;margin:1.5em auto;color:#222}"
             ".card{border:1px solid #bbb;border-radius:8px;padding:.8em 1.2em;margin:1em 0;break-inside:avoid}"
             ".card h2{font-size:1.1em;margin:.3em 0}.meta{color:#666;font-size:.85em;margin:0}"
             ".answer{line-height:1.45}.listen{font-weight:bold;margin-bottom:.2em}"
             "@media print{.card{page-break-inside:avoid}}")
    lessons = sorted({c.lesson for c in chosen})
    return ("<!doctype html><html lang='en'><head><meta charset='utf-8'>"
            f"<title>{e(title)}</title><style>{style}</style></head><body>"
            f"<h1>{e(title)}</h1><p>{len(chosen)} cards from {len(lessons)} lessons. Say the answer aloud in about "
            "thirty seconds, then check the points.</p>" + "".join(boxes) + "</body></html>\n")


def _render_answer(c: Card, with_rubric: bool = True) -> str:
    def e(text: str) -> str:  # text nodes: quotes need no escaping (answers quote torch's messages)
        return html.escape(text, quote=False)

    points = "".join(f"<li>{e(p)}</li>" for p in c.points) if with_rubric else ""
    # each follow-up's answer stays folded: answer the follow-up yourself, then open it
    follow = "".join(f"<details class='exportlab-follow-up'><summary><b>Follow-up:</b> {e(q)}</summary><p>{e(a)}</p>"
                     "</details>" for q, a in c.follow_ups)
    return (f"<div class='exportlab-model-answer' data-card='{html.escape(c.id)}'><b>Model answer</b>"
            f"<p>{e(c.answer)}</p>"
            + (f"<b>An interviewer listens for</b><ul>{points}</ul>" if with_rubric else "")
            + (f"<p><b>The interviewer follows up</b> (answer first, then open):</p>{follow}" if follow else "")
            + "</div>")


def describe(c: Card) -> dict[str, Any]:
    return {"id": c.id, "lesson": c.lesson, "topic": c.topic, "kind": c.kind, "question": c.question}
