"""Lesson 10 (helpers.lessons.drills): every drill's answer comes from the real tools."""

from __future__ import annotations

import pytest
import torch

from helpers.lessons import drills as D
from helpers.lessons import shapes as S

EXPECTED = {
    "camera": "input outside the export contract",
    "sign_router": "data-dependent control flow",
    "one_frame": "silent specialization",
    "flag": "silent specialization",
    "batch_gate": "guard on a dynamic dimension",
    "steps": "input outside the export contract",
    "median": "unsupported operator",
    "any_size": "partial delegation",
    "loop": "data-dependent control flow",
    "bounded_camera": "healthy",
}


def test_every_drill_has_an_expected_answer():
    assert sorted(d.name for d in D.DRILLS) == sorted(EXPECTED)
    assert set(EXPECTED.values()) <= set(D.ANSWERS)
    assert {d.track for d in D.DRILLS} == {"shapes", "control flow"}


@pytest.mark.parametrize("drill", D.DRILLS, ids=lambda d: d.name)
def test_investigation_finds_the_answer(drill):
    finding = D.investigate(drill)
    assert finding.answer == EXPECTED[drill.name], str(finding)
    assert finding.evidence and finding.fix


def test_check_reports_right_and_wrong(capsys):
    drill = next(d for d in D.DRILLS if d.name == "sign_router")
    D.check(drill, "data-dependent control flow")
    assert "✓ right" in capsys.readouterr().out
    D.check(drill, "healthy")
    out = capsys.readouterr().out
    assert "not quite" in out and "actual: data-dependent control flow" in out


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
    from helpers import models

    drill = D.Drill("batch_loop", "", lambda: (models.BatchLoop(), (torch.randn(3, 4),), None),
                    lambda: (torch.randn(4, 4),))
    assert D.investigate(drill).answer == "input outside the export contract"
