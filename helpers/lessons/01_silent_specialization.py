"""Lesson 01 · silent specialization: its widget (:class:`DivergenceExplorer`, four traps, each lowered once; an
interaction runs eager and the ``.pte`` and shows the verdict), its predictions, its exercise (``01.vectorize_loop``)
and its interview card. The models several lessons share live in :mod:`helpers.lessons.control_flow`.
"""

from __future__ import annotations

import html
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn
from torch.export import Dim

from helpers import models as M
from helpers.artifact import PteArtifact
from helpers.exercises.grading import Exercise, Verdict, as_model, base_context, lowered, parity
from helpers.inputs import seeded_randn, seeded_values
from helpers.interview import Card
from helpers.lessons import control_flow as cf
from helpers.lowering import lower
from helpers.models import BatchLoop
from helpers.parity import ParityRow, Probe, check_one
from helpers.questions import Question, Reveal
from helpers.widgets import ParityExplorer

LESSON = "01_silent_specialization"


# ----- lesson 01's widget: a divergence explorer ---------------------------------------------------
VALUE_KINDS = ("positive", "negative", "zeros")


def _values(shape: tuple[int, ...], kind: str) -> torch.Tensor:
    base = torch.randn(shape, generator=torch.Generator().manual_seed(7))
    if kind == "zeros":
        return torch.zeros(shape)
    magnitude = base.abs() + 0.1
    return magnitude if kind == "positive" else -magnitude


@dataclass
class Trap:
    """One silently specialized model, lowered once, and how the controls turn into its inputs."""

    name: str
    model: nn.Module
    artifact: PteArtifact
    exported_as: str
    make_args: Callable[[str, int, int], tuple[Any, ...]]
    explain: Callable[[ParityRow, int, bool, int], str]


FRAMES = Dim("frames", min=1, max=8)


def _explain_shape(row: ParityRow, size: int, flag: bool, scalar: int) -> str:
    if row.status == "diverge":
        return ("frames = 1 is inside the declared range, but export decided `x.shape[1] > 1` once, while "
                "tracing, and kept no guard: the .pte normalises a single frame (its std is NaN); eager skips it.")
    if row.status == "refused":
        return ("an empty clip is below the Dim's min (1). The runtime would not check that, and on a delegated "
                "program with a dynamic axis an empty input is undefined behaviour, so it is refused on the host.")
    if row.status == "rejected":
        return f"frames = {size} is above the Dim's max (8): the memory plan has no room for it."
    if not row.within_contract:
        return f"frames = {size} is below the Dim's min (1); the device runtime does not check min."
    return f"frames = {size}: both sides normalise over time, as the recorded graph does."


def _explain_flag(row: ParityRow, size: int, flag: bool, scalar: int) -> str:
    if row.status == "rejected":
        return f"exported at batch 2, a static size: the runtime refuses batch {size}."
    if row.status == "diverge":
        return ("the app now says use_residual=False, but the .pte was exported with True: the `+ x` is in the "
                "graph for good, and nothing checks the flag.")
    if not flag:
        return ("the flag differs, yet the numbers agree: with x = 0 the residual adds nothing. One sample "
                "proves nothing; try another sign.")
    return "use_residual=True, as at export: eager and the .pte run the same graph."


def _explain_scalar(row: ParityRow, size: int, flag: bool, scalar: int) -> str:
    if row.status == "rejected":
        return (f"steps={scalar}: export baked steps=2 into the program (the loop is unrolled twice); the runtime "
                "compares the scalar you pass with the baked value and refuses another.")
    return "steps=2, the value export baked in."


def _explain_loop(row: ParityRow, size: int, flag: bool, scalar: int) -> str:
    if row.status == "rejected":
        return f"the loop was unrolled for batch 3 and the batch made static: batch {size} is refused."
    return "batch 3: the unrolled loop has exactly one copy per row."


def build_traps() -> dict[str, Trap]:
    """The four traps of lesson 01, each lowered (or loaded from the cache) once."""
    shape = M.ShapeBranch()
    flag = M.ConfigBranch(use_residual=True)
    scalar = M.ScalarRepeat()
    loop = M.BatchLoop()
    return {
        "shape if": Trap(
            "shape if", shape,
            cf.quiet_lower(shape, (_values((1, 4, 4), "positive"),), dynamic_shapes={"x": {1: FRAMES}}),
            "ShapeBranch, x: [1, frames∈[1,8], 4], example frames=4",
            lambda kind, size, steps: (_values((1, size, 4), kind),), _explain_shape),
        "config flag": Trap(
            "config flag", flag, cf.quiet_lower(flag, (_values((2, 4), "positive"),)),
            "ConfigBranch(use_residual=True), x: [2, 4]",
            lambda kind, size, steps: (_values((size, 4), kind),), _explain_flag),
        "Python scalar": Trap(
            "Python scalar", scalar, cf.quiet_lower(scalar, (_values((1, 4), "positive"), 2)),
            "ScalarRepeat, x: [1, 4], steps=2",
            lambda kind, size, steps: (_values((1, 4), kind), steps), _explain_scalar),
        "loop over batch": Trap(
            "loop over batch", loop, cf.quiet_lower(loop, (_values((3, 4), "positive"),)),
            "BatchLoop, x: [3, 4] (loop unrolled 3 times)",
            lambda kind, size, steps: (_values((size, 4), kind),), _explain_loop),
    }


class DivergenceExplorer(ParityExplorer):
    """Pick a trap, vary the input, the app's config flag and the scalar: eager vs the cached ``.pte``.

    Controls: ``trap``, ``values`` (positive / negative / zeros), ``size`` (batch, or frames for
    the shape trap), ``flag`` (``use_residual`` as the app's config says now) and ``steps`` (the
    Python scalar). Every interaction reuses the already-lowered program of the chosen trap.
    """

    def __init__(self, traps: dict[str, Trap] | None = None):
        import ipywidgets as w

        self.traps = traps if traps is not None else build_traps()
        self._flipped = M.ConfigBranch(use_residual=False)  # same seed, same weights, other flag
        self.exported = w.HTML()
        controls = {
            "trap": w.Dropdown(options=list(self.traps), value="shape if", description="trap"),
            "values": w.ToggleButtons(options=list(VALUE_KINDS), value="positive", description="values",
                                      style={"button_width": "auto"}),
            "size": w.IntSlider(value=4, min=0, max=10, description="batch/frames"),
            "flag": w.Checkbox(value=True, description="app config: use_residual"),
            "steps": w.IntSlider(value=2, min=1, max=4, description="steps"),
        }
        first = self.traps["shape if"]
        super().__init__(first.model, first.artifact, self._make_args, controls,
                         title="Divergence explorer: four traps, each exported once", explain=self._explain,
                         model_for=self._model_for)
        self.widget.children = (self.widget.children[0], self.exported) + tuple(self.widget.children[1:])

    def _trap(self, trap: str) -> Trap:
        return self.traps[trap]

    def _make_args(self, trap: str, values: str, size: int, flag: bool, steps: int) -> tuple[Any, ...]:
        return self._trap(trap).make_args(values, size, steps)

    def _model_for(self, trap: str, values: str, size: int, flag: bool, steps: int) -> nn.Module:
        if trap == "config flag" and not flag:
            return self._flipped
        return self._trap(trap).model

    def _explain(self, row: ParityRow, trap: str, values: str, size: int, flag: bool, steps: int) -> str:
        return self._trap(trap).explain(row, size, flag, steps)

    def refresh(self) -> ParityRow:
        trap = self._trap(self.controls["trap"].value)
        self.artifact = trap.artifact
        if hasattr(self, "exported"):
            self.exported.value = f"<small>.pte exported from: <code>{html.escape(trap.exported_as)}</code></small>"
        return super().refresh()


def widget_demo() -> tuple[DivergenceExplorer, list[tuple[dict[str, Any], str]]]:
    """The explorer and interactions a learner might try, with the verdict each must show."""
    explorer = DivergenceExplorer()
    base = {"values": "positive", "size": 4, "flag": True, "steps": 2}

    def at(**values: Any) -> dict[str, Any]:
        return {**base, **values}

    interactions = [
        (at(trap="shape if", size=4), "match"),
        (at(trap="shape if", size=1), "diverge"),
        (at(trap="shape if", size=9), "rejected"),
        (at(trap="config flag", size=2), "match"),
        (at(trap="config flag", size=2, flag=False), "diverge"),
        (at(trap="config flag", size=2, flag=False, values="zeros"), "match"),
        (at(trap="config flag", size=3), "rejected"),
        (at(trap="Python scalar", steps=2, values="negative"), "match"),
        (at(trap="Python scalar", steps=3), "rejected"),
        (at(trap="loop over batch", size=3), "match"),
        (at(trap="loop over batch", size=4), "rejected"),
    ]
    return explorer, interactions


# ----- predictions --------------------------------------------------------------------------------
def _flag_on() -> Reveal:
    x = seeded_randn(2, 4)
    art = lower(M.ConfigBranch(use_residual=False), (x,))
    row = check_one(M.ConfigBranch(use_residual=True), art, (-x.abs() - 0.1,))
    return Reveal(row.status, (
        "the `+ x` was never recorded (the flag was False while tracing): the .pte computes relu(proj(x)) whatever "
        "the app's flag says now."), why_not={
        "match": (f"the two answers differ by up to {row.max_abs_diff:.3f}: eager adds x (every element negative "
                  "here) after the relu, the .pte does not."),
        "rejected": (f"the input is {row.shapes} float32, the shape and dtype the program was exported with, and the "
                     "flag is not an input of the program: the runtime checks inputs only, so it has nothing to "
                     "refuse. The answer is simply different."),
    })


def _counted_four() -> Reveal:
    from helpers.lessons.control_flow import CountedMean

    counted = CountedMean()
    items3 = seeded_randn(3, 4)
    art = lower(counted, (items3, 3), dynamic_shapes={"x": {0: Dim("items", min=3, max=8)}, "n": None})
    four = seeded_randn(4, 4, seed=4)
    (device,) = art.run_raw(four, 3)
    with torch.no_grad():
        intended, first_three = counted(four, 4), counted(four, 3)
    diff = float((device - intended).abs().max())
    as_three = float((device - first_three).abs().max())
    return Reveal("match" if diff <= 1e-4 else "diverge", (
        "4 items are inside the contract (items ∈ [3, 8]) and n=3 is the value export baked in, so the unrolled "
        f"loop averages the first 3 of the 4 items: the .pte's answer is eager's with n=3 (within {as_three:.0e}), "
        "not eager's with n=4."), why_not={
        "match": f"the .pte's answer differs from eager's (n=4) by up to {diff:.3f}: the fourth item is never read.",
        "rejected": ("the runtime ran it and returned a 4-feature answer: 4 items fit the contract items ∈ [3, 8], "
                     "and n is no longer an input the runtime could check (export baked in 3)."),
    })


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
