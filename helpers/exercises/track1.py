"""Exercises of the control-flow track (lessons 01–05).

Each exercise names its reference (the intended behaviour, in eager PyTorch), the starter (a cell of
the lesson, read from its source), the solution (below, shown only on request) and its grade: the
real pipeline, probes covering both sides of every branch and every bound, and the lesson's own
criterion where there is one.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import nn
from torch.export import Dim

from .. import models as M
from ..lessons import control_flow as cf
from ..lessons import control_flow_fixes as fixes
from ..parity import Probe
from ._core import Exercise, Verdict, as_model, lowered, parity

__all__ = ["EXERCISES"]


def _base_context() -> dict[str, Any]:
    return {"torch": torch, "nn": nn, "Dim": Dim}


def _values(shape: tuple[int, ...], kind: str, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    base = torch.randn(shape, generator=g)
    return {"random": base, "positive": base.abs() + 0.1, "negative": -(base.abs() + 0.1),
            "zeros": torch.zeros(shape)}[kind]


# ----- 01 · vectorise the loop over the batch ------------------------------------------------------
_BATCH = Dim("batch", min=1, max=8)


def _grade_vectorize_loop(answer: Any) -> list[Verdict]:
    reference = M.BatchLoop()
    model, verdict = as_model(answer, reference)
    verdicts = [verdict]
    if model is None:
        return verdicts
    example = (_values((3, 4), "random", 1),)
    art, verdict = lowered(model, example, {"x": {0: _BATCH}}, hint=(
        "range(x.shape[0]) needs a Python int while tracing, so export has to fix the batch; compute every row "
        "in one tensor operation instead (what depends on the row index can be a tensor too)."))
    verdicts.append(verdict)
    if art is None:
        return verdicts
    probes = [Probe(f"batch {n}, {kind} values", (_values((n, 4), kind, 10 + n),))
              for n in (1, 2, 3, 5, 8) for kind in ("random", "positive", "negative")]
    verdicts.append(parity(reference, art, probes, criterion="matches BatchLoop (the loop) for every batch 1–8", hint=(
        "compare your forward() with BatchLoop's row by row: each row i is transformed AND multiplied by (i + 1).")))
    return verdicts


_VECTORIZE_LOOP_SOLUTION = '''
class BatchLoopVectorized(BatchLoop):
    def forward(self, x):
        row_number = torch.arange(1, x.shape[0] + 1, dtype=x.dtype).unsqueeze(1)  # 1, 2, …, batch (a tensor)
        return torch.tanh(self.item(x)) * row_number


answer = BatchLoopVectorized()
'''



# ----- probes on both sides of a branch ----------------------------------------------------------
def sided_probes(score: Callable[[torch.Tensor], float], shape: tuple[int, ...], sides: tuple[str, str],
                 per_side: int = 3, seed: int = 0, margin: float = 0.05,
                 extra: tuple[tuple[str, torch.Tensor], ...] = ()) -> list[Probe]:
    """Seeded inputs of ``shape``, ``per_side`` on each side of ``score(x) > 0`` (never on the edge).

    Labels name the side (``sides[0]`` for ``score > 0``), so feedback says which side failed.
    ``extra`` adds hand-picked inputs, labelled with their side too.
    """
    g = torch.Generator().manual_seed(seed)
    found: dict[bool, list[torch.Tensor]] = {True: [], False: []}
    for i in range(400):
        x = torch.randn(shape, generator=g) * (0.5 + (i % 4)) + (i % 7 - 3) * 0.3
        with torch.no_grad():
            value = float(score(x))
        if abs(value) > margin and len(found[value > 0]) < per_side:
            found[value > 0].append(x)
        if all(len(v) == per_side for v in found.values()):
            break
    probes = []
    for positive, name in ((True, sides[0]), (False, sides[1])):
        probes += [Probe(f"{name} #{k + 1}", (x,)) for k, x in enumerate(found[positive])]
    for label, x in extra:
        with torch.no_grad():
            name = sides[0] if float(score(x)) > 0 else sides[1]
        probes.append(Probe(f"{name}: {label}", (x,)))
    return probes


def has_control_flow(artifact: Any, method: str = "forward") -> bool:
    """Whether a lowered program keeps a ``torch.cond`` (or another control-flow operator)."""
    return any(r["op"] in ("cond", "while_loop") or r["region"] != "main" for r in artifact.delegation(method).rows)


# ----- 02 · the diagnosis sequence, finished by hand ------------------------------------------------
_TRIAGE_SIDES = ("bright side (x.mean() > 0)", "dark side (x.mean() <= 0)")


def triage_probes() -> list[Probe]:
    """Finite inputs on both sides of Triage's ``x.mean() > 0`` (zeros included: the dark side)."""
    return sided_probes(lambda x: x.mean(), (3, 4), _TRIAGE_SIDES, per_side=3, seed=2,
                        extra=(("zeros", torch.zeros(3, 4)),))


def _grade_triage(answer: Any) -> list[Verdict]:
    reference = cf.Triage()
    model, verdict = as_model(answer, reference)
    verdicts = [verdict]
    if model is None:
        return verdicts
    art, verdict = lowered(model, (_values((3, 4), "random", 1),), hint=(
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


_TRIAGE_SOLUTION = '''
class TriageForExport(Triage):
    def forward(self, x):
        # the NaN check is incidental: the app validates its inputs before calling the model
        return torch.cond(x.mean() > 0, self.bright, self.dark, (x,))  # the semantic branch, both sides kept


answer = TriageForExport()
'''


# ----- 03 · a real runtime branch with torch.cond -------------------------------------------------
_ROUTER_SIDES = ("block side (h.sum() > 0)", "scale side (h.sum() <= 0)")


def router_probes() -> list[Probe]:
    router = fixes.Router()
    return sided_probes(lambda x: router.pre(x).sum(), (2, 8), _ROUTER_SIDES, per_side=3, seed=3)


def _grade_cond_rewrite(answer: Any) -> list[Verdict]:
    reference = fixes.Router()
    model, verdict = as_model(answer, reference)
    verdicts = [verdict]
    if model is None:
        return verdicts
    example = (_values((2, 8), "random", 1),)
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
    verdicts.append(parity(reference, art, router_probes(),
                           criterion="matches the original Router on both sides of h.sum() > 0", hint=(
                               "torch.cond runs true_fn when the predicate holds: check which of your functions "
                               "is which, and that each computes exactly what Router's side computes.")))
    return verdicts


_COND_REWRITE_SOLUTION = '''
class RouterForExport(Router):
    def forward(self, x):
        h = self.pre(x)

        def block(h):
            return self.big2(torch.relu(self.big1(h)))

        def scale(h):
            return -h * 0.5

        return torch.cond(h.sum() > 0, block, scale, (h,))


answer = RouterForExport()
'''


# ----- 04 · arithmetic instead of a branch --------------------------------------------------------
_GATE_SIDES = ("x.sum() > 0", "x.sum() <= 0")


def gate_probes() -> list[Probe]:
    """Both sides of ``x.sum() > 0``, with all-positive / all-negative inputs AND mixed signs."""
    g = torch.Generator().manual_seed(4)
    base = torch.randn(3, 4, generator=g)
    mixed_up = base - base.mean() + 0.3  # mixed signs, sum > 0
    mixed_down = base - base.mean() - 0.3  # mixed signs, sum < 0
    hand_picked = sided_probes(lambda x: x.sum(), (3, 4), _GATE_SIDES, per_side=0, extra=(
        ("all positive", base.abs() + 0.1), ("all negative", -(base.abs() + 0.1)),
        ("mixed signs", mixed_up), ("mixed signs", mixed_down)))
    random_signs = sided_probes(lambda x: x.sum(), (3, 4), _GATE_SIDES, per_side=2, seed=5)
    return hand_picked + [Probe(p.label.replace(" #", ": random signs #"), p.args) for p in random_signs]


def _grade_where_rewrite(answer: Any) -> list[Verdict]:
    reference = fixes.GatedProj()
    model, verdict = as_model(answer, reference)
    verdicts = [verdict]
    if model is None:
        return verdicts
    art, verdict = lowered(model, (_values((3, 4), "random", 1),), hint=(
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


_WHERE_REWRITE_SOLUTION = '''
class GatedProjForExport(GatedProj):
    def forward(self, x):
        y = self.proj(x)
        return torch.where(x.sum() > 0, torch.relu(y), y * 0.1)  # one decision for the whole input


answer = GatedProjForExport()
'''


# ----- 05 · hoist the decision into the app --------------------------------------------------------
_HOIST_SIDES = ("x.mean() > 0", "x.mean() <= 0")


def hoist_probes() -> list[Probe]:
    return sided_probes(lambda x: x.mean(), (2, 8), _HOIST_SIDES, per_side=3, seed=6,
                        extra=(("zeros", torch.zeros(2, 8)),))


def _grade_hoist(answer: Any) -> list[Verdict]:
    from ..diagnose import diagnose_exception
    from ..lowering import lower_methods, stage_of

    shape_ok = (isinstance(answer, tuple) and len(answer) == 2 and isinstance(answer[0], dict) and answer[0]
                and callable(answer[1]))
    criterion = "a dict of methods and a pick function"
    if not shape_ok:
        return [Verdict(criterion, False, f"got {type(answer).__name__}",
                        "answer = ({'name': model, ...}, pick), where pick(x) returns a method name")]
    methods, pick = answer
    reference = M.CondLinear()
    models: dict[str, nn.Module] = {}
    for name, candidate in methods.items():
        model, verdict = as_model(candidate, reference, what=f"method '{name}'")
        if model is None:
            return [Verdict(criterion, True), verdict]
        models[name] = model
    verdicts = [Verdict(criterion, True, f"methods {', '.join(sorted(models))}")]
    example = (_values((2, 8), "random", 1),)
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


_HOIST_SOLUTION = '''
class BranchA(CondLinear):
    def forward(self, x):
        return self.a(torch.relu(self.pre(x)))


class BranchB(CondLinear):
    def forward(self, x):
        return self.b(torch.relu(self.pre(x)))


def pick(x):
    return "a" if float(x.mean()) > 0 else "b"  # the app's if: Kotlin or Swift on a phone


answer = ({"a": BranchA(), "b": BranchB()}, pick)
'''

EXERCISES = [
    Exercise(
        id="01.vectorize_loop", lesson="01_silent_specialization",
        title="vectorise the loop so one .pte serves every batch from 1 to 8",
        goal=("Rewrite BatchLoop's forward() without a Python loop over the batch, so that it exports with "
              "dynamic_shapes={'x': {0: Dim('batch', min=1, max=8)}} and the .pte computes what the loop computes "
              "for every batch size."),
        grade=_grade_vectorize_loop, solution_code=_VECTORIZE_LOOP_SOLUTION,
        context=lambda: {**_base_context(), "BatchLoop": M.BatchLoop}),
    Exercise(
        id="02.triage", lesson="02_loud_failures",
        title="finish the diagnosis: make Triage export, with both sides of its real branch",
        goal=("Rewrite Triage's forward() so that it exports: delete the incidental input check from the export "
              "path and keep the semantic branch (x.mean() > 0 picks bright or dark) with torch.cond or "
              "torch.where. The .pte must match the ORIGINAL Triage, in eager mode, on both sides."),
        grade=_grade_triage, solution_code=_TRIAGE_SOLUTION,
        context=lambda: {**_base_context(), "Triage": cf.Triage}),
    Exercise(
        id="03.cond_rewrite", lesson="03_torch_cond",
        title="keep Router's branch in the graph with torch.cond",
        goal=("Router projects x, then runs a two-layer block when h.sum() > 0 and a cheap -h * 0.5 otherwise. "
              "Rewrite forward() with torch.cond so it exports with a real runtime branch (only the chosen side "
              "runs) and matches the original Router on both sides."),
        grade=_grade_cond_rewrite, solution_code=_COND_REWRITE_SOLUTION,
        context=lambda: {**_base_context(), "Router": fixes.Router}),
    Exercise(
        id="04.where_rewrite", lesson="04_torch_where",
        title="turn GatedProj's branch into arithmetic with torch.where",
        goal=("GatedProj applies relu or a 0.1 damping to one projection, by the sign of x.sum(). Rewrite "
              "forward() with torch.where: no control flow in the graph, the projection on XNNPACK, and the same "
              "outputs as GatedProj on both sides, including inputs with mixed signs."),
        grade=_grade_where_rewrite, solution_code=_WHERE_REWRITE_SOLUTION,
        context=lambda: {**_base_context(), "GatedProj": fixes.GatedProj}),
    Exercise(
        id="05.hoist", lesson="05_hoisting", kind="methods and app code",
        title="hoist CondLinear's decision into the app",
        goal=("Give CondLinear as methods of one .pte and an app-side pick(x) that names the method to call. "
              "Every method must be straight-line and 100% delegated to XNNPACK, and the app (pick, then run) "
              "must match CondLinear in eager mode on both sides of x.mean() > 0."),
        grade=_grade_hoist, solution_code=_HOIST_SOLUTION,
        context=lambda: {**_base_context(), "CondLinear": M.CondLinear}),
]

