"""Lesson 10 (its module, course.lesson(10)): every drill's answer comes from the real tools; the drill shows
what the user saw without naming the answer; a check with no answer reveals nothing; draft_export's
report; the copyable CI test passes on its CONFIG and fails on a drill's."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from torch.export import Dim

from helpers import course, models
from helpers.lessons import shapes as S

ROOT = Path(__file__).resolve().parent.parent
D = course.lesson(10)
EXPECTED = {
    "sign_router": "data-dependent control flow",
    "one_frame": "silent specialization",
    "flag": "silent specialization",
    "batch_gate": "guard on a dynamic dimension",
    "steps": "input outside the export contract",
    "median": "unsupported operator",
    "any_size": "partial delegation",
    "loop": "data-dependent control flow",
    "bounded_camera": "healthy",
    "no_max": "input outside the export contract",
}


FIELD = {
    "early_exit": "data-dependent control flow",
    "temperature": "silent specialization",
    "camera_bytes": "input outside the export contract",
    "ceil_pool": "guard on a dynamic dimension",
    "rank": "unsupported operator",
    "flatten": "partial delegation",
}
LATER = {
    "positions": "data-dependent size",
    "refine": "unsupported operator",
    "recorded_batches": "input outside the export contract",
    "photo_scores": "training-mode export",
    "dead_sensor": "delegate numerics",
    "next_word": "silent specialization",
}
ALL = [*D.DRILLS, *D.FIELD_REPORTS, *D.LATER_REPORTS]


@pytest.mark.parametrize("reports, expected", [(D.FIELD_REPORTS, FIELD), (D.LATER_REPORTS, LATER)],
                         ids=["field reports", "after lesson 18"])
def test_field_reports_are_on_models_no_lesson_shows(reports, expected):
    assert {d.name: d.expected for d in reports} == expected
    shown = {cls.__name__ for cls in vars(models).values() if isinstance(cls, type)}
    shown |= {cls.__name__ for cls in vars(S).values() if isinstance(cls, type)}
    for number in range(11, 19):  # and no later lesson's module defines them
        shown |= {cls.__name__ for cls in vars(course.lesson(number)).values() if isinstance(cls, type)}
    built = {type(d.build()[0]).__name__ for d in reports}
    assert len(built) >= 4 and not built & shown, built & shown
    notebooks = "".join(p.read_text() for p in (ROOT / "notebooks" / "src").glob("*.py"))
    assert not [name for name in built if name in notebooks], built  # not defined or used on any page


def test_every_drill_has_an_expected_answer_and_both_tracks_appear():
    assert {d.name: d.expected for d in D.DRILLS} == EXPECTED
    assert set(EXPECTED.values()) <= set(D.ANSWERS)
    assert {d.track for d in D.DRILLS} == {"shapes", "control flow"}


@pytest.mark.parametrize("drill", ALL, ids=lambda d: d.name)
def test_investigation_finds_the_answer(drill):
    finding = D.investigate(drill)
    assert finding.answer == {**EXPECTED, **FIELD, **LATER}[drill.name], str(finding)
    assert finding.evidence and finding.fix


@pytest.mark.parametrize("drill", ALL, ids=lambda d: d.name)
def test_a_drill_describes_the_symptom_not_the_category(drill):
    """Our words (the symptom, the export call, the code) never name the answer; what the user saw is the tools' own
    message or output, quoted whole from a real run, whatever words it uses."""
    seen = D.seen(drill)
    text = str(D.brief(drill))
    assert seen in text
    text = text.replace(seen, "").lower()
    for word in ("data-dependent", "guard", "constraint", "delegat", "unsupported", "contract", "speciali",
                 "portable", "healthy", "numeric", "training mode", "training-mode", "unbounded", "bound "):
        assert word not in text, (drill.name, word)
    assert "def forward" in text and drill.symptom.lower() in text


@pytest.mark.parametrize("name, words", [
    ("sign_router", "export failed — GuardOnDataDependentSymNode: Could not guard on data-dependent expression"),
    ("batch_gate", "export failed — UserError: Constraints violated (batch)!"),
    ("steps", "the app's log: The 1-th input of method should have the same value as the input_evalue, but got 3 and 5"),
    ("median", "lower failed — SpecViolationError: Operator torch._ops.aten.median.dim is not in Core ATen opset"),
    ("one_frame", "no error; the app's output: [nan, nan]"),
    ("no_max", "the app's log: Attempted to resize a bounded tensor with a maximum capacity of 32 elements"),
    ("camera_bytes", "the app's log: Input 0 has unexpected scalar type: expected Float but was Byte"),
    ("ceil_pool", "export failed — UserError: Constraints violated (height, width)!"),
    ("rank", "load failed — RuntimeRejectedError: the ExecuTorch runtime refused method 'forward': kernel "
             "'aten::sort.values' not found"),
    ("positions", "lower failed — RuntimeError: Cannot evaluate a finite upper bound for symbolic expression"),
    ("refine", "lower failed — InternalError: Failed with error: Unsupported control flow operator: while_loop"),
    ("recorded_batches", "the app's log: Attempted to resize a bounded tensor with a maximum capacity of 16 elements "
                         "to 40 elements"),
    ("photo_scores", "no error; the app's output (2×3): 10 calls on the same input do not all agree"),
    ("dead_sensor", "no error; the app's output: [0.146, 0.754]"),
    ("next_word", "no error; the word the app suggests after each of the 6 calls: ["),
])
def test_what_the_user_saw_is_the_real_message(name, words):
    assert D.seen(name).strip().startswith(words), D.seen(name)


def test_the_answers_are_defined_before_the_first_drill():
    assert set(D.DEFINITIONS) == set(D.ANSWERS) == set(D.FIRST_ANSWERS) | set(D.LATER_ANSWERS)
    source = (ROOT / "notebooks" / "src" / "10_diagnosis_drills.py").read_text()
    assert source.index("drills.categories()") < source.index('drills.brief("')
    assert source.index("drills.categories(drills.LATER_ANSWERS)") < source.index("drills.field_reports(drills.LATER")
    assert set(LATER.values()) >= set(D.LATER_ANSWERS)  # every new answer is some report's
    assert set(FIELD.values()) | set(EXPECTED.values()) <= set(D.FIRST_ANSWERS)  # the first parts need no new one


def test_delegate_numerics_is_told_from_a_specialization_by_the_portable_program():
    """The same NaN frame: the delegated program drops the NaN, the portable-only one keeps it as eager does. Without
    the dead sensor, the frame matches everywhere (the model is not wrong, the delegate's handling of NaN is)."""
    report = D.drill("dead_sensor")
    model, example, _ = report.build()
    (frame,) = report.device_input()
    assert torch.isnan(frame).sum() == 1 and torch.isnan(model(frame)).all()
    xnnpack = D.lower(model, example)
    portable = D.lower(model, example, backend="portable")
    assert torch.isfinite(xnnpack.run_raw(frame)[0]).all()
    assert torch.isnan(portable.run_raw(frame)[0]).all()
    clean = torch.nan_to_num(frame, nan=0.5)
    assert torch.allclose(xnnpack.run_raw(clean)[0], model(clean), atol=1e-5)


def test_training_mode_is_read_from_the_build_not_from_the_module():
    """The investigator never asks the module whether it was training: the program's own operators (dropout) or the
    lowering's refusal (batch norm's training operator, lesson 17's NormScorer) say so. The same scorer exported in
    eval mode is healthy."""
    example = (torch.randn(2, 6, generator=torch.Generator().manual_seed(49)),)
    scorer_eval = D.Drill("photo_scores_eval", "", "", lambda: (D.PhotoScorer().eval(), example, None),
                          D.drill("photo_scores").device_input, "healthy")
    assert D.investigate(scorer_eval).answer == "healthy"
    lesson17 = course.lesson(17)
    frame = lesson17.frame(0, rows=2)
    norm = D.Drill("norm_in_training", "", "", lambda: (lesson17.as_trained(lesson17.NormScorer()), (frame,), None),
                   lambda: (frame,), "training-mode export")
    finding = D.investigate(norm)
    assert finding.answer == "training-mode export", str(finding)
    assert "_native_batch_norm_legit_functional" in " ".join(finding.evidence)


def test_check_without_an_answer_reveals_nothing_and_a_wrong_one_does_not_raise(capsys):
    assert D.check("sign_router", None) is None
    out = capsys.readouterr().out
    assert out.startswith("No answer yet") and not any(a in out for a in D.ANSWERS)
    assert D.check("sign_router", "not an answer") is None
    assert "is not one of the answers" in capsys.readouterr().out
    finding = D.check("sign_router", "healthy")  # wrong: reported, not raised
    out = capsys.readouterr().out
    assert finding.answer == "data-dependent control flow"
    assert "✗ not this time — you said 'healthy'" in out and "the tools say: data-dependent control flow" in out
    D.check("sign_router", "data-dependent control flow")
    assert "✓ right" in capsys.readouterr().out


def test_run_on_device_reproduces_the_refusal(tmp_path):
    _, art, _ = S.vision_program()
    path = art.save(tmp_path / "classifier.pte")
    outputs, log = D.run_on_device(path, (S.camera_frame(48, 64),))
    assert outputs is None and any("Attempted to resize a static tensor" in line for line in log)
    outputs, log = D.run_on_device(path, (S.camera_frame(64, 64),))
    assert outputs is not None and outputs[0].shape == (1, 4) and not log


def test_camera_options_all_fix_it_and_report_their_cost():
    rows = {r["option"].split(" (")[0]: r for r in D.compare_options(
        D.camera_options(), [S.camera_frame(h, w) for h, w in D.CAMERA_SIZES])}
    assert all(r["all device frames match eager"] for r in rows.values())
    assert rows["bounded Dims"]["arena bytes (largest method)"] > rows["normalize on the host"]["arena bytes (largest method)"]
    assert rows["buckets"][".pte bytes"] > rows["normalize on the host"][".pte bytes"]


def test_a_wrong_static_batch_is_outside_the_contract():
    drill = D.Drill("batch_loop", "", "", lambda: (models.BatchLoop(), (torch.randn(3, 4),), None),
                    lambda: (torch.randn(4, 4),), "input outside the export contract")
    assert D.investigate(drill).answer == drill.expected


def test_draft_export_lists_every_issue_where_export_stops_at_one():
    x = torch.randn(6, 8, generator=torch.Generator().manual_seed(0))
    batch = {"x": {0: Dim("batch", min=1, max=16)}}
    with pytest.raises(Exception, match="data-dependent"):
        torch.export.export(D.TwoIssues(), (x,), dynamic_shapes=batch)
    draft, issues = D.draft_issues(D.TwoIssues(), (x,), batch)
    assert {i["line"] for i in issues} == {"if x.shape[0] > 4:", "if x.sum() > 0:"}
    assert {"guard added", "data-dependent"} <= {i["kind"] for i in issues}
    assert any(i["expression"] == "x.shape[0] > 4" for i in issues)  # symbols renamed after the input
    ranges = [(int(r.lower), int(r.upper)) for s, r in draft.range_constraints.items() if not str(s).startswith("u")]
    assert ranges == [(5, 16)]  # the draft narrowed the batch to the example's branch: not for shipping


def test_the_ci_example_passes_on_its_config_and_fails_on_a_drills():
    ci = ROOT / "tests" / "test_export_ci_example.py"
    result = D.run_ci_example(ci)
    assert result["exit code"] == 0 and result["passed"] > 20 and not result["failed tests"]
    one_frame = '''
from helpers.models import ShapeBranch

MODEL = ShapeBranch().eval()
REFERENCE = MODEL
EXAMPLE = (torch.randn(1, 8, 4, generator=torch.Generator().manual_seed(1)),)
DYNAMIC_SHAPES = {"x": {1: Dim("frames", min=1, max=16)}}
INPUT_NAMES = ("x",)
DEVICE_INPUTS = []
ALLOWED_PORTABLE_OPS = {"aten_mean_dim", "aten_var_correction"}
ATOL, RTOL = 1e-4, 1e-4
'''
    failed = D.run_ci_example(ci, one_frame)
    assert failed["exit code"] == 1
    assert failed["failed tests"] and all("frames=1" in t for t in failed["failed tests"]), failed


def test_the_replays_in_the_background_report_what_a_run_in_this_process_reports():
    ci = ROOT / "tests" / "test_export_ci_example.py"
    background = D.start_ci_replays(ci, {"flag": D.CI_REPLAYS["flag"]})
    here = D.run_ci_example(ci, D.CI_REPLAYS["flag"])
    assert here["exit code"] == 1 and here["failed tests"], here  # the replay fails: the reference differs
    assert background.results() == {"flag": here}
    assert list(D.CI_REPLAYS) == ["one_frame", "flag", "any_size"]


def test_a_background_runner_that_dies_says_it_was_the_runner(monkeypatch):
    monkeypatch.setattr(D, "_WORKER_CODE", "import sys; sys.stderr.write('boom\\n'); sys.exit(3)")
    runs = D.start_ci_replays(ROOT / "tests" / "test_export_ci_example.py", {"flag": ""})
    with pytest.raises(RuntimeError, match=r"(?s)exit code 3 \(exportlab's runner, not a test's outcome\).*boom"):
        runs.results()
    with pytest.raises(FileNotFoundError, match="no CI test file"):
        D.start_ci_replays(ROOT / "tests" / "no_such_test.py")


def test_calls_in_a_row_pass_when_the_position_is_state_of_the_program():
    """next_word's model with its position kept in a buffer (state the program writes, as a KV cache's) instead of a
    Python attribute: one call at a time and the app's calls in a row all match, so the investigation does not call
    it a specialization; the report's own model, the same calls, is one."""
    import dataclasses

    class NextWordBuffered(D.NextWord):
        def __init__(self):
            super().__init__()
            self.register_buffer("count", torch.zeros((), dtype=torch.int64))

        def forward(self, word):
            x = self.embed(word)[0]
            self.typed.index_copy_(0, self.count.reshape(1), x.detach()[None])
            self.count.add_(1)
            seen = (torch.arange(self.typed.shape[0]) < self.count).unsqueeze(-1)
            return self.head(x + (self.typed * seen).sum(0) / self.count)

    fixed = dataclasses.replace(D.drill("next_word"), name="next_word_buffered",
                                build=lambda: (NextWordBuffered(), (torch.tensor([3]),), None))
    finding = D.investigate(fixed)
    assert finding.answer != "silent specialization", str(finding)
    assert any("6 calls in a row, state carried on both sides: every call matches" in e for e in finding.evidence)
    assert D.investigate(D.drill("next_word")).answer == "silent specialization"
