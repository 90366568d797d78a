"""Lesson 11 (export doctor): a gallery of broken and fixed models, and the report widget.

Each gallery case is written as the command-line arguments of ``python -m helpers.doctor``, so
the widget shows exactly the report the command prints in CI (same seeded inputs, same probes).
Reports are computed once per process (the lowered programs come from the cache); choosing a
model in the widget only swaps an HTML string.
"""

from __future__ import annotations

import html
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from ..doctor import DoctorReport, examine, prepare, to_html
from ..models import seeded

__all__ = ["MedianCenter", "AssertsFinite", "Case", "CASES", "command", "report_for", "gallery_reports",
           "DoctorExplorer", "widget_demo", "declined_by_reason"]


class MedianCenter(nn.Module):
    """Subtracts the median (``torch.median``), then a linear layer."""

    def __init__(self, features: int = 4, seed: int = 0):
        super().__init__()
        with seeded(seed):
            self.proj = nn.Linear(features, features)
        self.eval()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.proj(x - x.median())


class AssertsFinite(nn.Module):
    """A debug check left in ``forward()``: with ``check=True`` it raises on an input that is not finite."""

    def __init__(self, features: int = 4, check: bool = True, seed: int = 0):
        super().__init__()
        with seeded(seed):
            self.proj = nn.Linear(features, features)
        self.check = check
        self.eval()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.check and not torch.isfinite(x).all():
            raise ValueError("non-finite input")
        return torch.relu(self.proj(x))


@dataclass(frozen=True)
class Case:
    """One model of the gallery: the doctor's arguments, the verdict it should reach, and why."""

    argv: tuple[str, ...]
    expected: str
    story: str


CASES: dict[str, Case] = {
    "ScaleOrShift · if on a tensor's value": Case(
        ("helpers.models:ScaleOrShift", "--example", "3x4"), "fail",
        "a data-dependent `if`: export fails loudly and names the line"),
    "WhileDouble · while on a tensor": Case(
        ("helpers.models:WhileDouble", "--example", "3"), "fail",
        "a `while` whose trip count depends on the data"),
    "BatchLoop · loop over a dynamic batch": Case(
        ("helpers.models:BatchLoop", "--example", "3x4", "--dim", "x:0:batch:1:8"), "fail",
        "`for i in range(x.shape[0])` needs a concrete batch: the Dim is specialized"),
    "MedianCenter · unsupported operator": Case(
        ("helpers.lessons.doctor:MedianCenter", "--example", "3x4"), "fail",
        "exports, but torch.median is not in the Core ATen opset: lowering fails"),
    "AssertsFinite · debug check in forward()": Case(
        ("helpers.lessons.doctor:AssertsFinite", "--example", "3x4"), "fail",
        "an incidental branch: delete it from the export path"),
    "AssertsFinite · check=False (fixed)": Case(
        ("helpers.lessons.doctor:AssertsFinite", "--arg", "check=False", "--example", "3x4"), "pass",
        "the debug check kept out of the export path"),
    "ShapeBranch · frames ∈ [1, 32]": Case(
        ("helpers.models:ShapeBranch", "--example", "2x8x4", "--dim", "x:1:frames:1:32"), "fail",
        "exports fine, then diverges at frames = 1: export decided `x.shape[1] > 1` for the whole range"),
    "ShapeBranch · frames ∈ [2, 32] (fixed)": Case(
        ("helpers.models:ShapeBranch", "--example", "2x8x4", "--dim", "x:1:frames:2:32"), "pass",
        "the contract now excludes one frame; the device still runs it silently, so check on the host"),
    "ScaleOrShiftCond · torch.cond (fixed)": Case(
        ("helpers.models:ScaleOrShiftCond", "--example", "3x4"), "pass",
        "both branches in the graph; XNNPACK cannot reach inside them"),
    "ScaleOrShiftWhere · torch.where (fixed)": Case(
        ("helpers.models:ScaleOrShiftWhere", "--example", "3x4"), "pass",
        "both sides computed, no control flow"),
    "TokenPool · shared Dim seq ∈ [2, 64]": Case(
        ("helpers.models:TokenPool", "--example", "1x16:int64", "--example", "1x16",
         "--dim", "ids:1:seq:2:64", "--dim", "mask:1:seq:2:64"), "pass",
        "ids and mask share one Dim; token ids stay inside the vocabulary"),
    "TinyVision · static 64×64": Case(
        ("helpers.models:TinyVision", "--example", "1x3x64x64"), "pass",
        "correct at 64×64, and every other resolution is refused: 'rejects our camera frames'"),
    "TinyVision · h, w ∈ [32, 128]": Case(
        ("helpers.models:TinyVision", "--example", "1x3x64x64", "--dim", "x:2:h:32:128", "--dim", "x:3:w:32:128"),
        "pass", "a bounded dynamic resolution: still fully delegated, a bigger arena"),
}


def declined_by_reason(delegation: Any) -> dict[str, list[str]]:
    """The operators left on portable kernels, grouped by the reason given (``{reason: [operators]}``)."""
    grouped: dict[str, list[str]] = {}
    for op, reasons in delegation.reasons().items():
        short = op.removeprefix("aten_").removesuffix("_default")
        for reason in reasons:
            grouped.setdefault(reason, []).append(short)
    return grouped


def command(name: str) -> str:
    """The shell command that produces the report of gallery case ``name``."""
    return "python -m helpers.doctor " + " ".join(CASES[name].argv)


def report_for(argv: tuple[str, ...] | list[str]) -> DoctorReport:
    """The report ``python -m helpers.doctor ARGV`` prints, computed in this process."""
    p = prepare(list(argv))
    return examine(p.model, p.example_args, p.dynamic_shapes, **p.examine_options())


_REPORTS: dict[str, DoctorReport] = {}


def gallery_reports(names: list[str] | None = None) -> dict[str, DoctorReport]:
    """Reports for the gallery (all cases by default), computed once per process."""
    from .. import lowering

    with lowering.progress_lines(False):  # thirteen "✓ forward → .pte" lines would bury the lesson
        for name in names or list(CASES):
            if name not in _REPORTS:
                _REPORTS[name] = report_for(CASES[name].argv)
    return {name: _REPORTS[name] for name in (names or list(CASES))}


class DoctorExplorer:
    """A Dropdown of models → the doctor's HTML report (probes table colour-coded).

    Every report is computed before the widget is shown; an interaction only sets the ``value``
    of an ``HTML`` widget. :meth:`add` puts a report of your own model in the list.
    """

    def __init__(self, reports: dict[str, DoctorReport], stories: dict[str, str] | None = None):
        import ipywidgets as w

        if not reports:
            raise ValueError("DoctorExplorer needs at least one report")
        self.reports = dict(reports)
        self.stories = dict(stories or {})
        first = next(iter(self.reports))
        self.controls = {"model": w.Dropdown(options=list(self.reports), value=first, description="model",
                                             layout=w.Layout(width="32em"))}
        self.output = w.HTML()
        self.output.add_class("exportlab-output")
        self.widget = w.VBox([self.controls["model"], self.output])
        self.widget.add_class("exportlab-explorer")
        self.report: DoctorReport = self.reports[first]
        self.refreshes = 0
        self.controls["model"].observe(self._on_change, names="value")
        self.refresh()

    def _on_change(self, _change: dict[str, Any]) -> None:
        self.refresh()

    def refresh(self) -> DoctorReport:
        name = self.controls["model"].value
        self.report = self.reports[name]
        story = self.stories.get(name, "")
        lead = f"<p><i>{html.escape(story)}</i></p>" if story else ""
        self.refreshes += 1  # every interaction re-renders, even when the same report is picked again
        self.output.value = f"<div data-refresh='{self.refreshes}'>{lead}{to_html(self.report)}</div>"
        return self.report

    def set(self, **values: Any) -> DoctorReport:
        """Pick a model as a learner would (``set(model=name)``) and return its report."""
        unknown = set(values) - set(self.controls)
        if unknown:
            raise KeyError(f"no control named {sorted(unknown)}; controls are {sorted(self.controls)}")
        if "model" in values:
            self.controls["model"].value = values["model"]
        return self.report

    def add(self, name: str, report: DoctorReport, story: str = "") -> DoctorReport:
        """Add (or replace) a report, e.g. for a model you defined in a cell, and select it."""
        self.reports[name] = report
        if story:
            self.stories[name] = story
        dropdown = self.controls["model"]
        if name not in dropdown.options:
            dropdown.options = list(dropdown.options) + [name]
        if dropdown.value == name:
            self.refresh()
        else:
            dropdown.value = name
        return self.report

    @property
    def verdict(self) -> str:
        return self.report.verdict

    def _repr_mimebundle_(self, **kwargs: Any) -> dict[str, Any]:
        bundle = self.widget._repr_mimebundle_(**kwargs)
        bundle["text/plain"] = f"DoctorExplorer — {self.controls['model'].value}: {self.verdict}"
        return bundle


def widget_demo() -> tuple[DoctorExplorer, list[tuple[dict[str, Any], str]]]:
    """The lesson's widget and the interactions a learner might try (with the verdict each must show)."""
    reports = gallery_reports()
    explorer = DoctorExplorer(reports, {name: case.story for name, case in CASES.items()})
    interactions = [({"model": name}, case.expected) for name, case in CASES.items()]
    return explorer, interactions
