"""The predictions of lessons 00–05: every reveal runs the real pipeline and returns one of its options,
and the answer each returns today is asserted, so a change of behaviour in torch or ExecuTorch fails
here instead of silently changing what a lesson teaches."""

from __future__ import annotations

import pytest

from helpers import questions

EXPECTED = {
    "00.graph_if": "only the add",
    "01.flag_on": "diverge",
    "01.counted_four": "diverge",
    "02.sort_stage": "load",
    "02.static_gate_kind": "ok",
    "02.check_promise": "diverge",
    "03.zero_side": "false",
    "03.branch_delegation": "0",
    "04.heavy_count": "6",
    "04.heavy_faster": "torch.where",
    "05.portrait": "rejected",
    "05.hoisted_share": "all of it",
}

TRACK = [q for q in questions.catalog() if q.lesson[:2] <= "05"]


def test_every_question_of_the_track_has_an_expected_answer():
    assert {q.id for q in TRACK} == set(EXPECTED)


@pytest.mark.parametrize("question", TRACK, ids=lambda q: q.id)
def test_reveal_runs_the_pipeline_and_gives_the_expected_option(question):
    actual, why = question.reveal_fn()
    assert actual in question.options
    assert actual == EXPECTED[question.id], (question.id, actual, why)
    assert len(why) > 40 and question.prompt.strip()


@pytest.mark.parametrize("question", TRACK, ids=lambda q: q.id)
def test_the_lesson_asks_the_question_and_stores_no_answer(question):
    from pathlib import Path

    source = (Path(__file__).resolve().parent.parent / "notebooks" / "src" / f"{question.lesson}.py").read_text()
    assert f'questions.ask("{question.id}")' in source or f'questions.reveal("{question.id}", my_prediction)' in source
    assert ".answer(" not in source and "check_prediction" not in source


def test_reveal_without_a_prediction_reveals_nothing(capsys):
    assert questions.reveal("01.counted_four", None) is None
    out = capsys.readouterr().out
    assert out.startswith("No prediction yet") and "diverge" not in out.split(":", 1)[0]
