"""Lesson 08 · what dynamic costs: its predictions, its exercises and its interview cards."""

from __future__ import annotations

from typing import Any

from torch.export import Dim

from helpers import models as M
from helpers.exercises.grading import (
    Exercise,
    Verdict,
    base_context,
    dynamic_shapes_answer,
    host_run,
    lowered,
    parity,
)
from helpers.interview import Card
from helpers.lessons.shapes import TinySegmenter
from helpers.lowering import lower
from helpers.parity import Probe
from helpers.questions import Question, Reveal

LESSON = "08_cost_of_dynamic"


# ----- predictions ----------------------------------------------------------------------------------
def _segmenter(max_side: int | None):
    from helpers.lessons import shapes

    return shapes.segmenter_program(max_side=max_side)[1]


def _segmenter_delegation() -> Reveal:
    from helpers.lessons.shapes import declined_reasons

    art = _segmenter(128)
    d = art.delegation()
    total = d.delegated_nodes + d.portable_nodes
    if d.portable_nodes == 0:
        answer = "all of it"
    elif d.delegated_nodes * 2 < total:
        answer = "less than half"
    elif len(d.portable_ops()) == 1:
        answer = "all but one operator"
    else:
        answer = "most, but several operators"
    why = "; ".join(f"{op}: {', '.join(words)}" for op, words in declined_reasons(art).items())
    ops = ", ".join(d.portable_ops())
    return Reveal(answer, (f"{d.summary()}. Left on portable kernels — {why} (XNNPACK's own words). The model still "
                           "runs, split into two delegate calls with a portable kernel between them."), why_not={
        "all of it": f"{d.portable_nodes} node(s) stay on portable kernels: {ops}.",
        "most, but several operators": (f"one kind of operator was declined ({ops}); every other node, "
                                        f"{d.delegated_nodes} of {total}, went to XNNPACK."),
        "less than half": f"{d.delegated_nodes} of {total} nodes are delegated ({d.coverage:.0%}).",
    })


def _classifier_portable() -> Reveal:
    from helpers.lessons import shapes

    hw = {"x": {2: Dim("height", min=32, max=128), 3: Dim("width", min=32, max=128)}}
    art = lower(M.TinyVision(), (shapes.camera_frame(64, 64),), dynamic_shapes=hw)
    d = art.delegation()
    answer = "all" if d.delegated_nodes == 0 else str(d.portable_nodes) if d.portable_nodes < 3 else "3 or more"
    declined = "none" if not d.declined else ", ".join(row["op"] for row in d.declined)
    some = (f"would need XNNPACK to decline an operator for its symbolic size, as it did the segmenter's upsample; "
            f"the report lists {d.portable_nodes} portable node(s) and declined: {declined}")
    return Reveal(answer, (f"{d.summary()}: convolutions, relu, a mean over height and width and a linear head all "
                           "have XNNPACK rules that hold for symbolic sizes. Whether dynamic costs delegation depends "
                           "on the operators: look, per model."), why_not={
        "1": f"one portable node {some}.",
        "2": f"two portable nodes {some}.",
        "3 or more": f"three or more {some}.",
        "all": (f"XNNPACK took {d.delegated_nodes} nodes in {d.delegated_subgraphs} subgraph(s): a symbolic size "
                "does not stop the partitioner from taking an operator whose rule accepts it."),
    })


def _raise_max() -> Reveal:
    small, big = _segmenter(128), _segmenter(256)
    d1, d2 = small.delegation(), big.delegation()
    same = (d1.delegated_nodes, d1.portable_nodes) == (d2.delegated_nodes, d2.portable_nodes)
    grew = big.planned_memory_bytes() > small.planned_memory_bytes()
    answer = {(True, True): "only the arena", (False, False): "only delegation", (False, True): "both",
              (True, False): "neither"}[(same, grew)]
    a1, a2 = small.planned_memory_bytes(), big.planned_memory_bytes()
    delegation = (f"{d1.delegated_nodes} → {d2.delegated_nodes} nodes delegated, {d1.portable_nodes} → "
                  f"{d2.portable_nodes} on portable kernels")
    return Reveal(answer, (f"Delegation: {delegation} (the partitioner declines by kind of size, symbolic or not, not "
                           f"by how large it may get). Arena: {a1:,} → {a2:,} bytes (planned for the max)."), why_not={
        "only delegation": f"delegation did not change ({delegation}); the arena did: {a1:,} → {a2:,} bytes.",
        "both": f"delegation did not change: {delegation}.",
        "neither": f"the arena grew {a2 / a1:.1f}× ({a1:,} → {a2:,} bytes): it is planned for the largest input allowed.",
    })


QUESTIONS = [
    Question("08.segmenter_delegation", LESSON,
             "TinySegmenter exported with height and width dynamic (32..128). The static export is 100% on XNNPACK. "
             "How much of the dynamic program's graph stays on XNNPACK?",
             ("all of it", "all but one operator", "most, but several operators", "less than half"),
             _segmenter_delegation),
    Question("08.classifier_portable", LESSON,
             "TinyVision (lesson 06's classifier) exported with the same dynamic height and width. How many of its "
             "graph nodes run on portable kernels?", ("0", "1", "2", "3 or more", "all"), _classifier_portable),
    Question("08.raise_max", LESSON,
             "Raise the dynamic segmenter's max from 128 to 256 (height and width). What changes?",
             ("only the arena", "only delegation", "both", "neither"), _raise_max),
]


# ----- exercises ------------------------------------------------------------------------------------
ARENA_BUDGET = 432 * 1024  # bytes the app can give this model's memory plan
# The frames the fleet's cameras deliver (height × width). The tallest and the widest come from different cameras:
# one square max for both axes (the lesson's table) is either too small for one of them or over the budget.
FLEET = ((48, 64), (96, 64), (64, 112))


def _grade_arena_budget(answer: Any) -> list[Verdict]:
    from helpers.lessons import shapes

    verdicts = [dynamic_shapes_answer(answer, ("x",))]
    if not verdicts[0].passed:
        return verdicts
    reference = shapes.TinySegmenter()
    art, verdict = lowered(reference, (shapes.camera_frame(64, 64),), answer, hint=(
        "height is axis 2 and width axis 3 of x (1, 3, H, W); the 64×64 example must be inside every range"))
    verdicts.append(verdict)
    if art is None:
        return verdicts
    probes = [Probe(f"the fleet's {h}×{w} frame" + ("" if seed == 0 else f" (seed {seed})"),
                    (shapes.camera_frame(h, w, seed=seed),)) for h, w in FLEET for seed in (0, 1)]
    verdicts.append(parity(reference, art, probes, run=host_run(art),
                           criterion="every frame of the fleet passes the host check, runs and matches eager", hint=(
                               "each camera size must be inside the contract: the largest frame sets the max")))
    if not verdicts[-1].passed:
        return verdicts
    arena = art.planned_memory_bytes()
    verdicts.append(Verdict(
        f"the memory plan fits the budget of {ARENA_BUDGET:,} bytes", arena <= ARENA_BUDGET,
        f"the arena is {arena:,} bytes" + ("" if arena <= ARENA_BUDGET else f", {arena - ARENA_BUDGET:,} over"),
        "the arena is planned for the largest frame the contract allows (it grows with height × width): give each "
        "Dim the largest size the fleet really sends"))
    return verdicts


def solve_arena_budget() -> Any:
    """The solution of 08.arena_budget."""
    # The arena is planned for the max of each Dim (it grows with max height × max width): give each axis the largest
    # size the fleet sends on that axis, 96 tall and 112 wide, not one square size for both.
    height = Dim("height", min=32, max=96)
    width = Dim("width", min=32, max=112)
    return {"x": {2: height, 3: width}}


EXERCISES = [
    Exercise(
        id="08.arena_budget", lesson=LESSON,
        title="a dynamic segmenter for the whole fleet, within the arena budget",
        goal=(f"Write the dynamic_shapes for TinySegmenter (example: a 64×64 frame) so that the fleet's frames "
              f"({', '.join(f'{h}×{w}' for h, w in FLEET)}) pass the host check, run and match eager, and the memory "
              f"plan's arena is at most {ARENA_BUDGET:,} bytes."),
        grade=_grade_arena_budget, solve=solve_arena_budget,
        context=lambda: {**base_context(), "TinySegmenter": TinySegmenter}, kind="dynamic_shapes"),
]

CARDS = [
    Card(
        id="08.cost_of_dynamic", lesson=LESSON, topic="the cost of dynamic shapes",
        kind="conceptual",
        question=("What does making a dimension dynamic cost on the device?"),
        answer=("Three things. Export may add guards on the dynamic size, which I answer with a bounded or "
                "derived Dim or host-side arithmetic. The partitioner may decline operators it cannot prove for "
                "symbolic sizes, like a bilinear upsample with a dynamic output size; they fall back to portable "
                "kernels silently, so I read the delegation report and its reasons. And the arena is planned for "
                "the max and held for every input. The shape itself costs little per call: the runtime resizes the "
                "input, and XNNPACK propagates shapes through its graph before every run, static or not. So I compare "
                "delegation and arena with the static export, "
                "measure latency over repeated runs, and often normalize on the host or use buckets instead."),
        points=("guards on dynamic dimensions (bounded or derived Dim, or host-side arithmetic)",
                "reduced delegation: the partitioner declines ops with symbolic sizes; silent unless you measure",
                "the arena is planned for the max and held for every input",
                "measure delegation, arena and latency against the static export; consider host normalization or buckets")),
    Card(
        id="08.shape_change_cost", lesson=LESSON, topic="the cost of dynamic shapes", kind="trade-off",
        held_back=True,
        question="On a delegated program with a dynamic height and width, what does a call with a new frame size "
                 "cost?",
        answer=("Little by itself. The runtime resizes each dynamic input to the shape it receives, within the "
                "capacity planned for the Dim's max, and the XNNPACK delegate propagates the input shapes through "
                "its graph before every run, static program or not (its prepare step calls xnn_reshape_runtime on "
                "each call). What costs is what the partitioner declined because a size is symbolic: a portable "
                "kernel and an extra delegate call on the path of every call, plus an arena planned for the max and "
                "held for every input. So I read the delegation report first, then time the runtime call alone, per "
                "model, saying how many threads the runtime used."),
        points=("a resize within the planned capacity; XNNPACK reshapes its graph on every call anyway",
                "the real cost: operators declined for a symbolic size run on portable kernels, split delegate calls",
                "the arena is planned for the max and held always; measure per model, the runtime call alone"),
        follow_ups=(
            ("Why can the same dynamic program be slower than its static twin on one model and not on another?",
             "Because the cost sits in the operators the partitioner declines, and that depends on the model: "
             "lesson 08's segmenter lost its upsample to the portable kernels, while the classifier, with the same "
             "dynamic height and width, stayed entirely on XNNPACK and ran the same operators as its static twin."),
            ("What if the partitioner declines nothing?",
             "Then both programs run the same delegated operators; what remains is the resize bookkeeping and the "
             "larger arena planned for the max. Measure it anyway, on the device: do not conclude from one model "
             "that dynamic is slow, or free."),
        )),
]
