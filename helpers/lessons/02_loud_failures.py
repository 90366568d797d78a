"""Lesson 02 · loud failures: its predictions, its exercise (``02.triage``) and its interview cards."""

from __future__ import annotations

import re
from typing import Any

import torch

from helpers import models as M
from helpers.exercises.grading import Exercise, Verdict, as_model, base_context, lowered, parity, sided_probes
from helpers.inputs import seeded_randn, seeded_values
from helpers.interview import Card
from helpers.lessons.control_flow import Triage
from helpers.lowering import lower
from helpers.parity import Probe, check_one
from helpers.questions import Question, Reveal

LESSON = "02_loud_failures"


# ----- predictions --------------------------------------------------------------------------------
def _static_gate_kind() -> Reveal:
    from helpers.diagnose import diagnose_export
    from helpers.lessons.control_flow import BatchGate

    d = diagnose_export(BatchGate(), (seeded_randn(8, 4),))
    layers = sorted(set(re.findall(r"linear\.default\(\w+, p_(\w+?)_weight", d.exported.graph_module.code if d.exported else "")))
    return Reveal(d.kind, (
        f"no error at all ({d.summary.split(';')[0]}): with a static batch, `x.shape[0]` is the Python int 8 while "
        "tracing, so `8 > 4` is decided at export and only one path is recorded: the graph holds the "
        f"{' and '.join(f'`self.{name}`' for name in layers)} layer alone (lesson 01's silent specialization). The batch is "
        "fixed at 8, so the runtime rejects any other batch instead of running the wrong layer."), why_not={
        "data_dependent": ("the `if` reads the batch size, not the tensor's values; with no Dim that size is the "
                           "plain int 8 while tracing, so there is no symbolic value to branch on."),
        "unsupported_operator": (f"every operator found a kernel: the program lowered and loaded "
                                 f"({d.artifact.nbytes:,} bytes)." if d.artifact is not None else
                                 "every operator found a kernel: the program lowered and loaded."),
        "constraint_violation": ("a constraint violation is a declared Dim that the code does not allow; this "
                                 "export declares no Dim at all."),
    })


def _sort_stage() -> Reveal:
    from helpers.diagnose import diagnose_export
    from helpers.lessons.control_flow import SortValues

    d = diagnose_export(SortValues(), (seeded_randn(5),), backend="portable")
    code = d.exported.graph_module.code if d.exported is not None else ""
    sort = re.search(r"aten\.sort\.\w+", code)
    return Reveal(d.stage, (
        "this runtime build has no kernel registered for aten.sort, so the program fails when the runtime loads "
        f"its method. The runtime's words: {d.message.split('. dtype')[0]}."), why_not={
        "export": (f"export returned a graph, with {sort.group(0) if sort else 'aten.sort'} in it: sort is a Core "
                   "ATen operator, nothing about it is data-dependent."),
        "lower": ("lowering for the portable backend wrote the program: it records each operator by name, and "
                  "whether a kernel for that name exists is only known to the runtime that loads it."),
    })


def _check_promise() -> Reveal:
    from helpers.lessons.control_flow import ScaleOrShiftChecked

    x = seeded_randn(3, 4)
    model = ScaleOrShiftChecked()
    art = lower(model, (x.abs() + 0.1,))
    negative = -x.abs() - 0.1
    row = check_one(M.ScaleOrShift(), art, (negative,))
    (device,) = art.run_raw(negative)
    with torch.no_grad():
        as_a = float((device - model.a(negative)).abs().max())
    return Reveal(row.status, (
        "torch._check made the promise `x.sum() > 0` and export believed it: only the `self.a` side was recorded. "
        f"The .pte runs self.a on an input whose sum is negative (within {as_a:.0e} of self.a's answer), where the "
        "original runs self.b."), why_not={
        "match": f"the .pte's answer differs from the original's by up to {row.max_abs_diff:.3f}: a against b.",
        "rejected": ("the promise became a runtime assertion in the exported graph, and the .pte does not check "
                     f"it: the runtime ran the {row.shapes} input and returned an answer."),
    })


# ----- exercise -----------------------------------------------------------------------------------
_TRIAGE_SIDES = ("bright side (x.mean() > 0)", "dark side (x.mean() <= 0)")


def triage_probes() -> list[Probe]:
    """Finite inputs on both sides of Triage's ``x.mean() > 0`` (zeros included: the dark side)."""
    return sided_probes(lambda x: x.mean(), (3, 4), _TRIAGE_SIDES, per_side=3, seed=2,
                        extra=(("zeros", torch.zeros(3, 4)),))


def _grade_triage(answer: Any) -> list[Verdict]:
    reference = Triage()
    model, verdict = as_model(answer, reference)
    verdicts = [verdict]
    if model is None:
        return verdicts
    art, verdict = lowered(model, (seeded_values((3, 4), "random", 1),), hint=(
        "read the line the error quotes and ask: incidental or semantic? An input check is incidental (the app "
        "can check its own inputs); a branch between two layers is semantic: both sides must survive export "
        "(torch.cond or torch.where)."))
    verdicts.append(verdict)
    if art is None:
        return verdicts
    verdicts.append(parity(reference, art, triage_probes(),
                           criterion="matches the original Triage on both sides of x.mean() > 0", hint=(
                               "the original picks self.bright when x.mean() > 0 and self.dark otherwise: your "
                               "program must do both, each on its own side (check the side named above).")))
    return verdicts


def solve_triage() -> Any:
    """02.triage: the incidental check out of the export path, the semantic branch kept."""
    class TriageForExport(Triage):
        def forward(self, x):
            # the NaN check is incidental: the app validates its inputs before calling the model
            return torch.cond(x.mean() > 0, self.bright, self.dark, (x,))  # the semantic branch, both sides kept


    return TriageForExport()


QUESTIONS = [
    Question("02.static_gate_kind", LESSON,
             "BatchGate exported with a batch of 8 and NO Dim (a static batch). What does diagnose_export report?",
             ("data_dependent", "unsupported_operator", "constraint_violation", "ok"), _static_gate_kind),
    Question("02.sort_stage", LESSON,
             "SortValues returns torch.sort(x)[0]; it is built for the portable backend. Which stage of the "
             "pipeline fails?", ("export", "lower", "load"), _sort_stage),
    Question("02.check_promise", LESSON,
             "ScaleOrShiftChecked adds torch._check(x.sum() > 0) so that export passes (exported with a positive "
             "example). The app then sends an input whose sum is negative. Compared with the original ScaleOrShift, "
             "the device's answer is…", ("match", "diverge", "rejected"), _check_promise),
]


EXERCISES = [
    Exercise(
        id="02.triage", lesson=LESSON,
        title="finish the diagnosis: make Triage export, with both sides of its real branch",
        goal=("Rewrite Triage's forward() so that it exports: delete the incidental input check from the export "
              "path and keep the semantic branch (x.mean() > 0 picks bright or dark) with torch.cond or "
              "torch.where. The .pte must match the ORIGINAL Triage, in eager mode, on both sides."),
        grade=_grade_triage, solve=solve_triage,
        context=lambda: {**base_context(), "Triage": Triage}),
]


CARDS = [
    Card(
        id="02.wont_export", lesson=LESSON, topic="reading an export error", kind="diagnosis",
        question="An engineer hands you a model: 'this won't export'. What do you do?",
        answer=("I read the error first: a GuardOnDataDependentSymNode about an unbacked symbol means Python asked "
                "for a value computed from data; 'not in Core ATen', a missing kernel or a missing fake kernel means "
                "an operator a stage does not have, and which stage failed (export, lowering or load) matters; a "
                "'Constraints violated' with a suggested Dim means the code assumes a narrower size range. For a "
                "data-dependent error I find the line it quotes, then decide: an incidental branch (debug, "
                "training-only, input check) is deleted from the export path; a semantic one becomes torch.cond, "
                "torch.where or app logic. torch._check only fits a fact I can promise, like a count that is "
                "always at least 1; the device does not enforce it. Then I re-export and diff against the original "
                "eager model on inputs from both sides of the branch."),
        points=("classify: data-dependent vs unsupported operator (and its stage) vs constraint violation",
                "find the line in forward() the error quotes",
                "incidental branch → delete from the export path; semantic → cond / where / hoist",
                "torch._check only for a true, bounded fact; never to silence a semantic branch",
                "re-export and diff against the original eager model on both sides")),
    Card(
        id="02.export_vs_compile", lesson=LESSON, topic="export vs torch.compile", kind="conceptual",
        question="torch.compile handles this model fine, so why does torch.export fail on it?",
        answer=("torch.compile uses Dynamo to capture what it can; when it meets something it cannot capture, like "
                "an if on a tensor's value, it inserts a graph break: the region runs as ordinary Python and "
                "compiled code resumes after it, so the model still runs correctly. Export must produce one graph "
                "for every input, to be run where there is no Python, so there is no break to fall back on: the "
                "same if is an error. Full-graph capture is mandatory, which is why the branch has to become "
                "torch.cond, torch.where, or a decision made by the app."),
        points=("torch.compile: graph breaks, the region falls back to Python",
                "export: one graph, no escape hatch; the runtime has no Python either",
                "a branch on data: graph break under compile, data-dependent error under export",
                "fix by expressing the branch in the graph (cond/where) or hoisting it")),
    Card(
        id="02.data_dependent_fix", lesson=LESSON, topic="reading an export error", kind="diagnosis",
        held_back=True,
        question="Export stops with GuardOnDataDependentSymNode at `if x.sum() > 0:`. Walk me through the fix.",
        answer=("It is data-dependent control flow: a Python if on a tensor's value, which is a symbol while tracing. "
                "First I decide whether the branch is semantic or incidental. An incidental one (a debug print, an "
                "input check, a training-only path) is deleted from the export path. A semantic one becomes "
                "torch.where if both sides are cheap, torch.cond if one is heavy, or two methods if the app knows "
                "the condition. Then I re-export and compare the .pte with the original eager model on inputs from "
                "both sides of the branch, the edge included: an all-zero input, where the sum is exactly 0."),
        points=("classify: data-dependent, a Python if on a tensor's value",
                "semantic or incidental: delete, or torch.where / torch.cond / hoist",
                "re-check the .pte against the original on both sides and at the edge"),
        follow_ups=(
            ("Why not add torch._check(x.sum() > 0) so that it exports?",
             "It promises export that the sum is always positive, so export records only that side, and the .pte "
             "does not check the promise: every input with a negative sum runs the wrong side, silently. Lesson 02 "
             "ran it. torch._check is for facts you can promise, such as a count that is never 0."),
            ("What if the branch only raises an error on an invalid input?",
             "That is incidental: delete it from the export path and check the input in the app before the call, "
             "since the device does not run export's assertions."),
        )),
]
