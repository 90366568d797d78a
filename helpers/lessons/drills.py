"""Lesson 10 (diagnosis drills): broken models from both tracks, and the investigation that
diagnoses each one with the real tools.

A :class:`Drill` is a story from the field: the model that was shipped (how it was exported), the
eager model the team trusts, and the input the device actually sends. :func:`investigate` runs the
workflow of the lessons on it — export/lower/load (:func:`helpers.diagnose_export`), the device's
input on the raw runtime, a varied probe set against eager, the delegation report — and returns a
:class:`Finding` whose ``answer`` is one of :data:`ANSWERS`. :func:`check` compares a learner's
answer with it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import nn
from torch.export import Dim

from .. import models
from .._quiet import captured_output, runtime_log_lines
from ..artifact import PteArtifact
from ..diagnose import diagnose_export
from ..display import check_prediction
from ..lowering import lower, lower_methods
from ..parity import check_one, compare, probe_inputs
from . import shapes

__all__ = ["ANSWERS", "FIXES", "Drill", "Finding", "DRILLS", "investigate", "check", "BatchGate", "MedianPool",
           "run_on_device", "CAMERA_SIZES", "camera_options", "compare_options", "run_ci_example"]

ANSWERS = (
    "data-dependent control flow",
    "guard on a dynamic dimension",
    "unsupported operator",
    "input outside the export contract",
    "silent specialization",
    "partial delegation",
    "healthy",
)

FIXES = {
    "data-dependent control flow": "torch.cond / torch.where, hoist the decision into the app, or delete an "
                                   "incidental branch; then compare both sides of the branch against eager.",
    "guard on a dynamic dimension": "adopt the bound or derived Dim torch suggests, or rewrite the size arithmetic "
                                    "(or move it to the host) so it holds for every declared size.",
    "unsupported operator": "replace the operator by supported ones (a decomposition), or move that step to the app.",
    "input outside the export contract": "read the .pte's input signature; normalize on the host (resize, pad, "
                                         "cast), declare a bounded Dim, or ship buckets; a baked-in scalar must "
                                         "become a tensor input or one method per value.",
    "silent specialization": "find the decision export made at trace time (a shape test, a flag, a Python "
                             "scalar); make it explicit (torch.cond, a tighter Dim, two methods) and probe the edges.",
    "partial delegation": "keep the delegated path static (normalize on the host, buckets), or move the declined "
                          "operator out of the dynamic region / out of torch.cond; re-check delegation.",
    "healthy": "nothing to fix: keep the parity test in the export CI job.",
}


class BatchGate(nn.Module):
    """Doubles large batches: ``if x.shape[0] > 4`` on a dynamic batch of 1..16 (export refuses the range)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.shape[0] > 4:
            return x * 2
        return x


class MedianPool(nn.Module):
    """Pools features with ``torch.median`` (robust to outliers, but not in the Core ATen opset)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.median(x, dim=1).values


@dataclass
class Drill:
    """One field report: what was shipped, what the team compares against, what the device sends."""

    name: str
    report: str
    build: Callable[[], tuple[nn.Module, tuple[Any, ...], Any]]  # the shipped model, example, dynamic_shapes
    device_input: Callable[[], tuple[Any, ...]]
    reference: Callable[[], nn.Module] | None = None  # the eager model the team trusts (default: shipped one)
    track: str = "shapes"


@dataclass
class Finding:
    """What the real tools report about one drill."""

    answer: str
    evidence: list[str] = field(default_factory=list)

    @property
    def fix(self) -> str:
        return FIXES[self.answer]

    def __str__(self) -> str:
        return "\n".join([f"diagnosis: {self.answer}"] + [f"  · {e}" for e in self.evidence]
                         + [f"  fix: {self.fix}"])

    def __repr__(self) -> str:
        return f"<Finding {self.answer}>"


_KIND_TO_ANSWER = {"data_dependent": "data-dependent control flow",
                   "constraint_violation": "guard on a dynamic dimension",
                   "unsupported_operator": "unsupported operator"}


def investigate(drill: Drill) -> Finding:
    """Diagnose ``drill`` with the real exporter, lowering and runtime (never raises for a broken model)."""
    model, example, dynamic = drill.build()
    with captured_output():  # a cold build of a scalar input leaks a runtime log line (see the lesson report)
        diagnosis = diagnose_export(model, example, dynamic)
    if not diagnosis.ok:
        answer = _KIND_TO_ANSWER.get(diagnosis.kind, "unsupported operator")
        evidence = [f"{diagnosis.stage}: {diagnosis.summary}"]
        if diagnosis.source_line:
            evidence.append(f"offending line: {diagnosis.source_line}")
        evidence += [f"torch suggests: {s}" for s in diagnosis.suggested_fixes]
        return Finding(answer, evidence)
    artifact = diagnosis.artifact
    assert artifact is not None
    reference = drill.reference() if drill.reference else model
    contract = artifact.input_contract()
    evidence = [f"input signature: {contract.signature()}"]
    device = drill.device_input()
    row = check_one(reference, artifact, device, label="device input")
    if row.status == "rejected" or not row.within_contract:
        evidence.append(f"device input {row.shapes}: {row.status}")
        evidence += [f"runtime: {row.runtime_message}"] if row.runtime_message else []
        evidence += [f"contract: {row.contract_message}"] if row.contract_message else []
        return Finding("input outside the export contract", evidence)
    report = compare(reference, artifact, probe_inputs(example, contract=contract))
    diverging = [r for r in report if r.within_contract and r.status == "diverge"]
    if row.status == "diverge" or diverging:
        where = [f"device input {row.shapes}"] if row.status == "diverge" else []
        where += [r.label for r in diverging]
        evidence.append("inside the contract, the .pte and eager disagree on: " + ", ".join(where))
        return Finding("silent specialization", evidence)
    delegation = artifact.delegation()
    if delegation.portable_nodes:
        evidence.append(delegation.summary())
        evidence.append("on portable kernels: " + ", ".join(delegation.portable_ops()))
        evidence += delegation.notes
        return Finding("partial delegation", evidence)
    evidence.append(f"parity inside the contract: {report.summary()}; {delegation.summary()}")
    return Finding("healthy", evidence)


def check(drill: Drill, answer: str) -> Finding:
    """Print whether ``answer`` matches what the real tools report for ``drill`` (and return the finding)."""
    if answer not in ANSWERS:
        print(f"'{answer}' is not one of the answers: {', '.join(ANSWERS)}")
    finding = investigate(drill)
    check_prediction(answer, finding.answer, "\n".join(finding.evidence) + f"\nfix: {finding.fix}")
    return finding


# ----- the camera scenario ------------------------------------------------------------------------
def run_on_device(pte: str | Path, args: tuple[Any, ...], method: str = "forward") -> tuple[Any, list[str]]:
    """Load a ``.pte`` file with the ExecuTorch runtime bindings and run ``method`` as the app would.

    Returns ``(outputs or None, the runtime's log lines)``; nothing from exportlab sits in between.
    """
    from executorch.runtime import Runtime

    with captured_output() as log:
        program = Runtime.get().load_program(Path(pte))
        try:  # copy the outputs: they live in the program's memory, which goes away with it
            outputs = [o.clone() if isinstance(o, torch.Tensor) else o
                       for o in program.load_method(method).execute(list(args))]
        except RuntimeError:
            outputs = None
    return outputs, runtime_log_lines(log.getvalue())


CAMERA_SIZES = ((48, 64), (64, 64))  # what the fleet's cameras deliver, after the app's downscale


def camera_options() -> dict[str, tuple[PteArtifact, Callable[[torch.Tensor], tuple[torch.Tensor, str]]]]:
    """The three deliberate choices for the camera drill, built on the real pipeline.

    Each maps a name to ``(artifact, prepare)`` where ``prepare(frame)`` returns the input the app
    passes and the method it calls.
    """
    from .bucketing import letterbox

    model, static, _ = shapes.vision_program()
    bounded = lower(model, (shapes.camera_frame(64, 64),),
                    dynamic_shapes={"x": {2: Dim("height", min=32, max=128), 3: Dim("width", min=32, max=128)}})
    buckets = lower_methods({f"frame_{h}x{w}": (model, (shapes.camera_frame(h, w),)) for h, w in CAMERA_SIZES})
    return {
        "normalize on the host (letterbox → 64×64)": (static, lambda f: (letterbox(f, shapes.VISION_SIZE), "forward")),
        "bounded Dims (height, width ∈ 32..128)": (bounded, lambda f: (f, "forward")),
        "buckets (one method per camera size)": (buckets, lambda f: (f, f"frame_{f.shape[2]}x{f.shape[3]}")),
    }


def compare_options(options: dict[str, Any], frames: list[torch.Tensor]) -> list[dict[str, Any]]:
    """For each option: does every device frame run, does it match eager on what the app passes, and
    what does it cost (delegated coverage, planned arena, ``.pte`` bytes)."""
    model = models.TinyVision()
    rows = []
    for name, (artifact, prepare) in options.items():
        ok = True
        for frame in frames:
            args, method = prepare(frame)
            row = check_one(model, artifact, (args,), method=method)
            ok = ok and row.status == "match" and row.within_contract
        methods = artifact.methods
        d = [artifact.delegation(m) for m in methods]
        rows.append({
            "option": name, "all device frames match eager": ok,
            "delegated": f"{sum(x.delegated_nodes for x in d)}/{sum(x.delegated_nodes + x.portable_nodes for x in d)}",
            "arena bytes (largest method)": max(artifact.planned_memory_bytes(m) for m in methods),
            ".pte bytes": artifact.nbytes})
    return rows


def run_ci_example(path: str | Path) -> dict[str, int]:
    """Run the copyable export-CI test file with pytest, in this process; return outcome counts."""
    import pytest

    class Count:
        def __init__(self) -> None:
            self.outcomes: dict[str, int] = {}

        def pytest_runtest_logreport(self, report):  # noqa: ANN001 - pytest hook
            if report.when == "call" or report.outcome != "passed":
                self.outcomes[report.outcome] = self.outcomes.get(report.outcome, 0) + 1

    counter = Count()
    with captured_output():
        # no:nbval — the notebook plugin is not needed here, and importing it (nbformat, jsonschema) costs seconds
        code = pytest.main([str(path), "-q", "-p", "no:cacheprovider", "-p", "no:randomly", "-p", "no:nbval"],
                           plugins=[counter])
    return {"exit code": int(code), **counter.outcomes}


# ----- the drills ------------------------------------------------------------------------------
def _g(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _camera() -> tuple[nn.Module, tuple[Any, ...], Any]:
    model, _, example = shapes.vision_program()
    return model, (example,), None


def _one_frame_clip() -> tuple[nn.Module, tuple[Any, ...], Any]:
    return models.ShapeBranch(), (torch.randn(1, 8, 4, generator=_g(1)),), {"x": {1: Dim("frames", min=1, max=16)}}


def _flag() -> tuple[nn.Module, tuple[Any, ...], Any]:
    return models.ConfigBranch(use_residual=True), (torch.randn(2, 4, generator=_g(2)),), None


def _steps() -> tuple[nn.Module, tuple[Any, ...], Any]:
    return models.ScalarRepeat(), (torch.randn(2, 4, generator=_g(3)), 3), None


def _any_size() -> tuple[nn.Module, tuple[Any, ...], Any]:
    model, _, example, dynamic = shapes.segmenter_program(max_side=128)
    return model, (example,), dynamic


def _bounded_camera() -> tuple[nn.Module, tuple[Any, ...], Any]:
    model, _, example = shapes.vision_program()
    return model, (example,), {"x": {2: Dim("height", min=32, max=128), 3: Dim("width", min=32, max=128)}}


DRILLS: list[Drill] = [
    Drill("camera", "Works in Python, but the phone rejects every camera frame (the camera delivers 48×64).",
          _camera, lambda: (shapes.camera_frame(48, 64),)),
    Drill("sign_router", "The export job fails before producing a .pte; the model routes each input by its sign.",
          lambda: (models.ScaleOrShift(), (torch.randn(2, 4, generator=_g(5)),), None),
          lambda: (torch.randn(2, 4, generator=_g(6)),), track="control flow"),
    Drill("one_frame", "Audio clips of 2–16 frames are fine on device; a 1-frame clip returns garbage. "
          "Exported with Dim('frames', min=1, max=16).",
          _one_frame_clip, lambda: (torch.randn(1, 1, 4, generator=_g(7)),)),
    Drill("flag", "The team turned use_residual off in the Python config; the phone still gives the old answers.",
          _flag, lambda: (torch.randn(2, 4, generator=_g(8)),),
          reference=lambda: models.ConfigBranch(use_residual=False), track="control flow"),
    Drill("batch_gate", "Export with a batch Dim of 1..16 fails with a long message about constraints.",
          lambda: (BatchGate(), (torch.randn(8, 4, generator=_g(9)),), {"x": {0: Dim("batch", min=1, max=16)}}),
          lambda: (torch.randn(3, 4, generator=_g(10)),)),
    Drill("steps", "The app calls the model with steps=5; it worked with steps=3 in the notebook.",
          _steps, lambda: (torch.randn(2, 4, generator=_g(11)), 5), track="control flow"),
    Drill("median", "Export succeeds, but lowering the model for the device fails.",
          lambda: (MedianPool(), (torch.randn(2, 5, 4, generator=_g(12)),), None),
          lambda: (torch.randn(2, 5, 4, generator=_g(13)),), track="control flow"),
    Drill("any_size", "We made height and width dynamic so any frame works; now the model is 4× slower on device.",
          _any_size, lambda: (shapes.camera_frame(48, 64),)),
    Drill("loop", "A refinement loop (`while x.sum() < limit`) will not export.",
          lambda: (models.WhileDouble(), (torch.rand(2, 4, generator=_g(14)),), None),
          lambda: (torch.rand(2, 4, generator=_g(15)),), track="control flow"),
    Drill("bounded_camera", "Reviewer asks: is the classifier safe to ship? It was re-exported with "
          "Dim('height', 32..128) and Dim('width', 32..128); the camera delivers 48×64.",
          _bounded_camera, lambda: (shapes.camera_frame(48, 64),)),
]
