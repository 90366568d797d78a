"""Lesson 18 · it built: does it load? A ``.pte`` names its operators and the runtime looks their kernels up when a
method loads, so a program can build and then fail ``load_method`` (``OperatorMissing``, 0x14). Its prediction, its
exercise (``18.median_loads``) and its interview card."""

from __future__ import annotations

import re
import tempfile
from pathlib import Path
from typing import Any

import torch
from torch import nn

from helpers._quiet import captured_output, runtime_log_lines
from helpers._runtime import load_program, registered_operators
from helpers.cache import build_lock, load_entry, program_key, store_entry
from helpers.exercises.grading import Exercise, Verdict, as_model, base_context, lowered, parity
from helpers.interview import Card
from helpers.parity import Probe
from helpers.questions import Question, Reveal
from helpers.serialized import program_operators

LESSON = "18_does_it_load"
WINDOW = 9  # samples per window
ROWS = 4  # windows per call (the program's static shape)


class MedianFilter(nn.Module):
    """Removes spikes from a sensor stream: each window of samples becomes its median."""

    def forward(self, windows: torch.Tensor) -> torch.Tensor:  # (rows, WINDOW) → (rows,)
        ordered = torch.sort(windows, dim=-1).values
        return ordered[..., WINDOW // 2]


def windows(seed: int, rows: int = ROWS) -> torch.Tensor:
    """``rows`` windows of :data:`WINDOW` samples: noise around a level, with one spike each."""
    g = torch.Generator().manual_seed(seed)
    level = torch.randn(rows, 1, generator=g)
    x = level + 0.1 * torch.randn(rows, WINDOW, generator=g)
    spike_at = torch.randint(0, WINDOW, (rows,), generator=g)
    x[torch.arange(rows), spike_at] += 10.0
    return x


def build_like_ci(model: nn.Module, example: tuple[Any, ...], folder: Path) -> Path:
    """What a CI job that builds the app's model does: export, lower for XNNPACK, ``to_executorch``, write the
    file. Nothing loads it."""
    from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
    from executorch.exir import to_edge_transform_and_lower

    with torch.no_grad():
        exported = torch.export.export(model, example)
    program = to_edge_transform_and_lower(exported, partitioner=[XnnpackPartitioner()]).to_executorch()
    path = folder / "model.pte"
    path.write_bytes(program.buffer)
    return path


def built_like_ci(model: nn.Module, example: tuple[Any, ...], folder: Path) -> Path:
    """:func:`build_like_ci`'s file, built once per exported program: the bytes are kept in the lessons' cache
    (:mod:`helpers.cache`) under the key of what ``torch.export`` records for ``model`` and ``example``, with the
    versions of torch and ExecuTorch, so a second Run All copies them instead of lowering again."""
    with torch.no_grad():
        exported = torch.export.export(model, example)
    path = folder / "model.pte"
    path.write_bytes(_kept_ci_build(program_key({"forward": exported}, {}, backend=_CI_BUILD), model, example))
    return path


def _kept_ci_build(key: str, model: nn.Module, example: tuple[Any, ...]) -> bytes:
    with build_lock(key):  # another kernel building the same file: wait for it, then read what it kept
        kept = load_entry(key)
        if kept is not None:
            return kept[0]
        with tempfile.TemporaryDirectory() as scratch:
            pte = build_like_ci(model, example, Path(scratch)).read_bytes()
        store_entry(key, pte, {"key": key, "backend": _CI_BUILD, "method_order": ["forward"], "methods": {}})
        return pte


_CI_BUILD = "xnnpack, stock to_edge_transform_and_lower (lesson 18's build_like_ci)"


def load_and_run(path: Path, example: tuple[Any, ...]) -> tuple[str, list[str]]:
    """What the app does: load the program, load ``forward``, execute, in ExecuTorch's runtime (its compiled
    module, which ``executorch.runtime`` wraps: the same calls and defaults, without importing the compiler).
    Returns ``"ran"`` or the exception's text, and the runtime's log sentences."""
    with captured_output() as log:
        try:
            program = load_program(path.read_bytes())
            program.load_method("forward")(list(example))
            said = "ran"
        except Exception as exc:  # noqa: BLE001 - the runtime's refusal is what the lesson shows
            said = f"{type(exc).__name__}: {exc}"
    # the log lists each argument's dtype and dim order over several lines: keep the sentences
    lines = [line for line in runtime_log_lines(log.getvalue()) if re.search(r"[a-z]{3}", line)
             and not line.startswith("dtype")]
    return said, lines


def missing_operators(pte: bytes) -> dict[str, list[str]]:
    """Per method, the operators the program calls that this runtime has no kernel for (read from the file, nothing
    loaded): what ``load_method`` would refuse with ``OperatorMissing``."""
    have = set(registered_operators())
    return {method: [op for op in ops if op not in have] for method, ops in program_operators(pte).items()}


def _sort_loads() -> Reveal:
    example = (windows(0),)
    with tempfile.TemporaryDirectory() as folder:
        path = built_like_ci(MedianFilter(), example, Path(folder))
        said, log = load_and_run(path, example)
    if said == "ran":
        return Reveal("returns the median", "it loaded and ran.", why_not={
            "fails to load its method": "it loaded.", "returns a wrong answer, silently": "see its output."})
    missing = next((line for line in log if "not found" in line), log[0] if log else said)
    return Reveal("fails to load its method", (
        f"load_method refused it: {said.splitlines()[0]} The runtime's log: {missing} The program names "
        "aten::sort.values, and this runtime has no kernel by that name."), why_not={
        "returns the median": "it never ran: the method did not load.",
        "returns a wrong answer, silently": "nothing ran, and the refusal is loud (at load, not at build)."})


# ----- 3. where it diverges --------------------------------------------------------------------------
class BlockMax(nn.Module):
    """Downsamples a camera frame: each 2×2 block of pixels becomes its largest value."""

    def forward(self, frame: torch.Tensor) -> torch.Tensor:  # (1, 3, 8, 8) → (1, 3, 4, 4)
        return torch.nn.functional.max_pool2d(frame, 2)


def dead_pixel_frame(row: int, col: int, seed: int = 0) -> torch.Tensor:
    """A 1×3×8×8 camera frame whose pixel (``row``, ``col``) of the green channel is dead: NaN."""
    frame = torch.randn(1, 3, 8, 8, generator=torch.Generator().manual_seed(seed))
    frame[0, 1, row, col] = float("nan")
    return frame


def dead_pixel_table() -> list[dict[str, Any]]:
    """For a dead pixel at each position of one 2×2 block (1 = top left … 4 = bottom right): that block's value in
    eager, in a portable ``.pte`` and in the XNNPACK ``.pte``, and the largest live pixel of the block."""
    from helpers.lowering import lower

    example = (dead_pixel_frame(2, 2),)
    xnnpack, portable = lower(BlockMax(), example), lower(BlockMax(), example, backend="portable")
    rows = []
    for position, (row, col) in enumerate(((2, 2), (2, 3), (3, 2), (3, 3)), start=1):
        frame = dead_pixel_frame(row, col)
        block = (0, 1, 1, 1)
        live = torch.nn.functional.max_pool2d(torch.where(frame.isnan(), float("-inf"), frame), 2)
        with torch.no_grad():
            rows.append({"position": position, "eager": BlockMax()(frame)[block].item(),
                         "portable .pte": portable.run_raw(frame)[0][block].item(),
                         "XNNPACK .pte": xnnpack.run_raw(frame)[0][block].item(),
                         "largest live pixel": live[block].item(),
                         "block": [round(v, 3) for v in frame[0, 1, 2:4, 2:4].flatten().tolist()]})
    return rows


def where_it_diverges(model: nn.Module, frame: torch.Tensor) -> Any:
    """The export doctor's stage locator on one input (``extra_inputs``): the :class:`helpers.doctor.locate.Located`
    that follows it through exported program → edge program → portable .pte → XNNPACK .pte, or None when the
    XNNPACK program matches eager on it."""
    from helpers import doctor

    example = torch.randn(1, 3, 8, 8, generator=torch.Generator().manual_seed(1))  # a frame with no dead pixel
    report = doctor.examine(model, (example,), extra_inputs=[(frame,)], target=type(model).__name__)
    return next((found for found in report.located if found.label == "your input 0"), None)


def _dead_pixel_stage() -> Reveal:
    found = where_it_diverges(BlockMax(), dead_pixel_frame(2, 3))
    options = {"exported program": "the exported program", "edge program": "the edge program",
               "portable .pte": "the portable .pte", "delegated .pte": "the XNNPACK .pte only"}
    if found is None or found.first not in options:
        return Reveal("the XNNPACK .pte only", "the .pte matched eager on this frame.", why_not={})
    actual = options[found.first]
    said = {s.name: {"match": "matches", "diverge": "differs from"}.get(s.status, s.status) for s in found.stages}
    why_not = {
        "the exported program": f"the exported program {said['exported program']} eager: export recorded "
                                "max_pool2d as it is.",
        "the edge program": f"the edge program {said['edge program']} eager: no decomposition changed it.",
        "the portable .pte": f"the portable .pte {said.get('portable .pte', 'matches')} eager.",
        "the XNNPACK .pte only": "the portable .pte already differs from eager: XNNPACK is not the first stage to.",
    }
    return Reveal(actual, f"{found.line()}. {found.meaning}.", why_not={
        option: text for option, text in why_not.items() if option != actual})


# ----- exercise -----------------------------------------------------------------------------------
def _median_probes() -> list[Probe]:
    g = torch.Generator().manual_seed(18)
    distinct = torch.randn(ROWS, WINDOW, generator=g)
    ties = torch.tensor([[3.0, 1, 1, 1, 2, 2, 5, 5, 5], [0.0] * WINDOW, [-1.0, -1, -1, -1, -1, 2, 2, 2, 2],
                         [7.0, 7, 7, 7, 7, 7, 7, 7, -7]])
    ascending = torch.sort(torch.randn(ROWS, WINDOW, generator=g), dim=-1).values
    return [
        Probe("spiky sensor windows", (windows(41),)),
        Probe("distinct random values", (distinct,)),
        Probe("repeated values", (ties,)),
        Probe("windows already in ascending order", (ascending,)),
        Probe("windows in descending order", (ascending.flip(-1),)),
        Probe("large negative values", (distinct * 1000 - 5000,)),
    ]


def _grade_median_loads(answer: Any) -> list[Verdict]:
    model, verdict = as_model(answer, MedianFilter())
    if model is None:
        return [verdict]
    verdicts = [verdict]
    art, built = lowered(model, (windows(0),), criterion="exports, lowers and loads in this runtime", hint=(
        "the runtime looks every operator's kernel up by name when the method loads: use operators it has"))
    verdicts.append(built)
    if art is None:
        return verdicts
    verdicts.append(parity(MedianFilter(), art, _median_probes(), criterion=(
        f"the median of each window of {WINDOW}, as MedianFilter computes it"), hint=(
        "the median is the middle value of the window once ordered: the same for any order of the samples")))
    return verdicts


def _live_block_max(frame: torch.Tensor) -> torch.Tensor:
    """The intended downsampling: each 2×2 block's largest *live* pixel (a dead pixel, NaN, never decides)."""
    return torch.nn.functional.max_pool2d(torch.where(frame.isnan(), float("-inf"), frame), 2)


class _LiveBlockMax(nn.Module):
    def forward(self, frame: torch.Tensor) -> torch.Tensor:
        return _live_block_max(frame)


def _dead_pixel_probes() -> list[Probe]:
    probes = []
    for row, col in ((2, 2), (2, 3), (3, 2), (3, 3)):
        probes.append(Probe(f"a dead pixel at ({row}, {col}), position {2 * (row % 2) + col % 2 + 1} of its block",
                            (dead_pixel_frame(row, col, seed=row * 8 + col),)))
    dark = dead_pixel_frame(5, 4, seed=7) - 4.0  # every live pixel negative
    probes.append(Probe("a dark frame (every pixel below 0) with a dead pixel", (dark,)))
    several = dead_pixel_frame(0, 1, seed=9)
    for row, col in ((3, 3), (4, 6), (7, 0)):
        several[0, (row + col) % 3, row, col] = float("nan")
    probes.append(Probe("four dead pixels, in four blocks", (several,)))
    probes.append(Probe("no dead pixel", (torch.randn(1, 3, 8, 8, generator=torch.Generator().manual_seed(11)),)))
    return probes


def _grade_dead_pixels(answer: Any) -> list[Verdict]:
    model, verdict = as_model(answer, BlockMax())
    if model is None:
        return [verdict]
    verdicts = [verdict]
    art, built = lowered(model, (dead_pixel_frame(2, 2),), hint="keep forward(frame) with one frame")
    verdicts.append(built)
    if art is None:
        return verdicts
    probes = _dead_pixel_probes()
    verdicts.append(parity(model, art, probes, criterion="your model's .pte agrees with your model in eager",
                           reference_name="your model in eager", hint=(
        "the same input must give the same answer at every stage: decide what a dead pixel means in the model, "
        "before any kernel has to")))
    if not verdicts[-1].passed:
        return verdicts
    verdicts.append(parity(_LiveBlockMax(), art, probes, criterion=(
        "each block becomes its largest live pixel (a dead one never decides)"), hint=(
        "a dead pixel must lose to every live value of its block, whatever their sign")))
    return verdicts


def solve_dead_pixels() -> Any:
    """18.dead_pixels: a dead pixel becomes -inf before the pooling, so every stage computes the same max."""

    class LiveBlockMax(BlockMax):
        def forward(self, frame: torch.Tensor) -> torch.Tensor:
            live = torch.where(frame.isnan(), float("-inf"), frame)
            return torch.nn.functional.max_pool2d(live, 2)

    return LiveBlockMax()


def solve_median_loads() -> Any:
    """18.median_loads: the median is the (WINDOW // 2 + 1)-th largest value, and this runtime has a kernel for
    topk (not delegated, but loaded)."""

    class TopKMedian(MedianFilter):
        def forward(self, windows: torch.Tensor) -> torch.Tensor:
            return torch.topk(windows, k=WINDOW // 2 + 1, dim=-1).values[..., -1]

    return TopKMedian()


QUESTIONS = [
    Question("18.dead_pixel_stage", LESSON,
             "BlockMax is given a frame whose dead pixel (NaN) is the second of its 2×2 block. Eager's max is NaN "
             "there; the XNNPACK .pte gives a number. Which stage is the first to leave eager?",
             ("the exported program", "the edge program", "the portable .pte", "the XNNPACK .pte only"),
             _dead_pixel_stage),
    Question("18.sort_loads", LESSON,
             "MedianFilter is exported, lowered for XNNPACK and written to model.pte without an error or a "
             "warning. The app loads the program, loads its forward method and calls it. It…",
             ("returns the median", "fails to load its method", "returns a wrong answer, silently"), _sort_loads),
]


EXERCISES = [
    Exercise(
        id="18.median_loads", lesson=LESSON, kind="model",
        title="a median the runtime can load",
        goal=(f"Write a module that computes MedianFilter's median of each window of {WINDOW} samples "
              f"(input ({ROWS}, {WINDOW}), output ({ROWS},)) with operators this runtime has kernels for: the .pte "
              "must load and match MedianFilter on every kind of window."),
        grade=_grade_median_loads, solve=solve_median_loads,
        context=lambda: {**base_context(), "MedianFilter": MedianFilter, "WINDOW": WINDOW}),
    Exercise(
        id="18.dead_pixels", lesson=LESSON, kind="model",
        title="a dead pixel never decides, at any stage",
        goal=("Write BlockMax so that a dead pixel (NaN) never decides its block: each 2×2 block becomes its largest "
              "live pixel, in eager and in the .pte alike, wherever the dead pixel sits in its block (a frame has "
              "at most one per block)."),
        grade=_grade_dead_pixels, solve=solve_dead_pixels,
        context=lambda: {**base_context(), "BlockMax": BlockMax}),
]


CARDS = [
    Card(
        id="18.loads", lesson=LESSON, topic="runtime", kind="diagnosis",
        question="CI exports your model, lowers it and saves the .pte without an error. On the phone, loading it "
                 "fails with error 0x14. What happened, and what do you add to CI?",
        answer=("0x14 is OperatorMissing (runtime/core/error.h). A .pte does not contain kernels: each instruction "
                "names an operator (aten::sort.values), and load_method looks every name up in the kernel "
                "registry of the runtime it runs in. Building never asks that runtime, so a program builds fine "
                "and fails to load where a kernel is missing: ExecuTorch 1.5.1's pip runtime has none for "
                "aten::sort.values, and an app's runtime is often built with only the kernels its models need "
                "(selective build). CI should load every method with the runtime the app ships and run it on "
                "varied inputs; before that, compare the operators the program names with the kernels that "
                "runtime registers. The fix is a model written with operators the runtime has (a median via "
                "topk), or a runtime built with the kernel."),
        points=("0x14 = OperatorMissing",
                "the .pte names operators; kernels are looked up by name at load_method",
                "building never consults the target runtime",
                "CI loads every method with the app's runtime build, and runs it",
                "the program's operator list vs the runtime's registered kernels",
                "fix: supported operators, or a runtime with the kernel"),
        follow_ups=(
            ("Why did export and to_edge accept torch.sort if the runtime cannot run it?",
             "aten.sort is in the core ATen operator set, which is what to_edge checks, and to_executorch only "
             "needs an out variant to write the call. Neither knows which kernels a given runtime was built "
             "with; that is decided when the runtime is compiled, and checked when a method loads."),
            ("It loads, and on some inputs it disagrees with eager. How do you find out whose problem it is?",
             "Run the same input through each stage and compare each with eager: ExportedProgram.module() (the "
             "graph export recorded), the edge program (to_edge's decompositions, as a module), the export lowered "
             "with no delegate (portable kernels, in the runtime), and the shipped delegated program. The first "
             "stage that differs owns it: the exported program means a Python decision taken once (fix the "
             "model); the portable .pte, ExecuTorch's kernels; only the delegated one, the delegate's numerics. "
             "It is per input: a NaN in a 2×2 max pool first differs at the XNNPACK .pte when it is first in its "
             "window, and already at the portable .pte when it is second."),
        )),
    Card(
        id="18.one_camera", lesson=LESSON, topic="runtime", kind="diagnosis", held_back=True,
        question=("A downsampling model (2×2 max pooling, XNNPACK) matches eager on every test frame, but field "
                  "frames from one camera model give -inf in some blocks on the phone. How do you find out whether "
                  "the model, ExecuTorch or the delegate is responsible, and what do you change?"),
        answer=("I take a field frame and run it through each stage, comparing each with eager: the exported "
                "program, the edge program, a portable .pte and the XNNPACK .pte. The first stage that differs owns "
                "it. That camera likely marks dead pixels as NaN: eager's max_pool2d propagates a NaN; ExecuTorch's "
                "portable kernel keeps it only when it is first in its window; XNNPACK gives -inf there, and other "
                "values at other positions. So the ladder says the delegate for some frames and the portable "
                "kernel for others. The fix that holds at every stage is to decide in the model what a dead pixel "
                "means (a NaN becomes -inf before the pooling, so it never wins), and to add NaN frames, with the "
                "NaN at every window position, to the parity probes."),
        points=("run one failing input through exported, edge, portable .pte, delegated .pte",
                "the first stage that differs owns the divergence",
                "NaN: each max_pool2d implementation treats it its own way, by position",
                "fix in the model: decide what a NaN means before any kernel does",
                "probes with NaN at every window position"),
        follow_ups=(
            ("Why did the test frames pass?",
             "They had no NaN. The implementations agree on finite values and differ only in how they treat a NaN, "
             "and even then by its position in the window, so a probe set without NaN, or with one in a single "
             "position, passes."),
            ("What if the exported program itself had differed from eager?",
             "Then the model is the cause, not ExecuTorch: export took a Python decision once (a shape, a flag, a "
             "value) and recorded one path. The fix is in forward(): tensor operations for the decision, or a "
             "contract that keeps the input out, and the later stages need not be looked at."),
        )),
]
