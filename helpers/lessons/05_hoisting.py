"""Lesson 05 · hoisting: its predictions, its exercise (``05.hoist``) and its interview card."""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from helpers import models as M
from helpers.exercises.grading import Exercise, Verdict, as_model, base_context, has_control_flow, parity, sided_probes
from helpers.inputs import seeded_randn, seeded_values
from helpers.interview import Card
from helpers.lowering import lower_methods
from helpers.models import CondLinear
from helpers.parity import Probe, check_one
from helpers.questions import Question, Reveal

LESSON = "05_hoisting"


# ----- predictions --------------------------------------------------------------------------------
def _portrait() -> Reveal:
    vision = M.TinyVision()
    art = lower_methods({"small": (vision, (seeded_randn(1, 3, 32, 48),)), "large": (vision, (seeded_randn(1, 3, 64, 96),))})
    row = check_one(vision, art, (seeded_randn(1, 3, 48, 32, seed=1),), method="small")
    no_answer = ("the runtime returned no answer to compare: it refused the frame at its input check, before running "
                 "any operator. Eager answers it (TinyVision averages over height and width, any size)")
    return Reveal(row.status, ("the method was exported for 32×48; a 48×32 frame breaks its static shape and the "
                               f"runtime refuses it: {row.runtime_message.split(';')[0]}"), why_not={
        "match": f"{no_answer}, so nothing matched.",
        "diverge": f"{no_answer}; a divergence needs the device to compute a wrong answer, and it computed none.",
    })


def _hoisted_share() -> Reveal:
    from helpers.lessons.control_flow_fixes import ScaleOrShiftB

    art = lower_methods({"b": (ScaleOrShiftB(), (seeded_randn(3, 4),))})
    report = art.delegation("b")
    share = report.coverage
    answer = "all of it" if share == 1.0 else ("none" if share == 0 else "part of it")
    return Reveal(answer, (f"{share:.0%}: the method is straight-line (one linear layer, no predicate, no branch), so "
                           "the partitioner sees every node and XNNPACK takes it."), why_not={
        "part of it": (f"part would leave a node on portable kernels; the delegation report counts "
                       f"{report.portable_nodes} portable and {report.delegated_nodes} delegated."),
        "none": (f"XNNPACK took {report.delegated_nodes} node(s) in {report.delegated_subgraphs} subgraph(s): with "
                 "no branch left in the method, nothing hides from the partitioner."),
    })


# ----- exercise -----------------------------------------------------------------------------------
_HOIST_SIDES = ("x.mean() > 0", "x.mean() <= 0")


def hoist_probes() -> list[Probe]:
    return sided_probes(lambda x: x.mean(), (2, 8), _HOIST_SIDES, per_side=3, seed=6,
                        extra=(("zeros", torch.zeros(2, 8)),))


def _grade_hoist(answer: Any) -> list[Verdict]:
    from helpers.diagnose import diagnose_exception
    from helpers.lowering import lower_methods, stage_of

    shape_ok = (isinstance(answer, tuple) and len(answer) == 2 and isinstance(answer[0], dict) and answer[0]
                and callable(answer[1]))
    criterion = "a dict of methods and a pick function"
    if not shape_ok:
        return [Verdict(criterion, False, f"got {type(answer).__name__}",
                        "answer = ({'name': model, ...}, pick), where pick(x) returns a method name")]
    methods, pick = answer
    reference = CondLinear()
    models: dict[str, nn.Module] = {}
    for name, candidate in methods.items():
        model, verdict = as_model(candidate, reference, what=f"method '{name}'")
        if model is None:
            return [Verdict(criterion, True), verdict]
        models[name] = model
    verdicts = [Verdict(criterion, True, f"methods {', '.join(sorted(models))}")]
    example = (seeded_values((2, 8), "random", 1),)
    try:
        art = lower_methods({name: (m, example) for name, m in models.items()})
    except Exception as exc:  # noqa: BLE001 - the learner's model may fail in any stage
        stage = stage_of(exc)
        if stage is None:
            raise
        diagnosis = diagnose_exception(exc, stage)
        verdicts.append(Verdict("every method exports, lowers and loads", False, f"{stage} failed — "
                                f"{diagnosis.summary}", "each method is a plain straight-line forward()."))
        return verdicts
    verdicts.append(Verdict("every method exports, lowers and loads", True, f"{len(models)} method(s) in one .pte"))
    for name in sorted(models):
        d = art.delegation(name)
        if has_control_flow(art, name) or d.coverage < 1.0:
            why = "it keeps a torch.cond, whose branches XNNPACK never takes" if has_control_flow(art, name) else (
                f"{', '.join(d.portable_ops())} stay on portable kernels")
            verdicts.append(Verdict("every method straight-line and 100% delegated", False,
                                    f"method '{name}': {why} ({d.coverage:.0%} delegated)",
                                    "one method per side of the decision, each without any branch: the app "
                                    "decides which one to call."))
            return verdicts
    verdicts.append(Verdict("every method straight-line and 100% delegated", True, "all on XNNPACK"))

    def run(probe: Probe) -> tuple[Any, ...]:
        (x,) = probe.args
        name = pick(x)
        if name not in models:
            raise KeyError(f"pick returned {name!r}, not one of the methods {sorted(models)}")
        return art.run_raw(x, method=name)

    verdicts.append(parity(reference, art, hoist_probes(), run=run,
                           criterion="the app (pick, then run) matches CondLinear on both sides", hint=(
                               "CondLinear runs self.a when x.mean() > 0 and self.b otherwise: check what pick "
                               "returns on each side, and what each method computes.")))
    return verdicts


def solve_hoist() -> Any:
    """05.hoist: one straight-line method per side; the app picks."""
    class BranchA(CondLinear):
        def forward(self, x):
            return self.a(torch.relu(self.pre(x)))


    class BranchB(CondLinear):
        def forward(self, x):
            return self.b(torch.relu(self.pre(x)))


    def pick(x):
        return "a" if float(x.mean()) > 0 else "b"  # the app's if: Kotlin or Swift on a phone


    return ({"a": BranchA(), "b": BranchB()}, pick)


QUESTIONS = [
    Question("05.portrait", LESSON,
             "The app forgets to rotate and sends a portrait frame (48×32) to the landscape (32×48) method. The "
             "device…", ("match", "diverge", "rejected"), _portrait),
    Question("05.hoisted_share", LESSON,
             "After hoisting, method 'b' computes only ScaleOrShift's b side. How much of it does XNNPACK take?",
             ("all of it", "part of it", "none"), _hoisted_share),
]


EXERCISES = [
    Exercise(
        id="05.hoist", lesson=LESSON, kind="methods and app code",
        title="hoist CondLinear's decision into the app",
        goal=("Give CondLinear as methods of one .pte and an app-side pick(x) that names the method to call. "
              "Every method must be straight-line and 100% delegated to XNNPACK, and the app (pick, then run) "
              "must match CondLinear in eager mode on both sides of x.mean() > 0."),
        grade=_grade_hoist, solve=solve_hoist,
        context=lambda: {**base_context(), "CondLinear": CondLinear}),
]


CARDS = [
    Card(
        id="05.hoist", lesson=LESSON, topic="hoisting", kind="trade-off",
        question="The model branches between two different networks. What is the cleanest way to export it?",
        answer=("Often: no branch in the model at all. I export each side as its own method in one .pte, or as two "
                ".pte files, and the app picks which to call. The condition becomes a few lines of Kotlin or Swift, "
                "where branching is free, loggable and testable, and each graph stays straight-line and fully "
                "delegated, unlike a cond whose branches run on portable kernels. The runtime loads a method only when "
                "it is called (load_method), so one file does not load both; the choice between one file and two "
                "is about what ships: one download and one artifact to version, or only the side the app uses, "
                "with two versions to keep in step. This works when the app can "
                "make the decision from what it has, like orientation, language or device tier; a decision on an "
                "intermediate value of the network stays inside, as torch.cond or torch.where. Parity is checked "
                "with the app's choice in the loop, against the original model, on both sides."),
        points=("one method per side (or one .pte per side); the app picks",
                "the app's if: free, debuggable, changeable without re-export",
                "each graph straight-line and 100% delegated",
                "only for decisions the app can make from its inputs; intermediate values stay in the graph",
                "parity with the app's pick in the loop against the original model")),
    Card(
        id="05.three_ways", lesson=LESSON, topic="hoisting", kind="trade-off",
        held_back=True,
        question="A model branches on a condition. When do you use torch.where, torch.cond, or two methods the app "
                 "picks between?",
        answer=("Two methods when the app knows the condition before the call (a mode, a setting, an input size): "
                "each method is straight-line and fully delegatable, and the app's if picks one. torch.where when "
                "both sides are cheap: the graph stays straight-line and delegatable, but both sides run for every "
                "input. torch.cond when the condition depends on values computed inside the model and one side is "
                "heavy: only the chosen side runs, but XnnpackPartitioner does not tag nodes inside its branches, so "
                "they run on portable kernels. Then I measure: lesson 04's where beat cond on the heavy side."),
        points=("hoist a decision the app already knows: one straight-line method per side",
                "torch.where: both sides computed, everything delegatable",
                "torch.cond: only the chosen side runs, but its branches stay off XNNPACK"),
        follow_ups=(
            ("Why was torch.cond slower than torch.where in lesson 04 on the input that takes the heavy side?",
             "On that input both run the whole MLP; where runs it on XNNPACK in the main graph, cond runs it inside a "
             "branch, on the portable kernels, because the partitioner never tags nodes inside a cond branch."),
            ("What if the condition depends on an intermediate value of the model?",
             "Then the app cannot hoist it: the decision needs the model's own computation. It is torch.where if both "
             "sides are affordable, torch.cond if one is too heavy to run for every input, measured both ways."),
        )),
]
