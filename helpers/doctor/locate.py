"""Where a divergence comes from (issue 20 §4): the first stage of the pipeline at which a probe leaves eager.

For a probe inside the input contract whose ``.pte`` output diverges from eager's, the same input goes through
each stage in order, each compared with eager by the parity table's own rule (:func:`helpers.parity.difference`,
the report's tolerances):

1. ``exported program``: ``ExportedProgram.module()``, the graph ``torch.export`` recorded. A divergence here is
   the export's: a Python decision on a size, a flag or a value was taken once (the model is to fix).
2. ``edge program``: ``executorch.exir.to_edge`` of that graph (Core ATen decompositions, edge passes), run as a
   module, no delegate.
3. ``portable .pte``: the same export lowered with no delegate, in the ExecuTorch runtime (portable kernels,
   memory plan). Skipped when the examined program is itself portable.
4. the examined ``.pte`` (``xnnpack .pte``, or ``shipped .pte`` with ``--pte``): the parity table's own result.

The first stage that diverges says whom the divergence concerns (:data:`MEANING`). This ladder is ours:
ExecuTorch 1.5.1 has no stage-by-stage comparison; its Inspector compares a delegated program's intermediate
outputs operator by operator, which would say *which* operator inside the delegate, and is not used here yet.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from .._quiet import captured_output, native_stderr_captured
from ..display import error_line
from ..parity import Tolerance, difference, flat_outputs, format_diff

__all__ = ["StageResult", "Located", "locate_divergences", "MEANING", "MAX_LOCATED"]

MAX_LOCATED = 3  # diverging probes located per report (each one runs the input through every stage)
ROUNDING = 1e-6  # a first difference this small (absolute) is float rounding, not a different computation


def _diff(value: float) -> str:
    """``max |Δ| = nan``, ``max |Δ| = 6e-08``: the exact size (the parity table rounds small ones to <1e-4)."""
    return f"max |Δ| = {value:.2g}" if math.isfinite(value) else f"max |Δ| = {format_diff(value)}"

MEANING = {
    "exported program": "the export recorded another computation than eager for this input (a Python decision on a "
                        "size, a flag or a value taken once): fix the model",
    "edge program": "the edge dialect's decompositions change the result: not the model's doing; report it to "
                    "ExecuTorch with this input",
    "portable .pte": "ExecuTorch's portable kernels or memory plan change the result: not the model's doing; report "
                     "it to ExecuTorch with this input",
    "shipped .pte": "a portable .pte lowered here from this model matches eager and the shipped file does not: it "
                    "was built from other weights or another version of the code, or its delegate computes it "
                    "differently; rebuild it from this model (the doctor without --pte) and compare",
    "delegated .pte": "only the delegate's kernels compute it differently (the portable .pte matches eager): a "
                      "numerics difference of the delegate; keep this input out of its path, widen the tolerance "
                      "if the difference is acceptable, or report it to the delegate",
}


@dataclass
class StageResult:
    """One stage's output for the probe, against eager: ``match``, ``diverge`` or ``error`` (it could not run)."""

    name: str
    status: str
    max_abs_diff: float | None = None
    detail: str = ""


@dataclass
class Located:
    """One diverging probe, followed through the stages."""

    label: str
    shapes: str
    stages: list[StageResult] = field(default_factory=list)

    @property
    def first(self) -> str | None:
        """The first stage that diverges (its key in :data:`MEANING`; the examined program is ``delegated .pte``)."""
        found = next((s for s in self.stages if s.status == "diverge"), None)
        if found is None:
            return None
        if found is self.stages[-1] and found.name not in ("portable .pte", "shipped .pte"):
            return "delegated .pte"
        return found.name

    @property
    def meaning(self) -> str:
        text = MEANING.get(self.first or "", "no stage diverges when run again: the divergence did not reproduce")
        first = next((s for s in self.stages if s.status == "diverge"), None)
        if first is not None and first.max_abs_diff is not None and 0 < first.max_abs_diff <= ROUNDING:
            text += (f" — but only by {_diff(first.max_abs_diff)}: floating-point kernels differ in their last bits, "
                     "and a tolerance that allows rounding is what to set")
        return text

    def line(self) -> str:
        """``exported program ✗ (max |Δ| = nan) → edge program ✗ → …``"""
        marks = {"match": "✓", "diverge": "✗", "error": "!", "skipped": "–"}
        parts = []
        for s in self.stages:
            extra = f" ({_diff(s.max_abs_diff)})" if s.status == "diverge" and s.max_abs_diff is not None else ""
            extra = f" ({s.detail})" if s.status == "error" else extra
            parts.append(f"{s.name} {marks.get(s.status, '?')}{extra}")
        return " → ".join(parts)


def _compare(name: str, run: Callable[[], Any], eager: tuple[Any, ...], atol: Tolerance, rtol: Tolerance
             ) -> StageResult:
    try:
        with torch.no_grad(), warnings.catch_warnings(), native_stderr_captured(), captured_output():
            warnings.simplefilter("ignore")
            out = flat_outputs(run())
    except Exception as exc:  # noqa: BLE001 - a stage that cannot run this input is reported, not raised
        return StageResult(name, "error", None, error_line(exc))
    same, worst, what = difference(eager, out, atol, rtol)
    return StageResult(name, "match" if same else "diverge", worst, "" if same else what)


def locate_divergences(model: torch.nn.Module, exported: Any, rows: Sequence[Any], inputs: Sequence[tuple[Any, ...]],
                       *, examined: str, portable: Callable[[], Any] | None,
                       atol: Tolerance, rtol: Tolerance, limit: int = MAX_LOCATED) -> list[Located]:
    """Follow up to ``limit`` diverging ``rows`` (``inputs``: each row's input) through the stages.

    ``exported``: the ``ExportedProgram``; ``portable``: builds (or loads from the cache) the portable program, None
    when the examined one is portable; ``examined``: the examined program's stage name (``xnnpack .pte``)."""
    from .._quiet import import_executorch_quietly

    import_executorch_quietly()  # the compiler: not loaded by a run whose programs came from the cache
    from executorch.exir import to_edge

    chosen = [(row, args) for row, args in zip(rows, inputs) if row.within_contract and row.status == "diverge"]
    chosen = chosen[:limit]
    if not chosen:
        return []
    module = exported.module()
    try:
        edge: Any = to_edge(exported).exported_program().module()
        edge_problem = ""
    except Exception as exc:  # noqa: BLE001 - a graph to_edge refuses is a finding of that stage
        edge, edge_problem = None, error_line(exc)
    artifact, portable_problem = None, ""
    if portable is not None:
        try:
            artifact = portable()
        except Exception as exc:  # noqa: BLE001 - a graph the portable lowering refuses is that stage's finding
            portable_problem = error_line(exc)
    found = []
    for row, args in chosen:
        def fresh(a: tuple[Any, ...] = tuple(args)) -> list[Any]:
            return [x.clone() if isinstance(x, torch.Tensor) else x for x in a]

        eager = row.eager_output
        located = Located(row.label, row.shapes)
        located.stages.append(_compare("exported program", lambda: module(*fresh()), eager, atol, rtol))
        if edge is None:
            located.stages.append(StageResult("edge program", "error", None, edge_problem))
        else:
            located.stages.append(_compare("edge program", lambda: edge(*fresh()), eager, atol, rtol))
        if artifact is not None:
            located.stages.append(_compare("portable .pte", lambda: artifact.run_raw(*fresh()), eager, atol, rtol))
        elif portable is not None:
            located.stages.append(StageResult("portable .pte", "error", None, portable_problem))
        located.stages.append(StageResult(examined, "diverge", row.max_abs_diff, row.runtime_message))
        found.append(located)
    return found
