"""Lesson 11's exercise: the export doctor refuses a recurrent model's dynamic length; ship one step instead.

``nn.GRU`` unrolls over the sequence while export traces it, so a dynamic number of frames is
specialized to the example's (the doctor reports it, with torch's suggested fix: a fixed length).
A streaming app feeds frames one at a time anyway: export *one step* of the recurrence and let the app
loop, carrying the hidden state. The check runs the app's loop over the learner's ``.pte`` and compares
it with the whole-sequence model in eager mode, for sequences of 1 to 40 frames.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from ..parity import Probe
from ..zoo import RecurrentTagger, gru
from .grading import Exercise, Verdict, as_model, lowered, parity

__all__ = ["EXERCISES", "stream", "STEP_EXAMPLE"]

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


_SOLUTION = '''
class TaggerStep(RecurrentTagger):
    def forward(self, x_t, h):
        out, h_next = self.rnn(x_t.unsqueeze(1), h)  # a sequence of one frame, from the state the app passes
        return self.head(out[:, 0]), h_next


answer = TaggerStep()
'''


EXERCISES = [
    Exercise(
        id="11.gru_step", lesson="11_export_doctor",
        title="stream a recurrent model: export one step, let the app loop",
        goal=("Write a step model (same layers as RecurrentTagger) with forward(x_t, h) -> (y_t, h_next), so that "
              "the app's loop over its .pte computes what the whole-sequence model computes, for any length."),
        grade=_grade, solution_code=_SOLUTION,
        context=lambda: {"torch": torch, "nn": nn, "RecurrentTagger": RecurrentTagger},
        revisit=("05_hoisting", "07_dynamic_dims")),
]
