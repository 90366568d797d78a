"""Lesson 17 · the module as export finds it: export records one run of ``forward()`` on the module as it is — its
training mode, its Python attributes, and (non-strict, the default) only what torch itself computes. Its predictions,
its exercise (``17.keep_state``) and its interview card."""

from __future__ import annotations

import copy
import warnings
from typing import Any

import numpy as np
import torch
from torch import nn

from helpers.artifact import PteArtifact
from helpers.exercises.grading import Exercise, Verdict, base_context, lowered
from helpers.interview import Card
from helpers.lowering import lower, lower_methods
from helpers.models import seeded, seeded_linear
from helpers.questions import Question, Reveal

LESSON = "17_the_module_as_it_is"
SAMPLES = 8  # samples per frame
STREAM = 6  # frames per stream in the lesson's runs and the exercise's check


def frame(seed: int, rows: int = 1) -> torch.Tensor:
    """``rows`` frames of :data:`SAMPLES` samples, random and seeded."""
    return torch.randn(rows, SAMPLES, generator=torch.Generator().manual_seed(seed))


# ----- 1. training mode ----------------------------------------------------------------------------
class FrameScorer(nn.Module):
    """Scores a frame: two layers with dropout between them, as it was trained."""

    def __init__(self) -> None:
        super().__init__()
        self.hidden = seeded_linear(17, SAMPLES, 16)
        self.drop = nn.Dropout(0.3)
        self.out = seeded_linear(27, 16, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.out(self.drop(torch.relu(self.hidden(x))))


class NormScorer(FrameScorer):
    """:class:`FrameScorer` with a batch norm after its first layer."""

    def __init__(self) -> None:
        super().__init__()
        self.norm = nn.BatchNorm1d(16)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.out(self.drop(torch.relu(self.norm(self.hidden(x)))))


def as_trained(model: nn.Module) -> nn.Module:
    """The model as the training loop leaves it: in training mode (what ``nn.Module.train()`` sets)."""
    return model.train()


def scorer_program(mode: str) -> PteArtifact:
    """:class:`FrameScorer` exported in ``mode`` ("train" or "eval") with a one-frame example, lowered for XNNPACK."""
    model = FrameScorer().train(mode == "train")
    return lower(model, (frame(0),))


CALLS = 10  # calls of the training-mode program on one frame


def answers_of(program: PteArtifact, x: torch.Tensor, calls: int = CALLS) -> list[torch.Tensor]:
    """``calls`` calls of ``program`` on the same input."""
    return [program.run_raw(x)[0] for _ in range(calls)]


def _train_mode() -> Reveal:
    program = scorer_program("train")
    x = frame(1)
    with torch.no_grad():
        eval_out = FrameScorer().eval()(x)
    outs = answers_of(program, x)
    distinct = len({tuple(o.flatten().tolist()) for o in outs})
    off_eval = sum(not torch.allclose(o, eval_out, atol=1e-5) for o in outs)
    if distinct > 1:
        actual = "differ from call to call"
    elif off_eval:
        actual = "are all equal, and differ from eval mode"
    else:
        actual = "are all equal, and equal to the model in eval mode"
    evidence = (f"{CALLS} calls gave {distinct} different answers; {off_eval} of them differ from the model in eval "
                "mode")
    why_not = {
        "are all equal, and equal to the model in eval mode": f"{evidence}: the program was recorded in training "
                                                              "mode.",
        "are all equal, and differ from eval mode": f"{evidence}: each call draws a new dropout mask.",
        "differ from call to call": f"{evidence}.",
    }
    return Reveal(actual, (
        f"{evidence}. Export recorded forward() as the module was, in training mode: the program holds a dropout, "
        "which the runtime's portable kernel runs on every call with a new random mask."), why_not={
        option: text for option, text in why_not.items() if option != actual})


def dropout_values(p: float = 0.3, n: int = 10_000) -> dict[str, Any]:
    """What a training-mode ``nn.Dropout(p)`` does to ``n`` ones, in torch and in a ``.pte`` (portable kernels):
    the distinct output values of each, and the fraction the ``.pte`` zeroed, to one decimal (the mask is random)."""

    class Drop(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.drop = nn.Dropout(p)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.drop(x * 1.0)  # the multiply gives the program an operator before the dropout

    ones = torch.ones(1, n)
    (device,) = lower(Drop().train(), (ones,), backend="portable").run_raw(ones)
    with seeded(0):
        eager = Drop().train()(ones)
    return {"torch": sorted({round(v, 4) for v in eager.flatten().tolist()}),
            ".pte": sorted({round(v, 4) for v in device.flatten().tolist()}),
            "zeroed by the .pte": round(float((device == 0).float().mean()), 1)}


# ----- 2. state on the module ----------------------------------------------------------------------
class RunningDenoise(nn.Module):
    """Streaming: subtracts a running mean of the frames seen so far, kept on the module between calls."""

    def __init__(self) -> None:
        super().__init__()
        self.mean = torch.zeros(SAMPLES)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.mean = 0.8 * self.mean + 0.2 * x.mean(dim=0)
        return x - self.mean


def export_warnings(model: nn.Module, example: tuple[Any, ...]) -> list[str]:
    """The Python warnings ``torch.export.export`` issues for ``model`` (a kernel that hides warnings hides these)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        torch.export.export(model, example)
    return [str(w.message) for w in caught]


def stream(seed: int, length: int = STREAM) -> list[torch.Tensor]:
    """A stream of ``length`` one-frame inputs, each different."""
    return [frame(seed * 100 + i) + 0.5 * i for i in range(length)]


def eager_stream(model: nn.Module, frames: list[torch.Tensor]) -> list[torch.Tensor]:
    """A fresh copy of ``model`` called on each frame in turn, as the app would call it."""
    fresh = copy.deepcopy(model).eval()
    with torch.no_grad():
        return [fresh(x) for x in frames]


def device_stream(program: PteArtifact, frames: list[torch.Tensor]) -> list[torch.Tensor]:
    """The program freshly loaded (its state from the start), called on each frame in turn."""
    loaded = program.reloaded()
    return [loaded.run_raw(x)[0] for x in frames]


def _running_mean() -> Reveal:
    program = lower(RunningDenoise(), (frame(0),))
    same = [frame(3)] * 3
    device, eager = device_stream(program, same), eager_stream(RunningDenoise(), same)
    repeats = all(torch.allclose(d, device[0]) for d in device)
    follows = all(torch.allclose(d, e, atol=1e-5) for d, e in zip(device, eager, strict=True))
    actual = "follow eager, call after call" if follows else (
        "repeat the first call's output" if repeats else "change, unlike eager")
    drift = float((device[-1] - eager[-1]).abs().max())
    why_not = {
        "follow eager, call after call": (f"by the third call the .pte differs from eager by {drift:.3f}: eager's "
                                          "mean moved, the program's did not."),
        "repeat the first call's output": "the outputs changed from call to call.",
        "export fails": "export returned a program (with a warning that a kernel hiding warnings does not show).",
    }
    return Reveal(actual, (
        "export ran forward() once: the mean's update happened in that run, on the Python object, and the graph "
        "recorded the mean as the constant it was (zeros). Every call of the .pte starts from zeros again: "
        f"the third output differs from eager by {drift:.3f}."), why_not={
        option: text for option, text in why_not.items() if option != actual})


# ----- 3. strict or not ----------------------------------------------------------------------------
class Clipper(nn.Module):
    """A layer, then post-processing written with NumPy: clip the scores to [-1, 1]."""

    def __init__(self) -> None:
        super().__init__()
        self.proj = seeded_linear(18, SAMPLES, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        scores = self.proj(x)
        return torch.from_numpy(np.clip(scores.detach().numpy(), -1.0, 1.0))


def export_default(model: nn.Module, example: tuple[Any, ...]) -> str:
    """``torch.export.export`` with its defaults: ``"exports"``, or the first line of its error."""
    try:
        torch.export.export(model, example)
    except Exception as exc:  # noqa: BLE001 - the error is what the lesson shows
        return f"{type(exc).__name__}: {str(exc).strip().splitlines()[0]}"
    return "exports"


def clipper_program() -> PteArtifact:
    """:class:`Clipper` exported with ``strict=True`` (Dynamo traces the NumPy calls) and lowered for XNNPACK."""
    return lower_methods({"forward": (Clipper().eval(), (frame(0, rows=2) * 4,))}, strict=True)


def _numpy_default() -> Reveal:
    said = export_default(Clipper().eval(), (frame(0, rows=2),))
    actual = "exports, with the clip in the graph" if said == "exports" else "fails"
    why_not = {
        "exports, with the clip in the graph": f"export returned no program: {said}",
        "exports, with the clip's result baked in": ("nothing was baked in: export stopped at .numpy(), and the "
                                                     "tensors it runs forward() on hold no values to bake."),
        "fails": "it exported.",
    }
    return Reveal(actual, (
        f"torch.export.export defaults to non-strict: it runs forward() as Python, on fake tensors that hold no "
        f"values, and NumPy needs the values. It said: {said}"), why_not={
        option: text for option, text in why_not.items() if option != actual})


# ----- exercise ------------------------------------------------------------------------------------
def _grade_keep_state(answer: Any) -> list[Verdict]:
    criterion = "an nn.Module instance whose forward(x) takes one frame"
    if not isinstance(answer, nn.Module):
        return [Verdict(criterion, False, f"the answer is a {type(answer).__name__}, not an nn.Module instance",
                        "assign an instance: `answer = MyDenoise()`")]
    model = copy.deepcopy(answer).eval()
    verdicts = [Verdict(criterion, True)]
    program, verdict = lowered(copy.deepcopy(model), (frame(0),), hint=(
        "the app calls forward(frame) with one frame; keep that signature"))
    verdicts.append(verdict)
    if program is None:
        return verdicts
    for seed in (7, 8):
        frames = stream(seed)
        device, eager = device_stream(program, frames), eager_stream(RunningDenoise(), frames)
        for i, (d, e) in enumerate(zip(device, eager, strict=True)):
            if d.shape != e.shape or not torch.allclose(d, e, atol=1e-4):
                diff = "shape " + str(tuple(d.shape)) if d.shape != e.shape else f"max |Δ| {(d - e).abs().max():.3f}"
                verdicts.append(Verdict(
                    f"a stream of {STREAM} frames, from a freshly loaded .pte, matches RunningDenoise call by call",
                    False, f"stream {seed - 6}, call {i + 1}: the .pte differs from RunningDenoise ({diff})", (
                        "the mean must live in the program, as state it reads and writes on every call, and start "
                        "from zeros")))
                return verdicts
    verdicts.append(Verdict(
        f"a stream of {STREAM} frames, from a freshly loaded .pte, matches RunningDenoise call by call", True,
        f"2 streams of {STREAM} different frames, each from a fresh load"))
    return verdicts


def solve_keep_state() -> Any:
    """17.keep_state: the mean as a registered buffer, updated in place, so the program holds it as state."""

    class BufferDenoise(nn.Module):
        mean: torch.Tensor  # a buffer: registered in __init__, written by every call

        def __init__(self) -> None:
            super().__init__()
            self.register_buffer("mean", torch.zeros(SAMPLES))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            self.mean.copy_(0.8 * self.mean + 0.2 * x.mean(dim=0))
            return x - self.mean

    return BufferDenoise()


QUESTIONS = [
    Question("17.train_mode", LESSON,
             "FrameScorer is exported as the training loop left it, in training mode, and lowered for XNNPACK. The "
             f"app calls the .pte {CALLS} times with the same frame. Its outputs…",
             ("are all equal, and equal to the model in eval mode", "are all equal, and differ from eval mode",
              "differ from call to call"), _train_mode),
    Question("17.running_mean", LESSON,
             "RunningDenoise is exported (default settings) and lowered. The app calls the .pte three times with "
             "the same frame. Its outputs…",
             ("follow eager, call after call", "repeat the first call's output", "export fails"), _running_mean),
    Question("17.numpy_default", LESSON,
             "Clipper ends its forward() with NumPy: np.clip on scores.detach().numpy(). torch.export.export, "
             "called with its default settings…",
             ("exports, with the clip in the graph", "exports, with the clip's result baked in", "fails"),
             _numpy_default),
]


EXERCISES = [
    Exercise(
        id="17.keep_state", lesson=LESSON, kind="model",
        title="state that survives export",
        goal=("Write a module that does what RunningDenoise does, as a .pte: the app calls forward(frame) once per "
              "frame, and call after call the .pte must return what RunningDenoise returns in eager, from a fresh "
              "load."),
        grade=_grade_keep_state, solve=solve_keep_state,
        context=lambda: {**base_context(), "RunningDenoise": RunningDenoise, "SAMPLES": SAMPLES}),
]


CARDS = [
    Card(
        id="17.module_as_it_is", lesson=LESSON, topic="export", kind="diagnosis",
        question="A model works in your notebook and its .pte gives different answers. Name three things about the "
                 "module itself, not its inputs, that export bakes in, and how you would catch each.",
        answer=("torch.export runs forward() once on the module as it is and records the torch operations. (1) The "
                "mode: a model left in training mode is recorded with dropout (a random mask on every call on the "
                "device) and batch norm on batch statistics (which ExecuTorch 1.5.1 refuses to lower); call "
                ".eval() before export, and compare two calls on one input. (2) Python state: an attribute updated "
                "in forward() is updated once, during the trace, and the graph holds its value then; state that "
                "must persist is a registered buffer updated in place, which the .pte keeps between calls (from its "
                "initial value on each load); test a stream of calls, not one. (3) What is not torch: non-strict "
                "export (the default) runs Python on fake tensors, so NumPy on a tensor fails, while strict=True "
                "(Dynamo) traces NumPy calls into torch operations; keep post-processing in torch or export "
                "strict."),
        points=("one run of forward() on the module as it is",
                "training mode: dropout random per call; batch norm refused",
                "a Python attribute's update is lost; a buffer updated in place is state in the .pte",
                "state starts over on each load",
                "non-strict runs Python on fake tensors: NumPy fails; strict traces it"),
        follow_ups=(
            ("Your exported program was made in training mode. Can you switch it to eval?",
             "Not by calling .eval() on what torch.export gives back: ep.module().eval() raises 'Calling eval() is "
             "not supported yet.' in torch 2.13. The mode was decided when forward() was traced. torchao's "
             "move_exported_model_to_eval (made for quantization-aware training) rewrites dropout and batch norm "
             "patterns in the graph, but whatever forward() decided on self.training stays as traced. Put the "
             "module in eval mode and export again."),
        )),
    Card(
        id="17.random_scores", lesson=LESSON, topic="export", kind="diagnosis", held_back=True,
        question=("QA reports that the on-device classifier gives a different score each time it sees the same "
                  "photo, and never the score the notebook gives. What do you check first, and what is the fix?"),
        answer=("Whether the model was exported in training mode. Export records one run of forward() on the module "
                "as it is, so a model left in training mode keeps its dropout in the program. In ExecuTorch 1.5.1 "
                "it runs on the portable native_dropout kernel, which draws a new mask on every call (its generator "
                "is seeded from std::random_device) and keeps the surviving values unscaled, where torch scales "
                "them by 1/(1-p): the scores match neither eval mode nor torch's training mode. I check "
                "model.training before export, the delegation report (native_dropout on portable kernels), and two "
                "calls on one input. The fix is model.eval() before export and a new export; what export returned "
                "cannot be switched (ep.module().eval() raises). Then two calls must be equal, and equal to eval."),
        points=("export records forward() on the module as it is: training mode included",
                "dropout in the program: a new mask per call on the device",
                "the portable kernel does not scale by 1/(1-p): neither eval nor torch's training mode",
                "check: model.training, native_dropout in the delegation report, two calls on one input",
                "fix: eval() before export, export again; verify repeatable and equal to eval"),
        follow_ups=(
            ("Why does the device never give the notebook's score, even averaged over many calls?",
             "The notebook runs in eval mode, with no dropout at all. The device zeroes activations at random and "
             "does not scale the ones it keeps, so on average each activation after the dropout is 1-p times its "
             "eval value, and the average score differs from eval's instead of converging to it."),
            ("What if the model also had a batch norm?",
             "In training mode batch norm normalises with the batch's statistics and updates its running ones; "
             "ExecuTorch's to_edge refuses the operator that does both (_native_batch_norm_legit_functional is not "
             "core ATen), so the build would have failed loudly. The dropout alone is what let this one ship."),
        )),
]
