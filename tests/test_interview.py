"""Interview cards (one source for the lessons, the mock interview and the printable cards), the mock
interview session, and `make cards`."""

from __future__ import annotations

import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

import pytest

from helpers import course, exercises, interview
from helpers.interview.session import MockInterview

ROOT = Path(__file__).resolve().parent.parent
# Every lesson has interview cards, except the mock interview itself: it asks the other lessons' cards.
LESSONS = sorted(item.name for item in course.lessons()
                 if "MockInterview(" not in (ROOT / "notebooks" / "src" / f"{item.name}.py").read_text())


class _Cards(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.cards: list[dict[str, str | None]] = []

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "section" and "card" in (a.get("class") or "").split():
            self.cards.append(a)


def test_every_card_is_complete_and_every_lesson_has_one():
    cards = interview.cards()
    assert len({c.id for c in cards}) == len(cards)
    for c in cards:
        assert c.lesson in LESSONS, c.id
        assert c.question.rstrip()[-1:] in "?." and len(c.answer.split()) >= 40 and len(c.points) >= 3, c.id
        assert c.id.split(".")[0] == c.lesson[:2], c.id
    assert {c.lesson for c in cards} == set(LESSONS), set(LESSONS) - {c.lesson for c in cards}
    assert set(interview.KINDS) <= {c.kind for c in cards}


def test_make_cards_writes_one_page_with_every_lesson_and_topic(tmp_path):
    out = tmp_path / "cards.html"
    done = subprocess.run([sys.executable, "-m", "helpers.interview", "cards", str(out)], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    page = out.read_text(encoding="utf-8")
    parser = _Cards()
    parser.feed(page)
    assert len(parser.cards) == len(interview.cards())
    assert {c["data-lesson"] for c in parser.cards} == set(LESSONS)
    for topic in interview.topics():
        assert topic in page
    assert "<script" not in page and "http" not in page  # self-contained: prints and opens offline


def test_draw_is_seeded_and_spreads_over_topics():
    a, b = interview.draw(6, seed=3), interview.draw(6, seed=3)
    assert [c.id for c in a] == [c.id for c in b]
    n_topics = len(interview.topics())
    assert len({c.topic for c in a}) == min(6, n_topics)
    assert [c.id for c in interview.draw(6, seed=4)] != [c.id for c in a] or len(interview.cards()) <= 6


def test_a_lessons_question_hides_the_answer_until_asked():
    first = interview.cards()[0]
    widget = interview.ask(first.id)
    assert widget.output.value == "" and first.answer not in widget._repr_mimebundle_()["text/plain"]
    assert widget.reveal() == first.answer and first.answer in widget.output.value


def test_mock_interview_session_scores_and_names_lessons_to_revisit():
    cards = interview.cards()
    session = MockInterview(card_ids=[c.id for c in cards[:2]])
    widget = session.widget  # built the way the notebook shows it
    assert widget.answer_area.value == "" and not widget.rubric.children  # nothing revealed yet
    with pytest.raises(RuntimeError, match="reveal the model answer first"):
        session.tick(0)
    session.answer("export traces once, so Python decisions are taken at export")
    assert session.reveal() == cards[0].answer
    assert cards[0].answer in widget.answer_area.value and len(widget.rubric.children) == len(cards[0].points) + 1
    for i in range(len(cards[0].points)):
        session.tick(i)
    session.next()
    summary = session.summary()
    assert summary.answered == 1 and summary.rows[0]["covered"] == len(cards[0].points)
    assert summary.revisit == [cards[1].lesson]  # the unanswered question's lesson only
    assert "data-covered" in widget.score.value
    grade = exercises.get("12.camera_rejected").check(lambda frame: frame)
    session.record(grade)
    summary = session.summary()
    assert summary.tasks == [{"id": "12.camera_rejected", "passed": False}]
    assert "06_static_shapes" in summary.revisit and "not yet passed" in summary.text()
    before = [a.card.id for a in session.asked]
    session.reshuffle()
    assert session.seed == 1 and len(session.asked) == min(6, len(cards))
    assert [a.card.id for a in session.asked] != before or len(cards) <= 2


def _asked_by_lessons() -> set[str]:
    import re

    sources = "".join(p.read_text() for p in (ROOT / "notebooks" / "src").glob("*.py"))
    return set(re.findall(r'interview\.ask\("([^"]+)"\)', sources))


def test_the_mock_interview_asks_what_no_lesson_asked():
    held = {c.id for c in interview.cards() if c.held_back}
    asked = _asked_by_lessons()
    assert len(held) >= 6 and not held & asked, held & asked
    assert {c.id for c in interview.cards() if not c.held_back} <= asked  # a lesson's own card is asked by it
    for seed in range(5):
        assert {a.card.id for a in MockInterview(seed=seed).asked} <= held
    assert len({c.topic for c in interview.draw(6, seed=0, held_back=True)}) == 6  # six topics, one question each


def test_held_back_questions_have_follow_ups_why_and_what_if():
    for c in interview.cards():
        if not c.held_back:
            continue
        questions = [q for q, _ in c.follow_ups]
        assert any(q.startswith("Why") for q in questions) and any(q.startswith("What if") for q in questions), c.id
        assert all(q.rstrip().endswith("?") and len(a.split()) >= 25 for q, a in c.follow_ups), c.id


def test_a_follow_ups_answer_is_folded_until_opened():
    import html

    c = next(c for c in interview.cards() if c.follow_ups)
    session = MockInterview(card_ids=[c.id])
    widget = session.widget
    assert "Follow-up" not in widget.answer_area.value  # nothing before the reveal
    session.reveal()
    shown = widget.answer_area.value
    for question, answer in c.follow_ups:
        assert f"<summary><b>Follow-up:</b> {html.escape(question, quote=False)}</summary>" in shown
        before = shown[:shown.index(html.escape(answer, quote=False))]
        assert before.rfind("<details") > before.rfind("</details>"), question  # the answer sits inside <details>
    page = interview.cards_html([c])
    assert all(html.escape(question) in page for question, _ in c.follow_ups)
