"""Exercises of the control-flow track (lessons 01–05).

Each exercise names its reference (the intended behaviour, in eager PyTorch), the starter (a cell of
the lesson, read from its source), the solution (below, shown only on request) and its grade: the
real pipeline, probes covering both sides of every branch and every bound, and the lesson's own
criterion where there is one.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn
from torch.export import Dim

from .. import models as M
from ..parity import Probe
from ._core import Exercise, Verdict, as_model, lowered, parity

__all__ = ["EXERCISES"]


def _base_context() -> dict[str, Any]:
    return {"torch": torch, "nn": nn, "Dim": Dim}


def _values(shape: tuple[int, ...], kind: str, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    base = torch.randn(shape, generator=g)
    return {"random": base, "positive": base.abs() + 0.1, "negative": -(base.abs() + 0.1),
            "zeros": torch.zeros(shape)}[kind]


# ----- 01 · vectorise the loop over the batch ------------------------------------------------------
_BATCH = Dim("batch", min=1, max=8)


def _grade_vectorize_loop(answer: Any) -> list[Verdict]:
    reference = M.BatchLoop()
    model, verdict = as_model(answer, reference)
    verdicts = [verdict]
    if model is None:
        return verdicts
    example = (_values((3, 4), "random", 1),)
    art, verdict = lowered(model, example, {"x": {0: _BATCH}}, hint=(
        "range(x.shape[0]) needs a Python int while tracing, so export has to fix the batch; compute every row "
        "in one tensor operation instead (what depends on the row index can be a tensor too)."))
    verdicts.append(verdict)
    if art is None:
        return verdicts
    probes = [Probe(f"batch {n}, {kind} values", (_values((n, 4), kind, 10 + n),))
              for n in (1, 2, 3, 5, 8) for kind in ("random", "positive", "negative")]
    verdicts.append(parity(reference, art, probes, criterion="matches BatchLoop (the loop) for every batch 1–8", hint=(
        "compare your forward() with BatchLoop's row by row: each row i is transformed AND multiplied by (i + 1).")))
    return verdicts


_VECTORIZE_LOOP_SOLUTION = '''
class BatchLoopVectorized(BatchLoop):
    def forward(self, x):
        row_number = torch.arange(1, x.shape[0] + 1, dtype=x.dtype).unsqueeze(1)  # 1, 2, …, batch (a tensor)
        return torch.tanh(self.item(x)) * row_number


answer = BatchLoopVectorized()
'''


EXERCISES = [
    Exercise(
        id="01.vectorize_loop", lesson="01_silent_specialization",
        title="vectorise the loop so one .pte serves every batch from 1 to 8",
        goal=("Rewrite BatchLoop's forward() without a Python loop over the batch, so that it exports with "
              "dynamic_shapes={'x': {0: Dim('batch', min=1, max=8)}} and the .pte computes what the loop computes "
              "for every batch size."),
        grade=_grade_vectorize_loop, solution_code=_VECTORIZE_LOOP_SOLUTION,
        context=lambda: {**_base_context(), "BatchLoop": M.BatchLoop}),
]
