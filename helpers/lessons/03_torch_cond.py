"""Lesson 03 · ``torch.cond``: its predictions, its exercise (``03.cond_rewrite``) and its interview card."""

from __future__ import annotations

import copy
from typing import Any

import torch

from helpers import models as M
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
from helpers.lessons import control_flow as cf
from helpers.lessons import control_flow_fixes as fixes
from helpers.lessons.control_flow_fixes import Router
from helpers.lowering import lower
from helpers.parity import Probe
from helpers.questions import Question, Reveal

LESSON = "03_torch_cond"


# ----- predictions --------------------------------------------------------------------------------
def _zero_side() -> Reveal:
    from helpers.lessons.control_flow_fixes import which_branch_ran

    model = M.ScaleOrShiftCond()
    art = lower(model, (seeded_randn(3, 4),))
    zeros = torch.zeros(3, 4)
    side = which_branch_ran(model, art, zeros, model.a, model.b)
    (device,) = art.run(zeros)
    with torch.no_grad():
        from_a = float((device - model.a(zeros)).abs().max())
    return Reveal(side, ("the predicate is strict: the sum of zeros is 0, and 0 > 0 is False, so the device runs "
                         "the false branch. Edges like this are why a probe set includes zeros."), why_not={
        "true": (f"the .pte's answer is the false branch's (self.b) and differs from the true branch's (self.a) by "
                 f"{from_a:.3f}: the strict `>` sends the edge, 0, to the false side."),
    })


def _branch_delegation() -> Reveal:
    art = lower(M.CondLinear(), (seeded_randn(2, 8),))
    rows = [r for r in art.delegation().rows if r["region"] != "main"]
    layers = [r for r in rows if "addmm" in r["op"] or "linear" in r["op"]]
    delegated = sum(r["delegated"] for r in layers)
    portable = sum(r["portable"] for r in layers)
    in_branches = ", ".join(sorted(f"{r['op']} ({r['region']})" for r in layers))
    counted = f"the delegation report, inside the branches: {in_branches}; {portable} on portable kernels, {delegated} delegated"
    return Reveal(str(delegated), (
        f"{delegated} of the two branch layers run on XNNPACK: ExecuTorch's lowering visits the branch graphs, but "
        "XnnpackPartitioner picks nodes by walking the top-level graph only, so it never tags one inside a cond "
        "branch; each branch's linear is decomposed (permute_copy + addmm) and runs on the runtime's portable "
        "kernels."), why_not={
        "1": (f"one would mean XNNPACK took the side that runs; {counted}. Neither side was tagged, whichever the "
              "predicate picks."),
        "2": (f"two would mean XNNPACK took both sides, as it would take a linear in the main graph; {counted}."),
    })


# ----- exercise -----------------------------------------------------------------------------------
_ROUTER_SIDES = ("block side (h.sum() > 0)", "scale side (h.sum() <= 0)")


def router_probes() -> list[Probe]:
    router = Router()
    return sided_probes(lambda x: router.pre(x).sum(), (2, 8), _ROUTER_SIDES, per_side=3, seed=3)


_LAYERS_BEFORE_THE_PREDICATE = 1  # Router.pre: h is what the predicate reads


def _layers_outside_and_inside_branches(art: Any) -> tuple[int, int]:
    """Linear layers (linear, addmm or mm nodes) in the program's main graph and inside its control-flow branches."""
    counts = {True: 0, False: 0}
    for row in art.delegation().rows:
        if any(kind in row["op"] for kind in ("linear", "addmm", "_mm")):
            counts[row["region"] == "main"] += row["delegated"] + row["portable"]
    return counts[True], counts[False]


def _grade_cond_rewrite(answer: Any) -> list[Verdict]:
    reference = Router()
    model, verdict = as_model(answer, reference)
    verdicts = [verdict]
    if model is None:
        return verdicts
    example = (seeded_values((2, 8), "random", 1),)
    hint = ("torch.cond(pred, true_fn, false_fn, operands): both functions take exactly the operands, and return "
            "the same number of tensors with the same dtypes and shapes.")
    art, verdict = lowered(model, example, hint=hint)
    if art is None:
        try:  # quote torch's own sentence about the cond (the pipeline's summary may only say "fake tensor call")
            with torch.no_grad(), cf._no_stderr():
                torch.export.export(model, example)
        except Exception as exc:  # noqa: BLE001 - the learner's model
            if type(exc).__name__ in ("UncapturedHigherOrderOpError", "TorchRuntimeError"):
                verdict = Verdict(verdict.criterion, False, f"export failed — torch says: {fixes.cond_error_line(exc)}",
                                  hint)
        verdicts.append(verdict)
        return verdicts
    verdicts.append(verdict)
    if not has_control_flow(art):
        ops = sorted({r["op"] for r in art.delegation().rows})
        verdicts.append(Verdict(
            "keeps a real runtime branch (a torch.cond in the graph)", False,
            f"the program is straight-line ({len(ops)} kinds of operator, no torch.cond): every input now pays for "
            "both sides. That is torch.where's trade (lesson 04); here the two-layer block must run only when "
            "h.sum() > 0.",
            "a branch that runs one side only is a torch.cond: the predicate is evaluated on the device and only "
            "the chosen function runs."))
        return verdicts
    verdicts.append(Verdict("keeps a real runtime branch (a torch.cond in the graph)", True,
                            "a torch.cond: only the chosen side runs"))
    outside, inside = _layers_outside_and_inside_branches(art)
    if outside > _LAYERS_BEFORE_THE_PREDICATE:
        verdicts.append(Verdict(
            "the two-layer block runs inside a branch, only when h.sum() > 0", False,
            f"{outside} linear layers run in the main graph, before the torch.cond, and {inside} inside its branches: "
            "every input pays for the block, and the cond only chooses between results already computed.",
            "the functions you hand torch.cond are what runs on one side only: the work the cheap side must skip "
            "belongs inside one of them."))
        return verdicts
    verdicts.append(Verdict("the two-layer block runs inside a branch, only when h.sum() > 0", True,
                            f"{outside} linear layer before the cond (the projection), {inside} inside its branches"))
    verdicts.append(parity(reference, art, router_probes(),
                           criterion="matches the original Router on both sides of h.sum() > 0", hint=(
                               "torch.cond runs true_fn when the predicate holds: check which of your functions "
                               "is which, and that each computes exactly what Router's side computes.")))
    if not verdicts[-1].passed:
        return verdicts
    verdicts.append(_edge_verdict(model, example))
    return verdicts


def _zero_projection(model: torch.nn.Module) -> torch.nn.Module:
    """A copy of ``model`` whose projection ``pre`` is all zeros: h is exactly 0, so h.sum() == 0 for every input.

    From Router's own weights no float32 input lands exactly on the edge; zeroing the layer the predicate reads
    puts every input there, in eager and in the ``.pte`` alike (0·x + 0 is 0 exactly).
    """
    edge = copy.deepcopy(model)
    projection = edge.get_submodule("pre")
    assert isinstance(projection, torch.nn.Linear), "as_model gave it Router's layers"
    with torch.no_grad():
        projection.weight.zero_()
        projection.bias.zero_()
    return edge


def _edge_verdict(model: torch.nn.Module, example: tuple[Any, ...]) -> Verdict:
    criterion = "on the edge, h.sum() == 0 exactly, takes Router's side (its projection zeroed to get there)"
    hint = "Router's `if h.sum() > 0`: compare what your predicate says when the sum is exactly 0."
    art, verdict = lowered(_zero_projection(model), example, hint=hint, criterion=criterion)
    if art is None:
        return verdict
    probes = [Probe(f"the edge (h.sum() == 0) #{k + 1}", (seeded_values((2, 8), "random", 10 + k),)) for k in range(2)]
    return parity(_zero_projection(Router()), art, probes, criterion=criterion, hint=hint)


def solve_cond_rewrite() -> Any:
    """03.cond_rewrite: Router's branch as a torch.cond."""
    class RouterForExport(Router):
        def forward(self, x):
            h = self.pre(x)

            def block(h):
                return self.big2(torch.relu(self.big1(h)))

            def scale(h):
                return -h * 0.5

            return torch.cond(h.sum() > 0, block, scale, (h,))


    return RouterForExport()


QUESTIONS = [
    Question("03.zero_side", LESSON,
             "ScaleOrShiftCond gets an all-zero input. Which branch's result comes back from the .pte?",
             ("true", "false"), _zero_side),
    Question("03.branch_delegation", LESSON,
             "CondLinear has a linear layer in each branch of its torch.cond. How many of those two layers does "
             "XNNPACK run?", ("0", "1", "2"), _branch_delegation),
]


EXERCISES = [
    Exercise(
        id="03.cond_rewrite", lesson=LESSON,
        title="keep Router's branch in the graph with torch.cond",
        goal=("Router projects x, then runs a two-layer block when h.sum() > 0 and a cheap -h * 0.5 otherwise. "
              "Rewrite forward() with torch.cond so it exports with a real runtime branch (only the chosen side "
              "runs) and matches the original Router on both sides."),
        grade=_grade_cond_rewrite, solve=solve_cond_rewrite,
        context=lambda: {**base_context(), "Router": Router}),
]


CARDS = [
    Card(
        id="03.cond_constraints", lesson=LESSON, topic="torch.cond", kind="constraints",
        question="What does torch.cond require of its branches, and what does it cost you on device?",
        answer=("Both branches are traced into the graph and the predicate, a boolean tensor or a symbolic size "
                "condition, is evaluated at run time. Both take the operands tuple and must return the same number "
                "of outputs with the same dtypes and compatible shapes; a branch may not mutate its inputs or "
                "anything it closes over; and each branch must itself be exportable, so no data-dependent Python "
                "inside it. On torch 2.13, reading a tensor from outside the operands is fine: export lifts it into "
                "an extra operand. The cost: a plain Python bool predicate quietly keeps one branch, and the "
                "XNNPACK partitioner never looks inside branches, so their layers run on portable kernels. I "
                "measure the delegated share."),
        points=("both branches traced; predicate (bool tensor or SymBool) evaluated at run time",
                "same operands; same number, dtypes and compatible shapes of outputs",
                "no mutation of inputs or closed-over tensors; each branch exportable",
                "closures over tensors are lifted on torch 2.13 (not an error)",
                "delegation: branch bodies stay on portable kernels; measure it")),
]
