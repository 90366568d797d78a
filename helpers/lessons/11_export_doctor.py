"""Lesson 11 · export doctor, the diagnosis workflow as a tool: its predictions, its exercise (``11.gru_step``:
stream a recurrent tagger one step at a time, with :func:`stream`, the app's loop) and its interview cards."""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from helpers.exercises.grading import (
    Exercise,
    Verdict,
    as_model,
    lowered,
    parity,
)
from helpers.interview import Card
from helpers.parity import Probe
from helpers.questions import Question, Reveal
from helpers.zoo import RecurrentTagger, gru

LESSON = "11_export_doctor"


# ----- predictions ----------------------------------------------------------------------------------
def _report(*argv: str):
    from helpers.lessons.doctor import report_for

    return report_for(list(argv))


def _smoke_vs_doctor() -> Reveal:
    r = _report("helpers.models:ShapeBranch", "--example", "2x8x4", "--dim", "x:1:frames:1:32")
    bad = ", ".join(row.label for row in r.failing_rows)
    return Reveal(r.verdict, (f"{r.headline}: {bad}. The smoke test used 8 frames; the doctor also probes every Dim's "
                              "edges, and at one frame the .pte normalises over a single value (NaN) while eager "
                              "skips the normalisation."), why_not={
        "pass": (f"a pass needs every probe inside the contract to match eager; {len(r.failing_rows)} did not: "
                 f"{bad}, inside the declared range 1..32."),
    })


def _config_branch() -> Reveal:
    r = _report("helpers.models:ConfigBranch", "--example", "2x4")
    return Reveal(r.verdict, ("The doctor compares the .pte with the model you hand it, and that model has the same "
                              "flag baked in: both sides agree. If the app flips use_residual later, the .pte will "
                              "not follow; export one program per setting (lesson 05) and examine each."), why_not={
        "fail": (f"{r.headline}: the flag is not an input of the program, so no probe can set it to the other "
                 "value, and eager, built with the same flag, computes what the .pte computes."),
    })


def _batch_loop_static() -> Reveal:
    r = _report("helpers.models:BatchLoop", "--example", "3x4")
    refused = sum(1 for row in r.parity.rows if not row.within_contract and row.status in ("rejected", "refused"))
    return Reveal(r.verdict, (f"The loop was unrolled three times and the batch made static: correct for batch 3, "
                              f"and the {refused} probes with another batch are refused, outside the contract. A "
                              "pass, but read the refused rows: if the app sends other batches, that is the bug."),
                  why_not={
        "fail": (f"{r.headline}. The doctor fails on what goes wrong inside the contract; the {refused} refused "
                 "probes are outside it (a batch other than 3), where refusing is the device doing its job."),
    })


def _segmenter_min_delegated() -> Reveal:
    r = _report("helpers.lessons.shapes:TinySegmenter", "--example", "1x3x64x64", "--dim", "x:2:height:32:128",
                "--dim", "x:3:width:32:128", "--min-delegated", "100")
    declined = "; ".join(r.declined_lines()) if r.declined_lines() else "nothing"
    share = r.delegation.coverage if r.delegation else 0.0
    return Reveal(r.verdict, f"{r.headline}. Parity holds; the check that fails is delegation. Declined: {declined}.",
                  why_not={
        "pass": f"parity alone would pass, but {share:.0%} of the graph is delegated, and --min-delegated asks for 100%.",
    })


QUESTIONS = [
    Question("11.smoke_vs_doctor", LESSON,
             "ShapeBranch, frames ∈ [1, 32]: the one-sample smoke test matches. The doctor, on the same model, "
             "example and Dim:", ("pass", "fail"), _smoke_vs_doctor),
    Question("11.config_branch", LESSON,
             "the doctor on ConfigBranch(use_residual=True), --example 2x4:", ("pass", "fail"), _config_branch),
    Question("11.batch_loop_static", LESSON,
             "the doctor on BatchLoop with --example 3x4 and no --dim:", ("pass", "fail"), _batch_loop_static),
    Question("11.segmenter_min_delegated", LESSON,
             "lesson 08's segmenter, height and width 32..128, with --min-delegated 100:", ("pass", "fail"),
             _segmenter_min_delegated),
]


# ----- exercise -------------------------------------------------------------------------------------
FEATURES, HIDDEN = 8, 16
STEP_EXAMPLE = (torch.zeros(1, FEATURES), torch.zeros(1, 1, HIDDEN))  # one frame, and the state before it


def stream(program: Any, frames: torch.Tensor) -> torch.Tensor:
    """The app's loop: one call of the step program per frame, carrying the hidden state between calls.

    ``frames`` is ``[1, T, features]``; returns ``[1, T, classes]`` like the whole-sequence model.
    """
    h = torch.zeros(1, 1, HIDDEN)
    outputs = []
    for t in range(frames.shape[1]):
        y, h = program.run(frames[:, t].contiguous(), h)
        outputs.append(y)
    return torch.stack(outputs, dim=1)


def _grade(answer: Any) -> list[Verdict]:
    reference = gru()
    model, verdict = as_model(answer, reference, what="your step model")
    verdicts = [verdict]
    if model is None:
        return verdicts
    art, verdict = lowered(model, STEP_EXAMPLE, hint=(
        "the step takes one frame [1, 8] and the state [1, 1, 16]: no axis needs to be dynamic any more"))
    verdicts.append(verdict)
    if art is None:
        return verdicts
    returned = art.run(*STEP_EXAMPLE)
    if len(returned) != 2 or tuple(returned[1].shape) != tuple(STEP_EXAMPLE[1].shape):
        shapes = ", ".join(str(tuple(r.shape)) for r in returned)
        return verdicts + [Verdict("returns (output of this frame, next state)", False,
                                   f"the program returns {len(returned)} output(s): {shapes}",
                                   "the app needs the state back, shaped like the state it passed in")]
    g = torch.Generator().manual_seed(11)
    probes = [Probe(f"{n} frame{'s' if n > 1 else ''}", (torch.randn(1, n, FEATURES, generator=g),))
              for n in (1, 2, 5, 17, 40)]
    probes.append(Probe("40 loud frames", (torch.randn(1, 40, FEATURES, generator=g) * 5,)))
    verdicts.append(parity(reference, art, probes, run=lambda p: (stream(art, p.args[0]),), criterion=(
        "the app's loop over your step matches the whole-sequence model, 1 to 40 frames"), hint=(
        "compare one frame with two: what does the second call need to know about the first one?")))
    return verdicts


def solve_gru_step() -> Any:
    """The solution of 11.gru_step."""
    class TaggerStep(RecurrentTagger):
        def forward(self, x_t, h):
            out, h_next = self.rnn(x_t.unsqueeze(1), h)  # a sequence of one frame, from the state the app passes
            return self.head(out[:, 0]), h_next


    return TaggerStep()


EXERCISES = [
    Exercise(
        id="11.gru_step", lesson=LESSON,
        title="stream a recurrent model: export one step, let the app loop",
        goal=("Write a step model (same layers as RecurrentTagger) with forward(x_t, h) -> (y_t, h_next), so that "
              "the app's loop over its .pte computes what the whole-sequence model computes, for any length."),
        grade=_grade, solve=solve_gru_step,
        context=lambda: {"torch": torch, "nn": nn, "RecurrentTagger": RecurrentTagger},
        revisit=("05_hoisting", "07_dynamic_dims")),
]

CARDS = [
    Card(
        id="11.export_ci", lesson=LESSON, topic="export CI job", kind="diagnosis",
        question="What would you put in the CI job that exports your on-device model?",
        answer=("Export, lower and load the exact artifact we ship, then diff it against eager PyTorch on a varied "
                "probe set: values of both signs, zeros and extremes, both sides of every branch, and every dynamic "
                "dimension at its min, max and one step beyond. Inside the input contract every probe must match; "
                "outside it, something must refuse, and inputs the runtime runs anyway get a host-side check in the "
                "app. Then gate on what parity cannot see: delegated coverage with the partitioner's reasons, and "
                "the memory plan's arena against a budget. Failures are machine-readable (JSON, JUnit), and the "
                "probes ship with the program as a bundle the device can verify."),
        points=("the real .pte diffed against eager on varied inputs, including every bound's edges and both branch "
                "sides",
                "inside the contract must match; outside must be refused (and the app checks what the runtime "
                "does not)",
                "delegated coverage and arena size as gates, not only correctness",
                "the tool's own errors are kept apart from the model's")),
    Card(
        id="11.parity_blind_spots", lesson=LESSON, topic="export CI job", kind="conceptual",
        question="Your exported model passes a parity test against eager. What can still be wrong on the device?",
        answer=("Parity compares the .pte with the model I handed the test, so anything baked into both sides "
                "passes: a config flag the app will flip later, a Python scalar, a decision the app takes. It only "
                "covers the inputs I probed, so a Dim's untested edge or a shape the runtime accepts outside the "
                "contract can still be wrong. And it says nothing about speed or memory: the partitioner may have "
                "declined half the graph, or the arena may be planned for a huge max. So I export one program per "
                "setting, probe every bound, check inputs on the host, and gate on delegation and arena too."),
        points=("flags and decisions baked into both the eager model and the .pte pass unnoticed",
                "only the probed inputs are proven: bounds' edges and silently accepted shapes need probes or host "
                "checks",
                "parity is silent about delegation and memory: measure those separately")),
]
