"""Every prediction of the lessons (00-11): its reveal runs the real pipeline and returns one of its options,
and the answer each returns today is asserted, so a change of behaviour in torch or ExecuTorch fails here
instead of silently changing what a lesson teaches. (That no stored notebook reveals an answer is
tests/test_notebooks_hold_questions.py.)"""

from __future__ import annotations

from pathlib import Path

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
    "06.camera_frame": "rejected",
    "06.same_pixels": "rejected",
    "06.channels_last": "rejected",
    "07.one_frame": "diverge",
    "07.wide_frame": "runs it",
    "07.auto_tokens": "rejects it",
    "07.auto_loop": "a static batch, silently",
    "08.segmenter_delegation": "all but one operator",
    "08.classifier_portable": "0",
    "08.raise_max": "only the arena",
    "09.pad_to_512": "about three quarters",
    "09.bucket_257": "seq_512",
    "09.fourth_bucket": "a few KB",
    "10.batch_loop": "input outside the export contract",
    "11.smoke_vs_doctor": "fail",
    "11.config_branch": "pass",
    "11.batch_loop_static": "pass",
    "11.segmenter_min_delegated": "fail",
    "13.doctor_example_values": "PASS",
    "13.int_position": "the runtime refuses a call",
    "13.prefill_arena": "prefill (Dim 1–32)",
    "13.runner_plain": "it refuses the program",
    "13.shared_cache": "the first the same, then different",
    "13.slot_cost": "several times the cache's own 16 KB",
    "13.tokens_match": "all 12 the same",
    "14.broken_promise": "returns rows",
    "14.draft_report": "no issues",
    "14.where_it_stops": "lowering fails",
    "15.past_the_cap": "returns it halved 8 times",
    "15.scan_size": "the same size",
    "15.while_loop": "lowering fails",
    "16.key_order": "returns a wrong answer, silently",
    "16.recorded_batches": "refuses it",
    "17.train_mode": "differ from call to call",
    "17.running_mean": "repeat the first call's output",
    "17.numpy_default": "fails",
    "18.sort_loads": "fails to load its method",
    "18.dead_pixel_stage": "the portable .pte",
}
# words the explanation must contain: the reveal explains with the pipeline's own evidence
EVIDENCE = {
    "06.camera_frame": "Expected shape (1, 3, 64, 64), but received (1, 3, 48, 64)",
    "06.channels_last": "received (1, 64, 64, 3)",
    "07.one_frame": "[nan, nan]",
    "07.auto_tokens": "maximum capacity of 16 elements",
    "07.auto_loop": "float32[3, 4]",
    "08.segmenter_delegation": "dynamic output sizes are not supported",
    "08.raise_max": "655,424 → 2,621,504",
    "10.batch_loop": "device input",
    "14.broken_promise": "returned 15 rows",
    "15.past_the_cap": "its peak is 3.91, still above 1",
    "15.while_loop": "Unsupported control flow operator: while_loop",
    "16.key_order": "batch_noise, batch_signal",
    "16.recorded_batches": "maximum capacity of 16 elements to 40 elements",
    "17.numpy_default": ".numpy() is not supported for tensor subclasses",
    "17.running_mean": "the third output differs from eager by",
    "18.sort_loads": "kernel 'aten::sort.values' not found",
}

ROOT = Path(__file__).resolve().parent.parent
QUESTIONS = questions.catalog()


def test_every_question_has_an_expected_answer():
    assert {q.id for q in QUESTIONS} == set(EXPECTED)


@pytest.mark.parametrize("question", QUESTIONS, ids=lambda q: q.id)
def test_reveal_runs_the_pipeline_and_gives_the_expected_option(question):
    outcome = question.outcome()
    assert outcome.actual == EXPECTED[question.id], (question.id, outcome)
    assert len(outcome.why) > 40 and question.prompt.strip()
    actual, text = question.actual()
    assert actual == outcome.actual and EVIDENCE.get(question.id, "") in text, text


@pytest.mark.parametrize("question", QUESTIONS, ids=lambda q: q.id)
def test_the_reveal_says_why_each_wrong_option_is_wrong(question):
    """Each wrong option gets its own reason, not one sentence pasted under every option, and the learner reads
    it under the option's name."""
    outcome = question.outcome()
    wrong = [o for o in question.options if o != outcome.actual]
    assert sorted(outcome.why_not) == sorted(wrong)
    reasons = [outcome.why_not[o] for o in wrong]
    assert all(len(r) > 30 for r in reasons) and len(set(reasons)) == len(reasons), reasons
    _, text = question.actual()
    assert all(f"Not {o!r}: {outcome.why_not[o]}" in text for o in wrong), text


def test_a_wrong_prediction_in_code_reads_why_it_is_wrong_right_after_why(capsys):
    assert questions.reveal("01.counted_four", "rejected") is False
    lines = capsys.readouterr().out.splitlines()
    outcome = questions.get("01.counted_four").outcome()
    assert lines[1] == outcome.why and lines[2].startswith("Not 'rejected':") and lines[3].startswith("Not 'match':")


def test_a_reveal_that_leaves_a_wrong_option_unexplained_is_refused():
    from helpers.questions import Question, Reveal

    silent = Question("99.x", "99_x", "Which?", ("a", "b", "c"), lambda: Reveal("a", "a, because", {"b": "not b"}))
    with pytest.raises(ValueError, match=r"unexplained: \['c'\]"):
        silent.actual()
    stray = Question("99.y", "99_y", "Which?", ("a", "b"), lambda: Reveal("a", "a, because", {"b": "x", "a": "y"}))
    with pytest.raises(ValueError, match=r"not a wrong option: \['a'\]"):
        stray.actual()


@pytest.mark.parametrize("question", QUESTIONS, ids=lambda q: q.id)
def test_the_lesson_asks_the_question_before_anything_answers_it(question):
    source = (ROOT / "notebooks" / "src" / f"{question.lesson}.py").read_text()
    asks = [f'questions.ask("{question.id}")', f'questions.reveal("{question.id}", my_prediction)']
    assert any(a in source for a in asks), question.id
    assert ".answer(" not in source and "check_prediction" not in source and "PredictThenReveal" not in source
    if f'questions.reveal("{question.id}"' in source:
        cell = source[:source.index(f'questions.reveal("{question.id}"')].rsplit("# %%", 1)[1]
        assert "my_prediction = None" in cell, "a code prediction starts empty"


@pytest.mark.parametrize("question_id, actual", [("01.counted_four", "diverge"), ("06.channels_last", "rejected")])
def test_reveal_without_a_prediction_reveals_nothing(capsys, question_id, actual):
    assert questions.reveal(question_id, None) is None
    out = capsys.readouterr().out
    assert out.startswith("No prediction yet") and actual not in out.split(":", 1)[0]
