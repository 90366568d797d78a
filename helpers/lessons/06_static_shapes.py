"""Lesson 06 · static shapes are the default: its predictions, its exercises and its interview cards."""

from __future__ import annotations

import contextlib
import itertools
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch
from torch.export import Dim

from helpers import models as M
from helpers.artifact import RuntimeRejectedError
from helpers.display import error_excerpt
from helpers.exercises.grading import (
    Exercise,
    Verdict,
    base_context,
    function_answer,
)
from helpers.interview import Card
from helpers.lowering import lower
from helpers.questions import STATUS_OPTIONS, Question, Reveal

LESSON = "06_static_shapes"


# ----- predictions ----------------------------------------------------------------------------------
def _vision():
    from helpers.lessons import shapes

    model = M.TinyVision()
    return model, lower(model, (shapes.camera_frame(64, 64),))


def _static_frame(tensor: torch.Tensor, what: str) -> Reveal:
    """The .pte on ``tensor`` as the device sends it: the runtime's shape check refuses it before any operator."""
    _model, art = _vision()
    (recorded,) = art.runtime_input_shapes()
    assert recorded is not None
    try:
        art.run_raw(tensor)
    except RuntimeRejectedError as exc:
        axis = next(i for i, (got, want) in enumerate(zip(tensor.shape, recorded, strict=True)) if got != want)
        refused = (f"the runtime compares the input's sizes one by one with the recorded "
                   f"{'×'.join(map(str, recorded))} (axis {axis} is {tensor.shape[axis]}, not {recorded[axis]}) and "
                   "refused it before any operator ran")
        return Reveal("rejected", (f"{what}. The runtime compares every input with the sizes and dtype the .pte "
                                   f"recorded ({'×'.join(map(str, recorded))}, float32) and refuses anything else. "
                                   f"Its words: {exc.reason.split('. Error')[0]}."), why_not={
            "match": f"there is no answer to match: {refused}.",
            "diverge": ("a divergence is a wrong answer the device computed, and it computed none: the refusal comes "
                        "first, at the input check."),
        })
    raise AssertionError(f"the runtime ran a {tuple(tensor.shape)} input on a program exported at {recorded}: "
                         "lesson 06 teaches that it refuses it")


def _camera_frame() -> Reveal:
    from helpers.lessons import shapes

    frame = shapes.camera_frame(48, 64)
    return _static_frame(frame, "A 48×64 frame on a program exported at 64×64")


def _same_pixels() -> Reveal:
    from helpers.lessons import shapes

    frame = shapes.camera_frame(32, 128)
    return _static_frame(frame, "32×128 has the same 4,096 pixels as 64×64, but another shape")


def _channels_last() -> Reveal:
    from helpers.lessons import shapes

    frame = shapes.camera_frame(64, 64)
    return _static_frame(frame.permute(0, 2, 3, 1).contiguous(),
                         "1×64×64×3 has the same elements, dtype and rank, but its axes in another order")


QUESTIONS = [
    Question("06.camera_frame", LESSON,
             "TinyVision was exported with a 1×3×64×64 example. The phone's camera delivers 1×3×48×64 frames, which "
             "eager PyTorch accepts. What does the .pte do with one, in the ExecuTorch runtime?",
             STATUS_OPTIONS, _camera_frame),
    Question("06.same_pixels", LESSON,
             "Same program (exported at 64×64). A 32×128 frame has exactly as many pixels (4,096) as a 64×64 one. "
             "What does the runtime do with it?", STATUS_OPTIONS, _same_pixels),
    Question("06.channels_last", LESSON,
             "Same program. The camera's raw buffer is channels-last: 1×64×64×3, float32 — the same number of "
             "elements, the same dtype and the same rank as the export's 1×3×64×64. What does the runtime do?",
             STATUS_OPTIONS, _channels_last),
]


# ----- exercises ------------------------------------------------------------------------------------
# Each check builds its files from the next of these (static frame side, token length, dynamic max height and
# width), so what one check's files record is not what the next check's record: an answer that looks shapes up
# by file instead of reading them fails. (Three, so a lesson's checks reuse cached programs after the first three.)
SIGNATURE_VARIANTS = ((64, 12, 96, 128), (48, 20, 80, 112), (80, 8, 112, 96))
_CHECKS = itertools.count()


def _signature_files(folder: Path, variant: tuple[int, int, int, int]) -> dict[str, tuple[Path, list[tuple[int, ...]]]]:
    """Three real programs, saved as .pte files, with the input shapes their MethodMeta records."""
    from helpers.lessons import shapes

    side, length, max_height, max_width = variant
    vision = M.TinyVision()
    static = lower(vision, (shapes.camera_frame(side, side),))
    tokens = M.TokenPool()
    ids = torch.randint(0, 32, (1, length), generator=torch.Generator().manual_seed(6))
    pair = lower(tokens, (ids, torch.ones(1, length)))
    hw = {"x": {2: Dim("height", min=32, max=max_height), 3: Dim("width", min=32, max=max_width)}}
    dynamic = lower(vision, (shapes.camera_frame(64, 64),), dynamic_shapes=hw)
    files = {}
    for name, art in (("one_input.pte", static), ("two_inputs.pte", pair), ("dynamic_input.pte", dynamic)):
        shapes_read = art.runtime_input_shapes()
        assert all(s is not None for s in shapes_read), name  # tensor inputs only
        files[name] = (art.save(folder / name), [tuple(s) for s in shapes_read if s is not None])
    return files


@contextlib.contextmanager
def _programs_kept_alive() -> Iterator[None]:
    """Keep every program the learner's function loads alive until the check ends.

    A ``MethodMeta`` points into its program without owning it: ``load_program(path).metadata(...)``
    read after the program was garbage-collected reads freed memory. The lesson says to keep the
    program; the check must not crash the kernel when a first attempt does not.
    """
    from executorch.runtime import Runtime

    kept: list[Any] = []
    original = Runtime.load_program

    def load_and_keep(self, *args, **kwargs):
        program = original(self, *args, **kwargs)
        kept.append(program)
        return program

    Runtime.load_program = load_and_keep
    try:
        yield
    finally:
        Runtime.load_program = original
        _KEPT.extend(kept)  # MethodMeta objects the learner still holds may point into them


_KEPT: list[Any] = []


def _as_shapes(value: Any) -> list[tuple[int, ...]] | None:
    try:
        return [tuple(int(s) for s in shape) for shape in value]
    except TypeError:
        return None


def _grade_read_signature(answer: Any) -> list[Verdict]:
    verdicts = [function_answer(answer, "input_shapes")]
    if not verdicts[0].passed:
        return verdicts
    criterion = "returns every input's shape, as the .pte records it, for every file"
    variant = SIGNATURE_VARIANTS[next(_CHECKS) % len(SIGNATURE_VARIANTS)]
    with tempfile.TemporaryDirectory() as tmp, _programs_kept_alive():
        files = _signature_files(Path(tmp), variant)
        for name, (path, truth) in files.items():
            try:
                got = answer(str(path))
            except Exception as exc:  # noqa: BLE001 - the learner's code may fail in any way
                verdicts.append(Verdict(criterion, False, f"on {name}: your function raised {error_excerpt(exc, 2)}",
                                        "load the file with Runtime.get().load_program(path) and keep that program "
                                        "in a variable while you read program.metadata('forward')"))
                return verdicts
            shapes = _as_shapes(got)
            if shapes != truth:
                verdicts.append(Verdict(criterion, False, f"on {name}: your function returned {got!r}, not the shapes "
                                        "this file records", _signature_hint(shapes, truth)))
                return verdicts
    verdicts.append(Verdict(criterion, True, "3 files: one static input, two inputs, a dynamic input (its max shape)"))
    return verdicts


def _signature_hint(got: list[tuple[int, ...]] | None, truth: list[tuple[int, ...]]) -> str:
    if got is None:
        return "return a list with one tuple of ints per input, e.g. [(1, 16), (1, 16)]"
    if len(got) < len(truth):
        return "this file has more than one input: MethodMeta says how many (num_inputs()); read each TensorInfo"
    return ("read the sizes from the file you are given (MethodMeta → input_tensor_meta(i).sizes()), not from "
            "the lesson's program: each file records its own contract")


def solve_read_signature() -> Any:
    """The solution of 06.read_signature."""
    from executorch.runtime import Runtime


    def input_shapes(pte_path):
        program = Runtime.get().load_program(pte_path)  # keep it: the MethodMeta points into it
        meta = program.metadata("forward")
        return [tuple(meta.input_tensor_meta(i).sizes()) for i in range(meta.num_inputs())]


    return input_shapes


EXERCISES = [
    Exercise(
        id="06.read_signature", lesson=LESSON,
        title="read every input's shape from a .pte file, with the runtime bindings",
        goal=("Write input_shapes(pte_path) -> list[tuple[int, ...]]: the shape of every input of the forward "
              "method, read from the .pte file itself through executorch.runtime (MethodMeta), not from what "
              "Python remembered at export time. It is checked on three real files."),
        grade=_grade_read_signature, solve=solve_read_signature,
        context=base_context, kind="function"),
]

CARDS = [
    Card(
        id="06.static_reject", lesson=LESSON, topic="static shapes and memory planning",
        kind="conceptual",
        question=("Why does an exported ExecuTorch model reject a different input size on the device?"),
        answer=("Export specializes by default: it runs forward() once and records the example's sizes as "
                "constants, so reshapes and broadcasts are fixed. That is deliberate: with every size known, "
                "to_executorch() plans one arena with a fixed offset per tensor, and the runtime's instructions "
                "run without allocating (a delegate like XNNPACK still allocates its packed weights and workspace "
                "when the method loads, outside the arena). The runtime compares each input with the shape and dtype in the .pte and refuses "
                "anything else; nothing resizes or recompiles on the phone. I read the .pte's MethodMeta to "
                "confirm, then normalize on the host, declare a bounded Dim, or ship buckets."),
        points=("the example's sizes are recorded as constants (specialization is the default)",
                "static sizes make ahead-of-time memory planning possible: the arena is sized before the program runs "
                "(a delegate's packed weights and workspace come on top)",
                "the runtime checks the input against the recorded shape/dtype and refuses; nothing recompiles on device",
                "read the signature from the .pte (MethodMeta), then choose: normalize, bounded Dim, or buckets")),
    Card(
        id="06.what_the_app_holds", lesson=LESSON, topic="static shapes and memory planning", kind="constraints",
        held_back=True,
        question="The .pte's memory plan says its arena is 8 KB. How much memory does the app need to run it?",
        answer=("More than the arena. The arena holds the intermediates the runtime's instructions need, planned at "
                "export. The program's bytes stay loaded too, weights included, and when a method loads, XNNPACK "
                "rebuilds its graph and packs the weights into memory it allocates itself, next to a workspace for "
                "its own intermediates. In lesson 06, WideMLP had an 8 KB arena and 8.4 MB of weights, and the "
                "process grew by about the weights again when its method loaded. I budget arena plus program plus "
                "the delegate's packed weights and workspace, and measure the process on the device."),
        points=("the arena is only the planned intermediates, fixed at export",
                "the program's bytes (weights) stay loaded; the delegate packs its own copy and has a workspace",
                "measure what the process holds with the method loaded, not the plan alone"),
        follow_ups=(
            ("Why does the delegate keep a second copy of the weights?",
             "XNNPACK's kernels read weights in their own packed layout, so when the delegate is initialised it "
             "packs them into memory it allocates; the program's serialized weights stay where they are. Lesson 06 "
             "measured it: the process grows by about the weights' size when the method loads."),
            ("What if the app keeps three methods of the program loaded?",
             "Each loaded method gets its own planned buffers unless the program is loaded through a C++ Module "
             "with share_memory_arenas, so the activation memory is the sum of their plans (lesson 09 measured the "
             "sum against the largest). Measure with every method the app keeps loaded."),
        )),
]
