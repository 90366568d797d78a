"""Lesson 11's gallery and report widget, driven headlessly with the real runtime behind the reports."""

from __future__ import annotations

import re

import pytest
import torch
from torch import nn
from torch.export import Dim

from helpers import doctor
from helpers.lessons import doctor as L


@pytest.fixture(scope="module")
def demo():
    return L.widget_demo()


def test_every_gallery_case_reaches_its_verdict(demo):
    explorer, interactions = demo
    assert len(interactions) == len(L.CASES) >= 10
    assert {expected for _, expected in interactions} == {"pass", "fail"}
    for values, expected in interactions:
        report = explorer.set(**values)
        assert explorer.verdict == expected == report.verdict, values
        assert f"data-verdict='{expected}'" in explorer.output.value
        assert report.exit_code == (0 if expected == "pass" else 1)


def test_failures_are_classified_and_located():
    reports = L.gallery_reports()
    kinds = {name: r.diagnosis.kind for name, r in reports.items() if not r.diagnosis.ok}
    assert kinds == {
        "ScaleOrShift · if on a tensor's value": "data_dependent",
        "WhileDouble · while on a tensor": "data_dependent",
        "BatchLoop · loop over a dynamic batch": "constraint_violation",
        "MedianCenter · unsupported operator": "unsupported_operator",
        "AssertsFinite · debug check in forward()": "data_dependent",
    }
    located = reports["AssertsFinite · debug check in forward()"].diagnosis
    assert located.source_line == "forward(): if self.check and not torch.isfinite(x).all():"
    assert located.location.startswith("helpers/lessons/doctor.py:")
    assert reports["MedianCenter · unsupported operator"].diagnosis.operator == "aten.median.default"


def test_the_size_one_divergence_is_inside_the_contract_and_the_fix_moves_it_out():
    reports = L.gallery_reports()
    broken = reports["ShapeBranch · frames ∈ [1, 32]"]
    (row,) = broken.failing_rows
    assert row.label == "frames = 1 (min)" and row.status == "diverge" and row.within_contract
    fixed = reports["ShapeBranch · frames ∈ [2, 32] (fixed)"]
    assert fixed.passed and not fixed.failing_rows
    (silent,) = fixed.silent_rows  # the device still runs one frame, and gets it wrong
    assert silent.label == "frames = 1 (min-1, outside)" and silent.status == "diverge"


def test_delegation_and_memory_are_measured_not_assumed():
    reports = L.gallery_reports()
    cond = reports["ScaleOrShiftCond · torch.cond (fixed)"].delegation
    where = reports["ScaleOrShiftWhere · torch.where (fixed)"].delegation
    assert cond.coverage < where.coverage  # XNNPACK cannot reach inside cond branches
    static = reports["TinyVision · static 64×64"]
    dynamic = reports["TinyVision · h, w ∈ [32, 128]"]
    assert static.delegation.coverage == dynamic.delegation.coverage == 1.0
    assert dynamic.arena_bytes > 3 * static.arena_bytes  # planned for 128×128 instead of 64×64


def test_html_rows_are_colour_coded_by_kind():
    html = doctor.to_html(L.gallery_reports()["ShapeBranch · frames ∈ [1, 32]"])
    rows = re.findall(r"<tr class='exportlab-probe' data-status='(\w+)' data-kind='(\w+)' "
                      r"data-within-contract='(\w+)' style='background:(#\w+)'", html)
    assert ("diverge", "diverge", "yes", "#f4b4b4") in rows
    assert ("rejected", "expected", "no", "#f3f3f3") in rows
    assert html.count("class='exportlab-verdict'") == 1
    # After the fix (frames ≥ 2), one frame is outside the contract and the device still runs it:
    fixed = doctor.to_html(L.gallery_reports()["ShapeBranch · frames ∈ [2, 32] (fixed)"])
    rows = re.findall(r"<tr class='exportlab-probe' data-status='(\w+)' data-kind='(\w+)' "
                      r"data-within-contract='(\w+)' style='background:(#\w+)'", fixed)
    assert ("diverge", "silent", "no", "#e3d3f2") in rows


def test_a_model_defined_in_a_cell_can_be_added(demo):
    explorer, _ = demo

    class Clip(nn.Module):
        def forward(self, x):
            return torch.clamp(x, -1, 1) * 2

    report = doctor.examine(Clip(), (torch.randn(2, 6),), {"x": {1: Dim("n", min=2, max=16)}}, target="my Clip")
    shown = explorer.add("my Clip", report, "defined in a cell")
    assert shown is report and explorer.verdict == "pass"
    assert "my Clip" in explorer.controls["model"].options
    assert "defined in a cell" in explorer.output.value and "data-verdict='pass'" in explorer.output.value
    explorer.set(model="ShapeBranch · frames ∈ [1, 32]")
    assert explorer.verdict == "fail"


def test_an_interaction_examines_nothing_and_display_text_is_stable(demo, monkeypatch):
    """An interaction shows a report the lesson already has: no export, no examination (the browser tests measure
    its latency in the page; no timing is asserted here)."""
    explorer, interactions = demo

    def no_run(*args, **kwargs):
        raise AssertionError("a widget interaction must not export or examine")

    monkeypatch.setattr(torch.export, "export", no_run)
    monkeypatch.setattr(doctor, "examine", no_run)
    monkeypatch.setattr(L, "examine", no_run)
    for values, _ in interactions * 2:
        assert explorer.set(**values) is explorer.reports[values["model"]]
    explorer.set(model="TokenPool · shared Dim seq ∈ [2, 64]")
    assert explorer._repr_mimebundle_()["text/plain"] == "DoctorExplorer — TokenPool · shared Dim seq ∈ [2, 64]: pass"
    with pytest.raises(KeyError):
        explorer.set(colour="red")


def test_the_command_for_a_case_is_the_one_the_notebook_shows():
    assert L.command("ShapeBranch · frames ∈ [1, 32]") == (
        "python -m helpers.doctor helpers.models:ShapeBranch --example 2x8x4 --dim x:1:frames:1:32")
