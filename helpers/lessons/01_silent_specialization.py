"""Lesson 01 · silent specialization: its predictions, its exercise (``01.vectorize_loop``) and its interview card.

The lesson's models and its divergence explorer live in :mod:`helpers.lessons.control_flow` (lessons 01–05 share it).
"""

from __future__ import annotations

from typing import Any

import torch
from torch.export import Dim

from helpers import models as M
from helpers.exercises.grading import Exercise, Verdict, as_model, base_context, lowered, parity
from helpers.inputs import seeded_randn, seeded_values
from helpers.interview import Card
from helpers.lowering import lower
from helpers.models import BatchLoop
from helpers.parity import Probe, check_one
from helpers.questions import Question

LESSON = "01_silent_specialization"


# ----- predictions --------------------------------------------------------------------------------
def _flag_on() -> tuple[str, str]:
    x = seeded_randn(2, 4)
    art = lower(M.ConfigBranch(use_residual=False), (x,))
    row = check_one(M.ConfigBranch(use_residual=True), art, (-x.abs() - 0.1,))
    return row.status, ("the `+ x` was never recorded (the flag was False while tracing): the .pte computes "
                        "relu(proj(x)) whatever the app's flag says now. Nothing checks the flag, so nothing is "
                        "rejected: the answer is simply different.")


def _counted_four() -> tuple[str, str]:
    from helpers.lessons.control_flow import CountedMean

    counted = CountedMean()
    items3 = seeded_randn(3, 4)
    art = lower(counted, (items3, 3), dynamic_shapes={"x": {0: Dim("items", min=3, max=8)}, "n": None})
    four = seeded_randn(4, 4, seed=4)
    try:
        (device,) = art.run_raw(four, 3)
    except RuntimeError:
        return "rejected", "the runtime refused the input."
    with torch.no_grad():
        same = bool(torch.allclose(device, counted(four, 4), atol=1e-4))
    return ("match" if same else "diverge"), (
        "4 items are inside the contract (items ∈ [3, 8]) and n=3 is the value export baked in, so the runtime "
        "runs it without complaint, and the unrolled loop averages the first 3 of the 4 items: not what eager "
        "computes with n=4.")


# ----- exercise -----------------------------------------------------------------------------------
_BATCH = Dim("batch", min=1, max=8)


def _grade_vectorize_loop(answer: Any) -> list[Verdict]:
    reference = BatchLoop()
    model, verdict = as_model(answer, reference)
    verdicts = [verdict]
    if model is None:
        return verdicts
    example = (seeded_values((3, 4), "random", 1),)
    art, verdict = lowered(model, example, {"x": {0: _BATCH}}, hint=(
        "range(x.shape[0]) needs a Python int while tracing, so export has to fix the batch; compute every row "
        "in one tensor operation instead (what depends on the row index can be a tensor too)."))
    verdicts.append(verdict)
    if art is None:
        return verdicts
    probes = [Probe(f"batch {n}, {kind} values", (seeded_values((n, 4), kind, 10 + n),))
              for n in (1, 2, 3, 5, 8) for kind in ("random", "positive", "negative")]
    verdicts.append(parity(reference, art, probes, criterion="matches BatchLoop (the loop) for every batch 1–8", hint=(
        "compare your forward() with BatchLoop's row by row: each row i is transformed AND multiplied by (i + 1).")))
    return verdicts


def solve_vectorize_loop() -> Any:
    """01.vectorize_loop: one tensor of row weights instead of a loop over the batch."""
    class BatchLoopVectorized(BatchLoop):
        def forward(self, x):
            row_number = torch.arange(1, x.shape[0] + 1, dtype=x.dtype).unsqueeze(1)  # 1, 2, …, batch (a tensor)
            return torch.tanh(self.item(x)) * row_number


    return BatchLoopVectorized()


QUESTIONS = [
    Question("01.flag_on", LESSON,
             "ConfigBranch(use_residual=False) is exported at batch 2. The app's config later switches the flag ON "
             "and sends a batch of 2 negative inputs. Compared with eager (flag on), the device's answer is…",
             ("match", "diverge", "rejected"), _flag_on),
    Question("01.counted_four", LESSON,
             "CountedMean exported with n=3 and items ∈ [3, 8]; the app sends 4 items and n=3: the device's answer "
             "compared with eager run as intended (n=4)…", ("match", "diverge", "rejected"), _counted_four),
]


EXERCISES = [
    Exercise(
        id="01.vectorize_loop", lesson=LESSON,
        title="vectorise the loop so one .pte serves every batch from 1 to 8",
        goal=("Rewrite BatchLoop's forward() without a Python loop over the batch, so that it exports with "
              "dynamic_shapes={'x': {0: Dim('batch', min=1, max=8)}} and the .pte computes what the loop computes "
              "for every batch size."),
        grade=_grade_vectorize_loop, solve=solve_vectorize_loop,
        context=lambda: {**base_context(), "BatchLoop": BatchLoop}),
]


CARDS = [
    Card(
        id="01.why_disagree", lesson=LESSON, topic="silent specialization", kind="conceptual",
        question="Why does the exported model disagree with eager PyTorch on the phone?",
        answer=("torch.export runs forward() once with symbolic inputs and records one graph. Any Python decision "
                "that is a plain value at that moment (a static shape, a config attribute, a Python scalar input) "
                "is decided then and only the taken branch is recorded, so the .pte runs, fast, and is wrong for "
                "inputs the example did not cover; loops over such values are unrolled. A dynamic size can be "
                "decided the same way without a guard, as for a size-1 axis. I catch it with an export CI job that "
                "diffs the .pte against eager on varied inputs covering both sides of every branch and every "
                "bound, and I fix it by vectorising loops, exporting one method per setting, stating the real "
                "range of a Dim, or keeping the branch with torch.cond or torch.where."),
        points=("export traces once: Python decisions on shapes, flags or scalars are taken at export time",
                "only the taken branch exists in the graph; the program runs and is silently wrong",
                "parity against eager on varied inputs (both sides, every bound) in the export CI job",
                "fixes: vectorise / one method per value / honest Dim range / torch.cond / torch.where")),
]
