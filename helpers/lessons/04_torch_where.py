"""Lesson 04 · ``torch.where``: its predictions, its exercise (``04.where_rewrite``) and its interview card."""

from __future__ import annotations

from typing import Any

import torch

from helpers.exercises.grading import (
    Exercise,
    Verdict,
    as_model,
    base_context,
    has_control_flow,
    lowered,
    parity,
    sided_probes,
)
from helpers.inputs import seeded_randn, seeded_values
from helpers.interview import Card
from helpers.lessons.control_flow_fixes import GatedProj
from helpers.lowering import lower
from helpers.parity import Probe
from helpers.questions import Question, Reveal

LESSON = "04_torch_where"


# ----- predictions --------------------------------------------------------------------------------
def _heavy_count() -> Reveal:
    from helpers.lessons.control_flow_fixes import HeavyWhere

    big = seeded_randn(32, 128)
    art = lower(HeavyWhere(), (big,))
    graph = art.graph()
    n = graph.count("aten.linear")
    branches = graph.count("torch.ops.higher_order")
    return Reveal(str(n), (f"all {n}: the graph is straight-line and every node runs for every input. torch.where "
                           "needs both of its inputs, so the whole MLP is computed before the selection throws its "
                           "result away."), why_not={
        "0": (f"skipping the MLP would need a branch in the graph; it has {branches} control-flow operators, and its "
              f"{n} aten.linear nodes all sit before the where that picks x * 0.5."),
        "1": (f"no node can stop the MLP after its first layer: with {branches} control-flow operators the runtime "
              f"walks all {n} linear nodes in order, every call."),
    })


def _heavy_faster() -> Reveal:
    from helpers.lessons.control_flow_fixes import HeavyCond, HeavyWhere
    from helpers.timing import median_latency_ms

    big = seeded_randn(32, 128)
    heavy_side = big.abs() + 0.1
    art_where, art_cond = lower(HeavyWhere(), (big,)), lower(HeavyCond(), (big,))
    t_where = median_latency_ms(art_where, (heavy_side,), repeat=30)
    t_cond = median_latency_ms(art_cond, (heavy_side,), repeat=30)
    winner = "torch.where" if t_where < t_cond else "torch.cond"
    cond_portable = art_cond.delegation().portable_nodes
    return Reveal(winner, (f"measured now: where {t_where:.3f} ms, cond {t_cond:.3f} ms per call (median of 30). "
                           "Both run the MLP; where runs it on XNNPACK, cond inside a branch on portable kernels."),
                  why_not={
        "torch.cond": (f"cond took {t_cond / t_where:.0f}× where's time: on this input it skips nothing (the MLP "
                       f"side is taken), and {cond_portable} of its nodes run on portable kernels, the "
                       "branch's MLP among them: XNNPACK never saw it (lesson 03)."),
    })


# ----- exercise -----------------------------------------------------------------------------------
_GATE_SIDES = ("x.sum() > 0", "x.sum() <= 0")


def gate_probes() -> list[Probe]:
    """Both sides of ``x.sum() > 0``, with all-positive / all-negative inputs, mixed signs, and the edge (zeros)."""
    g = torch.Generator().manual_seed(4)
    base = torch.randn(3, 4, generator=g)
    mixed_up = base - base.mean() + 0.3  # mixed signs, sum > 0
    mixed_down = base - base.mean() - 0.3  # mixed signs, sum < 0
    hand_picked = sided_probes(lambda x: x.sum(), (3, 4), _GATE_SIDES, per_side=0, extra=(
        ("all positive", base.abs() + 0.1), ("all negative", -(base.abs() + 0.1)),
        ("mixed signs", mixed_up), ("mixed signs", mixed_down), ("zeros", torch.zeros(3, 4))))
    random_signs = sided_probes(lambda x: x.sum(), (3, 4), _GATE_SIDES, per_side=2, seed=5)
    return hand_picked + [Probe(p.label.replace(" #", ": random signs #"), p.args) for p in random_signs]


def _grade_where_rewrite(answer: Any) -> list[Verdict]:
    reference = GatedProj()
    model, verdict = as_model(answer, reference)
    verdicts = [verdict]
    if model is None:
        return verdicts
    art, verdict = lowered(model, (seeded_values((3, 4), "random", 1),), hint=(
        "torch.where(condition, a, b) needs a and b computed first: compute both sides, then select."))
    verdicts.append(verdict)
    if art is None:
        return verdicts
    delegation = art.delegation()
    if has_control_flow(art):
        verdicts.append(Verdict(
            "no control flow in the graph", False,
            f"the program keeps a torch.cond; its branches run on portable kernels ({delegation.summary()})",
            "both sides here are one cheap elementwise step after the same projection: compute both and select "
            "the result, so the graph stays straight-line."))
        return verdicts
    verdicts.append(Verdict("no control flow in the graph", True, "straight-line"))
    linear = {op: counts for op, counts in delegation.by_op().items() if "linear" in op or "addmm" in op}
    on_xnnpack = bool(linear) and all(d > 0 and p == 0 for d, p in linear.values())
    missing = "the projection is not in the program at all" if not linear else "the linear layer is not delegated"
    verdicts.append(Verdict(
        "XNNPACK runs the projection", on_xnnpack,
        f"{delegation.summary()}" if on_xnnpack else f"{missing}: {delegation.summary()}",
        "" if on_xnnpack else "GatedProj's output comes from self.proj(x) on both sides: keep that call, as a "
        "plain nn.Linear in the main graph."))
    if not on_xnnpack:
        return verdicts
    verdicts.append(parity(reference, art, gate_probes(),
                           criterion="matches GatedProj on both sides, and on inputs with mixed signs", hint=(
                               "GatedProj decides ONCE for the whole input, from x.sum(); the condition you give "
                               "torch.where must be that same single decision, broadcast over every element.")))
    return verdicts


def solve_where_rewrite() -> Any:
    """04.where_rewrite: one decision for the whole input, as arithmetic."""
    class GatedProjForExport(GatedProj):
        def forward(self, x):
            y = self.proj(x)
            return torch.where(x.sum() > 0, torch.relu(y), y * 0.1)  # one decision for the whole input


    return GatedProjForExport()


QUESTIONS = [
    Question("04.heavy_count", LESSON,
             "HeavyWhere selects between a 6-layer MLP and x * 0.5 with torch.where. For an input that takes the "
             "cheap side, how many linear layers does the .pte execute?", ("0", "1", "6"), _heavy_count),
    Question("04.heavy_faster", LESSON,
             "The input takes the heavy (MLP) side. Which .pte is faster on this machine?",
             ("torch.where", "torch.cond"), _heavy_faster),
]


EXERCISES = [
    Exercise(
        id="04.where_rewrite", lesson=LESSON,
        title="turn GatedProj's branch into arithmetic with torch.where",
        goal=("GatedProj applies relu or a 0.1 damping to one projection, by the sign of x.sum(). Rewrite "
              "forward() with torch.where: no control flow in the graph, the projection on XNNPACK, and the same "
              "outputs as GatedProj on both sides, including inputs with mixed signs."),
        grade=_grade_where_rewrite, solve=solve_where_rewrite,
        context=lambda: {**base_context(), "GatedProj": GatedProj}),
]


CARDS = [
    Card(
        id="04.where_tradeoff", lesson=LESSON, topic="torch.where", kind="trade-off",
        question="When would you use torch.where instead of torch.cond for a branch in an exported model?",
        answer=("torch.where selects values; it is not control flow, so the graph stays straight-line, nothing is "
                "specialised or guarded, and the partitioner sees every node, so XNNPACK takes whatever it has rules for "
                "(in lesson 04 the linear layers; the reduction, the comparison and the where itself stay on portable "
                "kernels), where a cond's branches would all run on portable kernels. The price is that both sides "
                "are always computed, so it suits cheap or elementwise branches and wastes work when one side is "
                "an expensive subnetwork. The discarded side must also be safe to compute: an integer division by "
                "zero or an out-of-range index fails on the device even though its result would be thrown away. "
                "And the condition must be the same decision as the original: a per-element mask is not a "
                "whole-input if. If one side is expensive, I measure torch.cond against it, or hoist the decision "
                "into the app."),
        points=("straight-line: no specialization, fully delegable",
                "both sides always computed: cheap/elementwise yes, expensive subnetwork no",
                "the discarded side must still be valid (integer division, indexing)",
                "keep the same decision (whole-input predicate vs per-element mask)",
                "measure against cond; consider hoisting")),
]
