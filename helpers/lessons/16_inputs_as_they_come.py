"""Lesson 16 · inputs as they come: a dict, keyword arguments and a dataclass become a flat list of tensors on the
device, in the order export flattened them; ``dynamic_shapes`` mirrors the inputs' structure. Its predictions, its
exercise (``16.nested_spec``) and its interview card."""

from __future__ import annotations

import contextlib
import dataclasses
import logging
from collections.abc import Iterator
from typing import Any

import torch
from torch import nn
from torch.export import Dim

from helpers._quiet import log_records
from helpers.artifact import PteArtifact, RuntimeRejectedError
from helpers.doctor.spec import FlatSpec, SpecError, flatten_spec
from helpers.exercises.grading import Exercise, Verdict, base_context, lowered, parity
from helpers.interview import Card
from helpers.lowering import lower
from helpers.models import seeded_linear
from helpers.parity import Probe
from helpers.questions import Question, Reveal

LESSON = "16_inputs_as_they_come"
SAMPLES = 8  # samples per frame


def _values(shape: tuple[int, ...], seed: int) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


class Denoise(nn.Module):
    """Subtracts the noise estimate from the signal, then a layer: the inputs come as one dict, as the data loader
    gives them."""

    def __init__(self) -> None:
        super().__init__()
        self.proj = seeded_linear(16, SAMPLES, SAMPLES)

    def forward(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        clean = batch["signal"] - batch["noise"]
        return self.proj(clean)


def loader_batch(seed: int = 0, rows: int = 2) -> dict[str, torch.Tensor]:
    """One batch of ``rows`` frames as the training code's data loader gives it: a dict whose keys are in
    alphabetical order."""
    signal, noise = _values((rows, SAMPLES), seed), _values((rows, SAMPLES), seed + 100) * 0.1
    return dict(sorted({"signal": signal, "noise": noise}.items()))


def lower_structured(model: nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any] | None = None,
                     dynamic_shapes: Any = None) -> tuple[PteArtifact, FlatSpec]:
    """Lower a model whose inputs are nested (a dict, keyword arguments, a registered dataclass) for XNNPACK.

    ``helpers.lower`` takes tensors one by one; this exports the model behind a ``forward`` that takes its tensors
    one by one *in the order torch.export flattens* ``(args, kwargs)`` (the doctor's ``flatten_spec``), which is the
    order of the ``.pte``'s inputs. Returns the program and the flat spec (its ``names`` are the inputs in order).
    """
    flat = flatten_spec({"model": model, "args": args, "kwargs": kwargs or {}, "dynamic_shapes": dynamic_shapes})
    return lower(flat.model, flat.example_args, dynamic_shapes=flat.dynamic_shapes), flat


def denoise_program() -> tuple[PteArtifact, FlatSpec]:
    """Denoise exported with the data loader's batch as the example, lowered for XNNPACK."""
    return lower_structured(Denoise(), (loader_batch(),))


class DenoiseApp(nn.Module):
    """The fix at the program's boundary: positional inputs in an order anyone can read from the signature, the
    dict built inside."""

    def __init__(self) -> None:
        super().__init__()
        self.model = Denoise()

    def forward(self, signal: torch.Tensor, noise: torch.Tensor) -> torch.Tensor:
        return self.model({"signal": signal, "noise": noise})


class KeywordDenoise(nn.Module):
    """:class:`Denoise` with keyword-only inputs."""

    def __init__(self) -> None:
        super().__init__()
        self.proj = seeded_linear(16, SAMPLES, SAMPLES)

    def forward(self, *, signal: torch.Tensor, noise: torch.Tensor) -> torch.Tensor:
        return self.proj(signal - noise)


@dataclasses.dataclass
class Frames:
    """The batch as a dataclass: fields in this order."""

    signal: torch.Tensor
    noise: torch.Tensor


class DataclassDenoise(nn.Module):
    """:class:`Denoise` taking a :class:`Frames`."""

    def __init__(self) -> None:
        super().__init__()
        self.proj = seeded_linear(16, SAMPLES, SAMPLES)

    def forward(self, frames: Frames) -> torch.Tensor:
        return self.proj(frames.signal - frames.noise)


def export_input_names(model: nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any] | None = None) -> list[str]:
    """The exported program's user inputs, in order (torch.export only; nothing is lowered)."""
    from torch.export.graph_signature import InputKind

    exported = torch.export.export(model, args, kwargs)
    return [spec.arg.name for spec in exported.graph_signature.input_specs if spec.kind == InputKind.USER_INPUT]


def register_frames() -> None:
    """``torch.export.register_dataclass(Frames)``, once per process (registering again warns that it overwrites
    the first registration: a cell run twice would print it)."""
    from torch.utils._pytree import SUPPORTED_NODES

    if Frames not in SUPPORTED_NODES:
        torch.export.register_dataclass(Frames)


RECORDED_ROWS = (5, 3)  # the app's traffic recorded on test phones: batches of these many frames


def recorded_inputs() -> torch.export.AdditionalInputs:
    """The app's recorded batches (:data:`RECORDED_ROWS` frames) as ``torch.export.AdditionalInputs``: export
    infers which axes vary from them and the example."""
    recorded = torch.export.AdditionalInputs()
    for i, rows in enumerate(RECORDED_ROWS):
        recorded.add((loader_batch(seed=20 + i, rows=rows),))
    return recorded


@contextlib.contextmanager
def spec_log() -> Iterator[list[str]]:
    """The messages ``torch.export`` logs about a ``dynamic_shapes`` spec while the block runs (its logger
    ``torch.export.dynamic_shapes``), collected into the list instead of printed: the lessons' kernel hides torch's
    log lines, which carry timestamps."""
    with log_records("torch.export.dynamic_shapes", logging.WARNING, keep=logging.LogRecord.getMessage) as said:
        yield said


def inferred_program() -> tuple[PteArtifact, FlatSpec]:
    """Denoise exported with the 2-row example and the ``dynamic_shapes`` that :func:`recorded_inputs` infers,
    lowered for XNNPACK."""
    example = (loader_batch(),)
    return lower_structured(Denoise(), example, dynamic_shapes=recorded_inputs().dynamic_shapes(Denoise(), example))


def save_and_load(exported: torch.export.ExportedProgram) -> torch.export.ExportedProgram:
    """``torch.export.save`` to a ``.pt2`` file in a temporary folder, then ``torch.export.load`` it."""
    import tempfile
    from pathlib import Path

    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "model.pt2"
        torch.export.save(exported, path)
        return torch.export.load(path)


# ----- predictions --------------------------------------------------------------------------------
def _key_order() -> Reveal:
    art, flat = denoise_program()
    batch = loader_batch(seed=3)
    app_order = (batch["signal"], batch["noise"])  # forward() reads signal, then noise
    with torch.no_grad():
        eager = Denoise()(batch)
    try:
        (out,) = art.run_raw(*app_order)
    except Exception as exc:  # noqa: BLE001 - a refusal is an answer too
        return Reveal("refuses them", f"the runtime refused: {str(exc).splitlines()[0]}", why_not={
            "returns a wrong answer, silently": "nothing came back.", "matches eager": "nothing came back."})
    diff = float((out - eager).abs().max())
    actual = "matches eager" if diff < 1e-4 else "returns a wrong answer, silently"
    why_not = {
        "refuses them": (f"the runtime checks each input's shape and dtype, and both are {tuple(batch['signal'].shape)} "
                         "float32: nothing tells it which is which."),
        "matches eager": (f"it differs from eager by up to {diff:.2f}: the program's first input is "
                          f"`{flat.names[0]}`, the data loader's first key."),
        "returns a wrong answer, silently": f"it matched eager (max |Δ| {diff:.1e}).",
    }
    return Reveal(actual, (
        f"the program's inputs are {', '.join(flat.names)}, in the example dict's key order; the app sent signal "
        f"first, so the program computed noise - signal: max |Δ| {diff:.2f} from eager, and no error."), why_not={
        option: text for option, text in why_not.items() if option != actual})


def _recorded_batches() -> Reveal:
    program, flat = inferred_program()
    batch = loader_batch(seed=20, rows=RECORDED_ROWS[0])  # the first recorded batch, as it was added
    with torch.no_grad():
        eager = Denoise()(batch)
    planned = program.runtime_input_shapes()[0] or ()  # the first input's planned (largest) shape
    try:
        (out,) = program.run_raw(*(batch[name.removeprefix("batch_")] for name in flat.names))
    except RuntimeRejectedError as exc:
        return Reveal("refuses it", (
            f"the runtime refused the {RECORDED_ROWS[0]}-row batch: {exc.reason} The inferred axis is Dim.DYNAMIC, "
            f"which has no max; ExecuTorch planned that axis at the example's size: {planned} per input."), why_not={
            "matches eager": "nothing came back: the runtime refused the inputs before running.",
            "returns a wrong answer, silently": "nothing came back: the refusal is loud."})
    diff = float((out - eager).abs().max())
    actual = "matches eager" if diff < 1e-4 else "returns a wrong answer, silently"
    return Reveal(actual, f"it ran: max |Δ| from eager {diff:.1e}; planned input shape {planned}.", why_not={
        option: "it ran without an error." if option == "refuses it" else f"max |Δ| from eager was {diff:.1e}."
        for option in ("refuses it", "matches eager", "returns a wrong answer, silently") if option != actual})


# ----- exercise -----------------------------------------------------------------------------------
FEATURES = 8


class Scorer(nn.Module):
    """Scores each sequence of a batch (4 scores), given a prompt per sequence. ``batch`` holds ``tokens`` (batch,
    tokens, 8) and ``mask`` (batch, tokens, 1): 1 for a real token, 0 for padding; ``prompt`` is (batch, prompt, 8)."""

    def __init__(self) -> None:
        super().__init__()
        self.proj = seeded_linear(17, FEATURES, 4)

    def forward(self, batch: dict[str, torch.Tensor], *, prompt: torch.Tensor) -> torch.Tensor:
        mask = batch["mask"]
        pooled = (batch["tokens"] * mask).sum(dim=1) / mask.sum(dim=1)
        return self.proj(pooled + prompt.mean(dim=1))


BATCH, TOKENS, PROMPT = (1, 4), (2, 64), (2, 8)  # what the app sends: sequences per call, tokens, prompt tokens


def scorer_inputs(batch: int, tokens: int, prompt: int, seed: int = 0) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """``(args, kwargs)`` for :class:`Scorer`: random tokens, a mask with some padding, a prompt."""
    mask = (torch.arange(tokens).expand(batch, tokens) < max(1, tokens - seed % 3)).float().unsqueeze(-1)
    return ({"tokens": _values((batch, tokens, FEATURES), seed), "mask": mask},), {
        "prompt": _values((batch, prompt, FEATURES), seed + 50)}


def _scorer_probes() -> list[tuple[str, tuple[int, int, int]]]:
    sizes = [(BATCH[0], TOKENS[0], PROMPT[0]), (BATCH[1], TOKENS[1], PROMPT[1]), (3, 37, 5), (BATCH[0], TOKENS[1], 3),
             (BATCH[1], 5, PROMPT[0]), (2, 16, 4)]
    return [(f"batch {b}, {t} tokens, a prompt of {p}", (b, t, p)) for b, t, p in sizes]


def _grade_nested_spec(answer: Any) -> list[Verdict]:
    criterion = "dynamic_shapes that fit Scorer's inputs"
    if not isinstance(answer, (dict, tuple, list)):
        return [Verdict(criterion, False, f"the answer is a {type(answer).__name__}", (
            "assign the dynamic_shapes structure itself: a dict keyed by forward()'s argument names"))]
    args, kwargs = scorer_inputs(2, 16, 4)
    try:
        flat = flatten_spec({"model": Scorer(), "args": args, "kwargs": kwargs, "dynamic_shapes": answer},
                            where="your answer")
    except SpecError as exc:
        return [Verdict(criterion, False, str(exc), (
            "dynamic_shapes mirrors the inputs: one entry per argument of forward() (keyword ones included), and "
            "inside a dict input one entry per key"))]
    verdicts = [Verdict(criterion, True, f"the program's inputs: {', '.join(flat.names)}")]
    art, verdict = lowered(flat.model, flat.example_args, flat.dynamic_shapes, hint=(
        "one Dim per quantity the app varies: axes that hold the same quantity share it"))
    verdicts.append(verdict)
    if art is None:
        return verdicts
    probes = [Probe(label, flat.model.flatten_inputs(*scorer_inputs(b, t, p, seed=b * 100 + t + p)))
              for label, (b, t, p) in _scorer_probes()]
    verdicts.append(parity(flat.model, art, probes, criterion=(
        f"every size the app sends runs and matches Scorer ({BATCH[0]}–{BATCH[1]} sequences, {TOKENS[0]}–"
        f"{TOKENS[1]} tokens, prompts of {PROMPT[0]}–{PROMPT[1]})"), hint=(
        "each axis the app varies needs a Dim whose range holds what it sends")))
    if not verdicts[-1].passed:
        return verdicts
    planned = dict(zip(flat.names, art.runtime_input_shapes()))
    want = {"batch_tokens": (BATCH[1], TOKENS[1], FEATURES), "batch_mask": (BATCH[1], TOKENS[1], 1),
            "prompt": (BATCH[1], PROMPT[1], FEATURES)}
    over = {name: shape for name, shape in planned.items() if name in want and shape != want[name]}
    verdicts.append(Verdict("the memory plan holds the largest call the app makes, no more", not over, (
        "planned: " + ", ".join(f"{n} {planned[n]}" for n in want if n in planned)), "" if not over else (
        "ExecuTorch reserves each input's largest shape on every call: make each max what the app sends")))
    return verdicts


def solve_nested_spec() -> Any:
    """16.nested_spec: one Dim per quantity the app varies, shared by every axis that holds it; the structure
    mirrors forward(batch, *, prompt)."""
    batch = Dim("batch", min=1, max=4)
    tokens = Dim("tokens", min=2, max=64)
    prompt_tokens = Dim("prompt_tokens", min=2, max=8)
    return {
        "batch": {"tokens": {0: batch, 1: tokens}, "mask": {0: batch, 1: tokens}},
        "prompt": {0: batch, 1: prompt_tokens},
    }


QUESTIONS = [
    Question("16.key_order", LESSON,
             "Denoise was exported with the data loader's batch as the example. The app sends the two tensors in "
             "the order forward() reads them: signal, then noise. The .pte…",
             ("refuses them", "returns a wrong answer, silently", "matches eager"), _key_order),
    Question("16.recorded_batches", LESSON,
             f"Denoise is exported with the 2-row example and dynamic_shapes=AdditionalInputs holding the app's "
             f"recorded batches of {' and '.join(map(str, RECORDED_ROWS))} rows; verify() accepts every one. "
             f"Lowered for XNNPACK, the .pte is given the recorded {RECORDED_ROWS[0]}-row batch, in its input "
             "order. It…",
             ("matches eager", "refuses it", "returns a wrong answer, silently"), _recorded_batches),
]


EXERCISES = [
    Exercise(
        id="16.nested_spec", lesson=LESSON, kind="spec",
        title="dynamic_shapes for nested inputs",
        goal=("Write the dynamic_shapes for Scorer(batch, *, prompt): the app sends 1 to 4 sequences per call, of 2 "
              "to 64 tokens, with prompts of 2 to 8 tokens. Every such call must run on the device and match eager, "
              "and the memory plan must hold the largest call, no more."),
        grade=_grade_nested_spec, solve=solve_nested_spec,
        context=lambda: {**base_context(), "Scorer": Scorer}),
]


CARDS = [
    Card(
        id="16.input_order", lesson=LESSON, topic="inputs", kind="constraints",
        question="Your model takes a dict of tensors and keyword arguments. What does the .pte take, and what can go "
                 "wrong between the person who exports it and the app that calls it?",
        answer=("torch.export flattens (args, kwargs) with torch's pytree: a dict in the order of the example's keys, "
                "keyword arguments in the order they were passed to export (not forward()'s signature), a "
                "dataclass (registered with torch.export.register_dataclass) in its fields' order. The .pte takes "
                "that flat list of tensors; the runtime checks each one's shape and dtype, not which tensor it is. "
                "Two inputs of the same shape sent in another order run and give a wrong answer silently. So fix "
                "the order at the boundary: export a wrapper with positional inputs, publish the input names with "
                "the program, and test the app's call against eager. dynamic_shapes mirrors the same structure: a "
                "dict of the argument names, a dict per dict input, and one Dim shared by every axis that holds the "
                "same quantity."),
        points=("pytree order: dict keys as in the example, kwargs as passed, dataclass fields",
                "the runtime takes a flat list and checks shapes and dtypes only",
                "same-shape inputs swapped: silent",
                "fix at the boundary: positional wrapper, names published, the app's call tested",
                "dynamic_shapes mirrors the inputs; shared quantities share a Dim"),
        follow_ups=(
            ("You let torch.export.AdditionalInputs infer dynamic_shapes from recorded traffic, and its verify() "
             "accepts every recorded input. Can the .pte still refuse that traffic?",
             "Yes. AdditionalInputs marks each axis whose size varies as Dim.DYNAMIC, which has no max, and verify() "
             "checks the exported program on the host, where an unbounded size fits anything. ExecuTorch has to "
             "plan memory, and it plans an axis without a max at the example's size: a recorded batch larger than "
             "the example is refused at set_inputs. Use what it inferred to see which axes vary, then write named "
             "Dims with the app's min and max."),
            ("The program records the input structure. Why does the app still get it wrong?",
             "ExecuTorch writes export's input spec into the program (the execution plan's container metadata), "
             "but the runtime does not use it: execute() takes a flat list of values. An app in C++ or Kotlin "
             "builds that list by hand, so the order is a contract between two people unless the boundary makes "
             "it obvious."),
        )),
    Card(
        id="16.stereo_order", lesson=LESSON, topic="inputs", kind="diagnosis", held_back=True,
        question=("A stereo audio model takes a dict {'left': ..., 'right': ...}. After a refactor of the Android app "
                  "its .pte gives wrong results on some recordings and right ones on mono recordings; no error, and "
                  "the .pte did not change. What do you suspect, and how do you confirm it?"),
        answer=("That the app now sends the two channels in another order. The .pte takes a flat list of tensors in "
                "the order export flattened the inputs (a dict in the example's key order), and the runtime checks "
                "each input's shape and dtype, not which tensor it is: two channels of the same shape swap "
                "silently. Mono recordings hide it, since both channels are equal. I confirm it by reading the "
                "program's input names in order and comparing them with the list the app builds, and by a parity "
                "test of the app's own call on a recording whose channels differ. The fix is at the boundary: "
                "export a wrapper with positional inputs, publish the names with the program, keep that test."),
        points=("the .pte's inputs are a flat list in export's flattening order",
                "the runtime checks shapes and dtypes, not identity: same-shape inputs swap silently",
                "mono (symmetric) inputs hide the swap",
                "confirm: the program's input names vs the app's list; parity on asymmetric inputs",
                "fix: a positional wrapper, names published, the app's call tested"),
        follow_ups=(
            ("Why were the mono recordings right?",
             "Both channels hold the same samples, so sending them in the other order gives the model the same two "
             "tensors: a swap cannot show. Only an input whose channels differ tells the two orders apart, which is "
             "why a parity test needs inputs that are not symmetric."),
            ("What if the two inputs had different static shapes?",
             "Then the runtime would refuse the swapped call when it sets the inputs, naming the expected and the "
             "received shape: a loud error on the first call. The silent case needs inputs of one shape and dtype, "
             "which is common: two channels, a pair of images, two embeddings."),
        )),
]
