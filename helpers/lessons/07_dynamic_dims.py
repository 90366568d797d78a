"""Lesson 07 · declaring dimensions dynamic: its predictions, its exercises and its interview cards."""

from __future__ import annotations

import math
from typing import Any

import torch
from torch.export import Dim

from helpers import models as M
from helpers.artifact import RuntimeRejectedError
from helpers.display import fmt
from helpers.exercises.grading import (
    Exercise,
    Verdict,
    base_context,
    dynamic_shapes_answer,
    host_run,
    lowered,
    parity,
    refused_on_host,
)
from helpers.inputs import seeded_values
from helpers.interview import Card
from helpers.lessons.shapes import ChunkMean
from helpers.lowering import lower
from helpers.parity import Probe, check_one
from helpers.questions import STATUS_OPTIONS, Question, Reveal

LESSON = "07_dynamic_dims"


# ----- predictions ----------------------------------------------------------------------------------
def _seeded_clip(frames: int, seed: int) -> torch.Tensor:
    return torch.randn(1, frames, 4, generator=torch.Generator().manual_seed(seed))


def _one_frame() -> Reveal:
    model = M.ShapeBranch()
    art = lower(model, (_seeded_clip(8, 0),), dynamic_shapes={"x": {1: Dim("frames", min=2, max=16)}})
    row = check_one(model, art, (_seeded_clip(1, 1),))
    assert row.pte_output is not None and row.eager_output is not None, row  # it ran on both sides
    (out,) = row.pte_output
    (capacity,) = art.runtime_input_shapes()
    return Reveal(row.status, (
        f"The runtime ran it: the .pte returns {_fmt(out)}, eager {_fmt(row.eager_output[0])}. The graph only holds "
        "the normalising branch, and the standard deviation of one value is NaN."), why_not={
        "match": (f"the .pte's answer is {_fmt(out)}: NaN, where eager skips the normalisation for one frame and "
                  "returns numbers."),
        "rejected": (f"the runtime ran it and returned an answer: the .pte records a capacity "
                     f"({'×'.join(map(str, capacity or ()))}), not the Dim's min, and export's range asserts are "
                     "stripped, so a 1-frame clip fits and nothing refuses it."),
    })


def _fmt(t: torch.Tensor) -> str:

    return fmt(t)


def _bounded_vision():
    from helpers.lessons import shapes

    model = M.TinyVision()
    hw = {"x": {2: Dim("height", min=32, max=128), 3: Dim("width", min=32, max=128)}}
    return model, lower(model, (shapes.camera_frame(64, 64),), dynamic_shapes=hw)


def _wide_frame() -> Reveal:
    from helpers.lessons import shapes

    _, art = _bounded_vision()
    frame = shapes.camera_frame(100, 150)
    (out,) = art.run_raw(frame)
    (capacity,) = art.runtime_input_shapes()
    assert capacity is not None
    room, need = math.prod(capacity), frame.numel()
    return Reveal("runs it", (
        f"The runtime ran it. For a dynamic input the .pte records one maximum shape ({'×'.join(map(str, capacity))}, "
        f"{room:,} elements) and the runtime checks rank, dtype and that the input fits in that many elements: "
        f"1×3×100×150 is {need:,}. Width 150 > max 128 went unnoticed."), why_not={
        "rejects it": (f"it returned a {'×'.join(map(str, out.shape))} answer: {need:,} elements fit the capacity of "
                       f"{room:,}, and the per-axis max (128) is a bound export checks in Python, not one the .pte "
                       "holds."),
    })


def _auto_tokens() -> Reveal:
    model = M.TokenPool()
    ids = torch.randint(0, 32, (1, 16), generator=torch.Generator().manual_seed(3))
    art = lower(model, (ids, torch.ones(1, 16)), dynamic_shapes={"ids": {1: Dim.AUTO}, "mask": {1: Dim.AUTO}})
    request = torch.randint(0, 32, (1, 40), generator=torch.Generator().manual_seed(4))
    planned = art.runtime_input_shapes()
    try:
        art.run_raw(request, torch.ones(1, 40))
    except RuntimeRejectedError as exc:
        return Reveal("rejects it", (
            "Dim.AUTO records no max, and ExecuTorch cannot plan memory for 'unbounded': it plans the axis at the "
            f"example's size (16 tokens). The runtime's words: {exc.reason.split('. Error')[0]}."), why_not={
            "runs it": (f"the .pte's inputs are planned at {', '.join('×'.join(map(str, p or ())) for p in planned)}: "
                        "room for 16 tokens, and 40 do not fit, so the runtime stops at its input check."),
        })
    raise AssertionError("the runtime ran 40 tokens on a Dim.AUTO program planned at 16: lesson 07 teaches that it "
                         "refuses them")


def _auto_loop() -> Reveal:
    x = torch.randn(3, 4, generator=torch.Generator().manual_seed(5))
    art = lower(M.BatchLoop(), (x,), dynamic_shapes={"x": {0: Dim.AUTO}})
    contract = art.input_contract()
    axis = contract.inputs[0].axes[0]
    try:
        with torch.no_grad():
            torch.export.export(M.BatchLoop(), (x,), dynamic_shapes={"x": {0: Dim.DYNAMIC}})
        strict = "exports too"
    except Exception as exc:  # noqa: BLE001 - the error is the evidence
        strict = f"raises {type(exc).__name__}"
    return Reveal("a static batch, silently" if axis.size is not None else "a dynamic batch", (
        f"Export succeeded without a word, and the contract says {contract.signature()}: the batch is a constant "
        f"{axis.size}. range(x.shape[0]) needed a Python int, so export specialized the axis; with Dim.AUTO that is "
        "allowed, not an error."), why_not={
        "export fails": (f"export returned a program: Dim.AUTO lets it make an axis static where it cannot keep it "
                         f"dynamic. The same export with Dim.DYNAMIC, which does not allow that, {strict}."),
        "a dynamic batch": (f"the program's contract is {contract.signature()}: axis 0 is the constant {axis.size}, "
                            "so it takes a batch of exactly that size."),
    })


QUESTIONS = [
    Question("07.one_frame", LESSON,
             "ShapeBranch was exported with Dim('frames', min=2, max=16). A one-frame clip reaches the device "
             "(no host check). Compared with eager PyTorch, the .pte…", STATUS_OPTIONS, _one_frame),
    Question("07.wide_frame", LESSON,
             "TinyVision exported with Dim('height', min=32, max=128) and Dim('width', min=32, max=128). The device "
             "sends a 1×3×100×150 frame (width above its max) straight to the runtime. The runtime…",
             ("runs it", "rejects it"), _wide_frame),
    Question("07.auto_tokens", LESSON,
             "TokenPool exported with Dim.AUTO on the sequence axis of ids and mask, with a 16-token example. A "
             "40-token request reaches the runtime. The runtime…", ("runs it", "rejects it"), _auto_tokens),
    Question("07.auto_loop", LESSON,
             "BatchLoop (a Python for over x.shape[0]) exported with Dim.AUTO on the batch axis, example batch 3. "
             "What does export produce?", ("export fails", "a dynamic batch", "a static batch, silently"), _auto_loop),
]


# ----- exercises ------------------------------------------------------------------------------------
_CLIP = (1, 8, 4)  # the example clip: 8 frames of 4 features
APP_FRAMES = (4, 24)  # the clips the app records: 4 to 24 frames (not the lesson's 2 to 16)


def _clip(frames: int, kind: str = "random", seed: int = 0) -> torch.Tensor:
    return seeded_values((1, frames, 4), kind, 100 + 7 * frames + seed)


def _grade_bound_dim(answer: Any) -> list[Verdict]:
    verdicts = [dynamic_shapes_answer(answer, ("x",))]
    if not verdicts[0].passed:
        return verdicts
    reference = M.ShapeBranch()
    art, verdict = lowered(reference, (_clip(8),), answer, hint=(
        "dynamic_shapes maps forward()'s argument to {axis: Dim(name, min=..., max=...)}; the example has 8 frames, "
        "so the range must contain 8"))
    verdicts.append(verdict)
    if art is None:
        return verdicts
    probes = [Probe(f"a clip of {n} frames ({kind} values)", (_clip(n, kind),))
              for n in (APP_FRAMES[0], APP_FRAMES[0] + 1, 8, APP_FRAMES[1] - 1, APP_FRAMES[1])
              for kind in ("random", "positive", "large")]
    verdicts.append(parity(reference, art, probes, run=host_run(art),
                           criterion=f"the app's clips ({APP_FRAMES[0]}–{APP_FRAMES[1]} frames) pass the host check, "
                                     "run and match eager", hint=(
                               "every length the app sends must be inside the contract, and the memory plan must "
                               "hold the longest clip: what does ExecuTorch plan for an axis without a max?")))
    if not verdicts[-1].passed:
        return verdicts
    one = _clip(1)
    refused, words = refused_on_host(art, (one,))
    if not refused:
        (device,) = art.run_raw(one)
        with torch.no_grad():
            eager = reference(one)
        verdicts.append(Verdict(
            "a one-frame clip is outside the contract (refused on the host)", False,
            f"a one-frame clip is inside your contract: the host check lets it through, the .pte returns "
            f"{_fmt(device)}, eager {_fmt(eager)}",
            "export traced forward() assuming at least 2 frames (0/1 specialization), so only the normalising branch "
            "is in the graph; declare the range the graph really supports"))
        return verdicts
    verdicts.append(Verdict("a one-frame clip is outside the contract (refused on the host)", True,
                            f"run() refuses it: {words.split('. Fix')[0]}"))
    axis = art.input_contract().inputs[0].axes[1]
    longest = APP_FRAMES[1]
    needed = lower(reference, (_clip(8),), dynamic_shapes={"x": {1: Dim("frames", min=2, max=longest)}})
    if axis.planned is None or axis.planned > longest:
        verdicts.append(Verdict(
            f"the memory plan holds {longest} frames, not more", False,
            f"your program plans {axis.planned} frames: an arena of {art.planned_memory_bytes():,} bytes, where "
            f"{longest} frames need {needed.planned_memory_bytes():,}",
            "the arena is planned for the Dim's max and held on every call: make the max the longest clip the app sends"))
        return verdicts
    verdicts.append(Verdict(f"the memory plan holds {longest} frames, not more", True,
                            f"arena {art.planned_memory_bytes():,} bytes for at most {axis.planned} frames"))
    return verdicts


def solve_bound_dim() -> Any:
    """The solution of 07.bound_dim."""
    # forward() only normalises when x.shape[1] > 1: export traced it with >= 2 frames, so the graph holds from 2 on;
    # the app's clips start at 4 (min=4 is right too). The max is the longest clip the app sends: the arena is
    # planned for it.
    return {"x": {1: Dim("frames", min=2, max=24)}}


def _rows(length: int, kind: str = "random") -> torch.Tensor:
    return seeded_values((2, length), kind, 300 + length)


def _grade_derived_dim(answer: Any) -> list[Verdict]:
    verdicts = [dynamic_shapes_answer(answer, ("x",))]
    if not verdicts[0].passed:
        return verdicts
    reference = ChunkMean()
    art, verdict = lowered(reference, (_rows(32),), answer, hint=(
        "read what torch suggests: a root Dim, and T derived from it"))
    verdicts.append(verdict)
    if art is None:
        return verdicts
    probes = [Probe(f"T={t} ({kind} values)", (_rows(t, kind),)) for t in (8, 12, 16, 36, 60, 64)
              for kind in ("random", "large")]
    verdicts.append(parity(reference, art, probes, run=host_run(art),
                           criterion="every T = 8, 12, …, 64 passes the host check, runs and matches eager", hint=(
                               "the root Dim is the length of one chunk (T / 4): its max sets the longest T the program accepts")))
    if not verdicts[-1].passed:
        return verdicts
    refused, words = refused_on_host(art, (_rows(30),))
    if not refused:
        verdicts.append(Verdict("T=30 is refused on the host", False,
                                "T=30 (not a multiple of 4) passes your host check and reaches the runtime",
                                "make T a multiple of 4 (the number of chunks) in the contract, so the host check refuses 30"))
        return verdicts
    verdicts.append(Verdict("T=30 is refused on the host", True, words.split(". Fix")[0]))
    longest = 64
    planned = art.input_contract().inputs[0].axes[1].planned
    above, _ = refused_on_host(art, (_rows(longest + 4),))
    if planned is None or planned > longest or not above:
        needed = lower(reference, (_rows(32),), dynamic_shapes={"x": {1: 4 * Dim("chunk", min=2, max=longest // 4)}})
        verdicts.append(Verdict(
            f"the memory plan holds T = {longest}, not more", False,
            f"your program plans rows of T = {planned} (an arena of {art.planned_memory_bytes():,} bytes, where "
            f"T = {longest} needs {needed.planned_memory_bytes():,}), and T = {longest + 4} passes your host check",
            "the arena is planned for the largest T the contract allows and held on every call"))
        return verdicts
    verdicts.append(Verdict(f"the memory plan holds T = {longest}, not more", True,
                            f"rows of at most T = {planned}; T = {longest + 4} is refused on the host"))
    static = lower(reference, (_rows(32),))
    mine, theirs = art.delegation(), static.delegation()
    left = "; ".join(f"{op}: {', '.join(why)}" for op, why in _reasons(art).items()) or "nothing"
    verdicts.append(Verdict(
        "delegation re-checked: as much of the graph on XNNPACK as the static export",
        mine.delegated_nodes >= theirs.delegated_nodes,
        f"{mine.delegated_nodes} of {mine.delegated_nodes + mine.portable_nodes} nodes delegated (static export: "
        f"{theirs.delegated_nodes} of {theirs.delegated_nodes + theirs.portable_nodes}); on portable kernels: {left}",
        "a dynamic size can make the partitioner decline operators: compare art.delegation() with the static export"))
    return verdicts


def _reasons(art: Any) -> dict[str, list[str]]:
    from helpers.lessons.shapes import declined_reasons

    return declined_reasons(art)


def solve_derived_dim() -> Any:
    """The solution of 07.derived_dim."""
    # The view splits each row into 4 chunks of T / 4 values: declare the chunk length and derive T from it (what torch
    # suggests).
    chunk = Dim("chunk", min=2, max=16)  # T from 8 to 64
    return {"x": {1: 4 * chunk}}


EXERCISES = [
    Exercise(
        id="07.bound_dim", lesson=LESSON,
        title="a frame range for the app's clips that ShapeBranch's graph really supports",
        goal=("The app records clips of 4 to 24 frames. Write the dynamic_shapes for ShapeBranch (example: 8 frames) "
              "so that every clip the app records passes the host check, runs and matches eager, a one-frame clip is "
              "outside the contract (refused on the host by run, not silently run), and the memory plan holds the "
              "longest clip, not more."),
        grade=_grade_bound_dim, solve=solve_bound_dim,
        context=lambda: {**base_context(), "ShapeBranch": M.ShapeBranch}, kind="dynamic_shapes"),
    Exercise(
        id="07.derived_dim", lesson=LESSON,
        title="answer ChunkMean's guard with a derived Dim",
        goal=("ChunkMean views each row of x (B, T) as 4 chunks. Write the dynamic_shapes so that every T that is a "
              "multiple of 4 from 8 to 64 exports, passes the host check, runs and matches eager, T=30 is refused on "
              "the host, the memory plan holds T = 64 and not more, and the delegation report is no worse than the "
              "static export's."),
        grade=_grade_derived_dim, solve=solve_derived_dim,
        context=lambda: {**base_context(), "ChunkMean": ChunkMean}, kind="dynamic_shapes"),
]

CARDS = [
    Card(
        id="07.declare_dynamic", lesson=LESSON, topic="Dim, shared Dims, bounds and Dim.AUTO",
        kind="constraints",
        question=("How do you export a model whose input length varies, and what must you get right about the Dim?"),
        answer=("I declare it: dynamic_shapes maps each varying axis to a named Dim with a min and a max, and one"
                " shared Dim object ties axes that must be equal, like ids and mask. The max sizes the memory "
                "plan; without one, ExecuTorch plans the example's size and longer inputs are rejected in "
                "production. The min must be what the graph supports: export traces dynamic sizes as at least 2. "
                "Dim.AUTO can come out static silently, so I read the contract. And the runtime only checks rank,"
                " dtype and capacity, so the app checks the contract and CI probes every edge."),
        points=("a named Dim with min and max; one shared Dim object ties equal axes",
                "no max: ExecuTorch plans the example's size (not a conservative worst case), longer inputs rejected",
                "0/1 specialization: sizes traced as >= 2; a min of 1 or a size-1 example is a trap",
                "Dim.AUTO may silently specialize: read the contract; ship explicit bounds",
                "the runtime does not check min or ties: validate on the host, probe the edges in CI")),
    Card(
        id="07.one_frame_nan", lesson=LESSON, topic="Dim, shared Dims, bounds and Dim.AUTO",
        kind="diagnosis",
        question=("Clips of 2 to 16 frames work on the device, but a one-frame clip returns NaN, although the "
                  "export declared Dim('frames', min=2, max=16). What happened, and what do you change?"),
        answer=("forward() normalises only when there is more than one frame. Export traced the axis in [2, 16], "
                "so that test was simply true and only the normalising branch is in the graph; one frame gives a "
                "standard deviation of NaN. ExecuTorch strips export's range checks: the runtime checks rank, "
                "dtype and capacity, not the Dim's min, so it ran the clip. The min is honest; the fix is a host-"
                "side contract check before calling the model, a separate one-frame path in the app (what eager "
                "does for one frame; padding does not work here: a repeated frame has a standard deviation of 0, "
                "and a zero frame changes the statistics), and the min edge in the CI probes."),
        points=("export decided the shape branch from the traced range (sizes >= 2): one branch in the graph",
                "ExecuTorch strips export's asserts: min is not checked on device",
                "host-side contract check before calling the model",
                "CI parity probes at min, max and one step beyond each"),
        follow_ups=(
            ("Why does export raise for `if x.shape[0] > 4:` over a range of 1 to 16, but not for `> 1` over 2 to 16?",
             "`> 1` holds for every size in 2..16, and export traces a dynamic size as at least 2 anyway, so there "
             "is nothing to guard. `> 4` can go either way inside 1..16, so export adds a guard and stops with "
             "'Constraints violated', suggesting a range on one side of 4 (lesson 02's BatchGate)."),
            ("What if the export had declared min=1 instead?",
             "Then a one-frame clip is inside the contract, and export still traces the axis as at least 2: the "
             "branch is decided the same way, the host check lets the clip through, and the device returns NaN "
             "inside its own contract (lesson 07's trap). Declare the range the graph really supports."),
        ),
        held_back=True),
]
