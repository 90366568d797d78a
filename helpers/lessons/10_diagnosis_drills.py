"""Lesson 10 · diagnosis drills (capstone): its predictions, its exercises and its interview cards."""

from __future__ import annotations

from typing import Any

import torch
from torch.export import Dim

from helpers import models as M
from helpers.display import error_excerpt
from helpers.exercises.grading import (
    Exercise,
    Verdict,
    base_context,
    function_answer,
)
from helpers.interview import Card
from helpers.lowering import lower
from helpers.parity import check_one
from helpers.questions import Question

LESSON = "10_diagnosis_drills"


# ----- predictions ----------------------------------------------------------------------------------
def _batch_loop() -> tuple[str, str]:
    from helpers.lessons import drills

    drill = drills.Drill(
        "batch_loop", "A per-item loop exported with batch 3; the device sends 4 items.",
        "helpers.lower(BatchLoop(), (torch.randn(3, 4),))",
        lambda: (M.BatchLoop(), (torch.randn(3, 4, generator=torch.Generator().manual_seed(20)),), None),
        lambda: (torch.randn(4, 4, generator=torch.Generator().manual_seed(21)),),
        "input outside the export contract", track="control flow")
    finding = drills.investigate(drill)
    return finding.answer, "\n".join(finding.evidence)


def _answers() -> tuple[str, ...]:
    from helpers.lessons.drills import ANSWERS

    return ANSWERS


QUESTIONS = [
    Question("10.batch_loop", "10_diagnosis_drills",
             "BatchLoop (a Python for over the batch) was exported with a batch of 3; the device sends a batch of 4. "
             "Which diagnosis do the tools give?", _answers(), _batch_loop),
]


# ----- exercises ------------------------------------------------------------------------------------
MAX_PROBES = 400


class _PositiveBranchOnly(M.ScaleOrShift):
    """ScaleOrShift with its sign test resolved at export: only the positive branch (a straight program)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.a(x)


def _probe_scenarios() -> list[dict[str, Any]]:
    """Programs the probe set runs against: four broken ones (each with an in-contract bug) and two correct ones.

    ``dims`` is what the app promises (axis → (min, max)), which is what the learner's probes get."""
    clip = torch.randn(1, 8, 4, generator=torch.Generator().manual_seed(41))
    pair = torch.randn(2, 4, generator=torch.Generator().manual_seed(42))
    positive = pair.abs() + 0.1  # the team's sample input happened to be positive
    return [
        {"name": "one_frame", "broken": True, "example": clip, "dims": {1: (1, 16)}, "reference": M.ShapeBranch(),
         "what": "ShapeBranch exported with Dim('frames', min=1, max=16)",
         "art": lambda: lower(M.ShapeBranch(), (clip,), dynamic_shapes={"x": {1: Dim("frames", min=1, max=16)}}),
         "hint": "the bug hides at one size: probe every Dim at its min and max (and next to them)"},
        {"name": "no_max", "broken": True, "example": clip, "dims": {1: (2, 16)}, "reference": M.ShapeBranch(),
         "what": "ShapeBranch promised 2..16 frames, exported with Dim('frames', min=2) (no max)",
         "art": lambda: lower(M.ShapeBranch(), (clip,), dynamic_shapes={"x": {1: Dim("frames", min=2)}}),
         "hint": "a promised size the program cannot take shows only at the top of the range: probe each Dim's max"},
        {"name": "flag", "broken": True, "example": pair, "dims": {}, "reference": M.ConfigBranch(use_residual=False),
         "what": "ConfigBranch exported with use_residual=True; the app runs it with use_residual=False",
         "art": lambda: lower(M.ConfigBranch(use_residual=True), (pair,)),
         "hint": "compare on inputs with real values; an all-zero input hides a missing `+ x`"},
        {"name": "sign", "broken": True, "example": positive, "dims": {}, "reference": M.ScaleOrShift(),
         "what": "ScaleOrShift's positive branch baked into a straight program; eager branches on the sign",
         "art": lambda: lower(_PositiveBranchOnly(), (positive,)),
         "hint": "a branch on the values shows only with inputs on both sides of it: vary the values' signs"},
        {"name": "frames, correct", "broken": False, "example": clip, "dims": {1: (2, 16)},
         "reference": M.ShapeBranch(), "what": "ShapeBranch exported with Dim('frames', min=2, max=16)",
         "art": lambda: lower(M.ShapeBranch(), (clip,), dynamic_shapes={"x": {1: Dim("frames", min=2, max=16)}}),
         "hint": "only probes inside the contract are compared; outside it, refusing is the host check's job"},
        {"name": "sign, correct", "broken": False, "example": positive, "dims": {}, "reference": M.ScaleOrShift(),
         "what": "ScaleOrShiftWhere (torch.where, both branches) against eager ScaleOrShift",
         "art": lambda: lower(M.ScaleOrShiftWhere(), (positive,)),
         "hint": "only probes inside the contract are compared"},
    ]


def _inside(probe: torch.Tensor, example: torch.Tensor, dims: dict[int, tuple[int, int]]) -> bool:
    if not isinstance(probe, torch.Tensor) or probe.dtype != example.dtype or probe.dim() != example.dim():
        return False
    for axis, (size, fixed) in enumerate(zip(probe.shape, example.shape)):
        lo, hi = dims.get(axis, (fixed, fixed))
        if not lo <= size <= hi:
            return False
    return True


def _grade_probe_set(answer: Any) -> list[Verdict]:

    verdicts = [function_answer(answer, "probes")]
    if not verdicts[0].passed:
        return verdicts
    for scenario in _probe_scenarios():
        example, dims = scenario["example"], scenario["dims"]
        try:
            made = answer(example.clone(), dict(dims))
            made = list(made)
        except Exception as exc:  # noqa: BLE001 - the learner's code may fail in any way
            verdicts.append(Verdict("probes(example, dims) returns a list of tensors", False,
                                    f"for {scenario['what']}: it raised {error_excerpt(exc, 2)}",
                                    "return a list of tensors shaped like the example (dynamic axes within dims)"))
            return verdicts
        if not all(isinstance(t, torch.Tensor) for t in made) or len(made) > MAX_PROBES:
            verdicts.append(Verdict("probes(example, dims) returns a list of tensors", False,
                                    f"for {scenario['what']}: {len(made)} items, not all tensors or more than "
                                    f"{MAX_PROBES}", f"return at most {MAX_PROBES} tensors"))
            return verdicts
        inside = [t for t in made if _inside(t, example, dims)]
        art = scenario["art"]()
        rows = [check_one(scenario["reference"], art, (t,), label=f"probe {i}") for i, t in enumerate(inside)]
        bad = [(t, r) for t, r in zip(inside, rows) if r.status != "match"]
        label = f"catches the bug in '{scenario['name']}'" if scenario["broken"] else \
            f"no false alarm on '{scenario['name']}'"
        if scenario["broken"] and not bad:
            verdicts.append(Verdict(label, False, f"{scenario['what']}: your {len(inside)} probes inside the contract "
                                    f"({len(made) - len(inside)} outside, not compared) all match",
                                    scenario["hint"]))
            return verdicts
        if not scenario["broken"] and bad:
            t, r = bad[0]
            verdicts.append(Verdict(label, False, f"{scenario['what']}: a probe of shape {tuple(t.shape)} inside the "
                                    f"contract was {_outcome(r)}", scenario["hint"]))
            return verdicts
        if scenario["broken"]:
            t, r = bad[0]
            detail = f"a probe of shape {tuple(t.shape)}: {_outcome(r)}"
        else:
            detail = f"{len(inside)} probes inside the contract match"
        verdicts.append(Verdict(label, True, detail))
    return verdicts


def _outcome(row: Any) -> str:
    """What happened to one probe, without the artifact's view of its contract (the app's promise decides)."""
    text = row.describe().split(" · ")[0]
    return text if row.status in ("match", "diverge") else f"{text}: {row.message.split('. Error')[0]}"


def solve_probe_set() -> Any:
    """The solution of 10.probe_set."""
    def probes(example, dims):
        """Every dynamic axis at its min, min+1, middle, max-1 and max; values of both signs, zeros and large ones."""
        g = torch.Generator().manual_seed(0)
        shapes = [tuple(example.shape)]
        for axis, (lo, hi) in dims.items():
            for size in sorted({lo, lo + 1, (lo + hi) // 2, hi - 1, hi}):
                shape = list(example.shape)
                shape[axis] = size
                shapes.append(tuple(shape))
        out = []
        for shape in shapes:
            base = torch.randn(shape, generator=g)
            out += [base, base.abs() + 0.1, -(base.abs() + 0.1), torch.zeros(shape), base * 100]
        return out


    return probes


EXERCISES = [
    Exercise(
        id="10.probe_set", lesson=LESSON,
        title="a probe set that catches every bug in the export CI job",
        goal=("Write probes(example, dims) -> list[Tensor]: the inputs an export CI job feeds to the .pte and to "
              "eager PyTorch. `example` is the single input tensor the model was exported with; `dims` maps each "
              "dynamic axis to the (min, max) the app promises. The check runs your probes (those inside the "
              "contract) on four broken programs, each wrong on some inputs inside its contract, and on two "
              "correct ones: every bug must be caught, and no correct program may raise a false alarm."),
        grade=_grade_probe_set, solve=solve_probe_set, context=base_context, kind="function"),
]

CARDS = [
    Card(
        id="10.camera_diagnosis", lesson=LESSON, topic="diagnosing shape failures on device",
        kind="diagnosis",
        question=("The model works in Python but the app rejects our camera frames. What do you do?"),
        answer=("It is nearly always an export at the notebook's example resolution fed the device's native "
                "resolution. I confirm it by reading the .pte's MethodMeta and comparing with the shape in the "
                "app's log, then reproduce it by loading that same .pte with the runtime bindings and the "
                "device's real shape: same refusal. Then I choose deliberately: letterbox on the host, a bounded "
                "Dim, or a few buckets. Afterwards I re-check parity on every camera size, the delegation report "
                "and the arena, and add the device's shapes to CI."),
        points=("read the .pte's input signature (MethodMeta), compare with the device's shape",
                "reproduce with the runtime bindings and the real shape before changing anything",
                "choose deliberately: normalize on the host, bounded Dim, or buckets",
                "re-check parity, delegation and arena afterwards; add the device shapes to CI")),
    Card(
        id="10.export_ci", lesson=LESSON, topic="parity testing in export CI",
        kind="conceptual",
        question=("What would your export CI job check before a .pte ships?"),
        answer=("Export, lowering and loading succeed; the .pte's maximum shapes cover the promised range; only "
                "accepted operators run on portable kernels, so a delegation regression fails the job; the "
                "device's real shapes are inside the contract and match; and parity against eager, configured "
                "exactly as the app configures it, at every Dim's min and max and next to them, with values of "
                "both signs, zeros and large ones. Outside the contract the host check must refuse; only inputs "
                "above the capacity also go to the runtime, since zero-size inputs or broken ties are undefined "
                "behaviour in the delegate."),
        points=("export, lower and load in CI; max shapes in MethodMeta cover the promised range",
                "delegation checked: only accepted ops on portable kernels",
                "parity vs eager configured as the app does, at every bound's edge and with varied values",
                "outside the contract: the host check refuses; device shapes from logs are probed")),
]
