"""Lesson 10 · diagnosis drills (capstone): the drills, its predictions, its exercise (``10.probe_set``) and its
interview cards.

The drills: broken models from both tracks, and the investigation that diagnoses each one with the real tools.
A :class:`Drill` is a story from the field: what the user saw (the symptom, in their words), the
model that was shipped and how it was exported, the eager model the team trusts, and the input the
device actually sends. :func:`investigate` runs the workflow of the lessons on it — export/lower/load
(:func:`helpers.diagnose_export`), the device's input on the raw runtime, a varied probe set against
eager, the app's calls in a row for a report that has them (a model with state), the delegation report — and returns a :class:`Finding` whose ``answer`` is one of
:data:`ANSWERS`. :func:`check` compares a learner's answer with it; with no answer it reveals nothing.

Also here: :func:`draft_issues` (every issue ``torch.export.draft_export`` finds, in one list) and
:func:`run_ci_example` (the copyable export-CI test, with its CONFIG replaced to replay a drill) and
:func:`start_ci_replays` (the drills' replays, :data:`CI_REPLAYS`, run in a process of their own while the learner
reads on).
"""

from __future__ import annotations

import copy
import itertools
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import nn
from torch.export import Dim

from helpers import lowering, models
from helpers._quiet import captured_output, runtime_log_lines
from helpers.artifact import PteArtifact, RuntimeRejectedError
from helpers.diagnose import diagnose_export
from helpers.display import Source, error_excerpt, fmt, show_source
from helpers.exercises.grading import (
    Exercise,
    Verdict,
    base_context,
    function_answer,
)
from helpers.interview import Card
from helpers.lessons import shapes
from helpers.lowering import lower, lower_methods
from helpers.parity import Probe, check_one, compare, probe_inputs
from helpers.questions import Question, Reveal
from helpers.serialized import program_operators

LESSON = "10_diagnosis_drills"


# ----- the investigation ---------------------------------------------------------------------------
FIRST_ANSWERS = (
    "data-dependent control flow",
    "guard on a dynamic dimension",
    "unsupported operator",
    "input outside the export contract",
    "silent specialization",
    "partial delegation",
    "healthy",
)
# Three more, for the traps of lessons 14, 17 and 18: the last part of the lesson, after lesson 18.
LATER_ANSWERS = (
    "data-dependent size",
    "training-mode export",
    "delegate numerics",
)
ANSWERS = FIRST_ANSWERS + LATER_ANSWERS

# What each answer means, defined before the first drill: where it shows, and what is wrong.
DEFINITIONS = {
    "data-dependent control flow": "export stops: Python control flow (an if, a while) reads a tensor's values, which "
                                   "are symbols while tracing",
    "guard on a dynamic dimension": "export stops: the code's size logic does not hold for every size the declared "
                                    "Dim allows, and torch names a constraint",
    "unsupported operator": "a build step stops: an operator that stage cannot take (not in Core ATen when lowering, "
                            "a control-flow operator the program cannot hold, no kernel when the runtime loads the "
                            "program)",
    "input outside the export contract": "the program is right for what it was exported for, and the device sends "
                                         "something else: a shape, a dtype or a baked-in value it was not exported "
                                         "with",
    "silent specialization": "the program runs and answers wrong for an input inside its contract: a Python value "
                             "export read once while tracing (a flag, a number, a shape test) is baked into every "
                             "call",
    "partial delegation": "the answers are right, but part of the graph runs on the portable kernels instead of the "
                          "delegate",
    "healthy": "exports, lowers, loads, matches eager on varied inputs inside its contract, and the graph is on the "
               "delegate",
    "data-dependent size": "export works, and the build stops later: a size read from a tensor's values (.item(), "
                           "nonzero, a mask) that nothing bounds, so lowering cannot answer a question about it or "
                           "plan its memory",
    "training-mode export": "the module was exported in training mode, as it learns: its dropout's random zeros are "
                            "in the program (a new answer at every call), and a batch norm's batch statistics stop the "
                            "lowering (their operator is not Core ATen)",
    "delegate numerics": "the program without a delegate (the portable kernels) agrees with eager, and the delegated "
                         "one does not: the delegate computes some values differently (a NaN, for one: lesson 18)",
}


def categories(answers: tuple[str, ...] = FIRST_ANSWERS) -> Source:
    """The possible answers of the drills (the first seven, or ``LATER_ANSWERS``), each defined."""
    return Source("the answers", "\n".join(f"{answer}: {DEFINITIONS[answer]}." for answer in answers))


FIXES = {
    "data-dependent control flow": "torch.cond / torch.where, hoist the decision into the app, or delete an "
                                   "incidental branch; then compare both sides of the branch against eager.",
    "guard on a dynamic dimension": "adopt the bound or derived Dim torch suggests, or rewrite the size arithmetic "
                                    "(or move it to the host) so it holds for every declared size.",
    "unsupported operator": "replace the operator by supported ones (a decomposition), or move that step to the app.",
    "input outside the export contract": "read the .pte's input signature; normalize on the host (resize, pad, "
                                         "cast), declare a bounded Dim, or ship buckets; a baked-in scalar must "
                                         "become a tensor input or one method per value.",
    "silent specialization": "find the decision export made at trace time (a shape test, a flag, a Python "
                             "scalar, a counter kept in an attribute); make it explicit (torch.cond, a tighter Dim, "
                             "two methods, a position passed as a tensor input) and probe the edges, and for a "
                             "program with state, calls in a row.",
    "partial delegation": "keep the delegated path static (normalize on the host, buckets), or move the declined "
                          "operator out of the dynamic region / out of torch.cond; re-check delegation.",
    "healthy": "nothing to fix: keep the parity test in the export CI job.",
    "data-dependent size": "promise the value's range right after reading it (torch._check(k >= lo), "
                           "torch._check(k <= hi)), then have the app check it before the call: the device does not.",
    "training-mode export": "call .eval() on the module before export (a module torch.export returned cannot: "
                            "re-export from the model), and keep a check that two calls on one input agree.",
    "delegate numerics": "find the values the delegate treats differently (feed them in CI); sanitize them on the host "
                         "(replace NaN, clamp) or keep that operator off the delegate, and compare again.",
}


class BatchGate(nn.Module):
    """Doubles large batches: ``if x.shape[0] > 4``, for batches of 1 to 16."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.shape[0] > 4:
            return x * 2
        return x


class MedianPool(nn.Module):
    """Pools features with ``torch.median`` (robust to outliers, but not in the Core ATen opset)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.median(x, dim=1).values


class TwoIssues(nn.Module):
    """Two problems in one forward(): a test on the batch size and a test on the values."""

    def __init__(self, features: int = 8, seed: int = 0):
        super().__init__()
        with models.seeded(seed):
            self.layer = nn.Linear(features, features)
        self.eval()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.shape[0] > 4:  # large batches are scaled
            x = x * 2
        if x.sum() > 0:  # the layer only for inputs that sum to a positive number
            x = self.layer(x)
        return x


@dataclass
class Drill:
    """One field report: what the user saw, what was shipped, what the team compares against, what the
    device sends. ``exported_with`` is the export call as the team wrote it (shown to the learner);
    ``expected`` is what the tools find (the tests hold :func:`investigate` to it)."""

    name: str
    symptom: str
    exported_with: str
    build: Callable[[], tuple[nn.Module, tuple[Any, ...], Any]]  # the shipped model, example, dynamic_shapes
    device_input: Callable[[], tuple[Any, ...]]
    expected: str
    reference: Callable[[], nn.Module] | None = None  # the eager model the team trusts (default: shipped one)
    track: str = "shapes"
    device_calls: Callable[[], list[tuple[Any, ...]]] | None = None  # the app's calls in a row (state carried)


@dataclass
class Finding:
    """What the real tools report about one drill."""

    answer: str
    evidence: list[str] = field(default_factory=list)

    @property
    def fix(self) -> str:
        return FIXES[self.answer]

    def __str__(self) -> str:
        return "\n".join([f"diagnosis: {self.answer}"] + [f"  · {e}" for e in self.evidence]
                         + [f"  fix: {self.fix}"])

    def __repr__(self) -> str:
        return f"<Finding {self.answer}>"


_KIND_TO_ANSWER = {"data_dependent": "data-dependent control flow",
                   "constraint_violation": "guard on a dynamic dimension",
                   "unsupported_operator": "unsupported operator"}


def investigate(drill: Drill) -> Finding:
    """Diagnose ``drill`` with the real exporter, lowering and runtime (never raises for a broken model)."""
    model, example, dynamic = drill.build()
    # the eager model before any call: export runs forward()'s Python once, and a value kept in a Python attribute (a
    # counter) moves on then (a model without state is the same before and after)
    initial = copy.deepcopy(drill.reference() if drill.reference else model)
    with captured_output():  # a cold build of a scalar input leaks a runtime log line (see the lesson report)
        diagnosis = diagnose_export(model, example, dynamic)
    if not diagnosis.ok:
        answer = _KIND_TO_ANSWER.get(diagnosis.kind, "unsupported operator")
        if diagnosis.stage != "export" and diagnosis.kind == "data_dependent":
            answer = "data-dependent size"  # export traced it; lowering or memory planning met the unbounded value
        if "_native_batch_norm_legit_functional" in diagnosis.message:  # batch norm as it trains: batch statistics
            answer = "training-mode export"
        evidence = [f"{diagnosis.stage}: {diagnosis.summary}"]
        if diagnosis.source_line:
            evidence.append(f"offending line: {diagnosis.source_line}")
        evidence += [f"torch suggests: {s}" for s in diagnosis.suggested_fixes]
        return Finding(answer, evidence)
    artifact = diagnosis.artifact
    assert artifact is not None
    reference = copy.deepcopy(initial)
    calls = drill.device_calls() if drill.device_calls else None  # an app that calls it in a loop: state carries on
    contract = artifact.input_contract()
    evidence = [f"input signature: {contract.signature()}"]
    device = drill.device_input()
    row = check_one(reference, artifact, device, label="device input")
    if row.status == "rejected" or not row.within_contract:
        evidence.append(f"device input {row.shapes}: {row.status}")
        evidence += [f"runtime: {row.runtime_message}"] if row.runtime_message else []
        evidence += [f"contract: {row.contract_message}"] if row.contract_message else []
        return Finding("input outside the export contract", evidence)
    random_ops = [op for ops in program_operators(artifact.pte_bytes).values() for op in ops if "dropout" in op]
    if random_ops:
        evidence.append(f"the program calls {', '.join(random_ops)}; {_repeat_calls(artifact, device)}")
        return Finding("training-mode export", evidence)
    probes = probe_inputs(example, contract=contract)
    report = compare(initial, artifact, probes, fresh_state=True) if calls else compare(reference, artifact, probes)
    diverging = [(r, p) for r, p in zip(report, probes) if r.within_contract and r.status == "diverge"]
    if row.status == "diverge" or diverging:
        where = [(f"device input {row.shapes}", device)] if row.status == "diverge" else []
        where += [(r.label, p.args) for r, p in diverging]
        evidence.append("inside the contract, the .pte and eager disagree on: " + ", ".join(w for w, _ in where))
        portable = lower(model, example, dynamic_shapes=dynamic, backend="portable")
        rows = [check_one(reference, portable, args, label=label) for label, args in where]
        if all(r.status == "match" for r in rows):
            evidence.append("the same program on the portable kernels only (no delegate) matches eager on each of "
                            f"them; delegated: {row.describe() if row.status == 'diverge' else diverging[0][0].describe()}")
            return Finding("delegate numerics", evidence)
        return Finding("silent specialization", evidence)
    if calls:
        in_a_row = compare(copy.deepcopy(initial), artifact.reloaded(),
                           [Probe(f"call {i}", args) for i, args in enumerate(calls, 1)])
        apart = [r for r in in_a_row if r.status != "match"]
        if apart:
            evidence.append(f"one call at a time from the initial state, the .pte matches eager: the device's input and "
                            f"{sum(r.within_contract and r.status == 'match' for r in report)} probes")
            evidence.append(f"the app's {len(calls)} calls in a row, state carried on both sides: {apart[0].label} is "
                            f"the first that differs ({apart[0].describe()}), and {len(apart)} of {len(calls)} differ")
            return Finding("silent specialization", evidence)
        evidence.append(f"the app's {len(calls)} calls in a row, state carried on both sides: every call matches")
    delegation = artifact.delegation()
    if delegation.portable_nodes:
        evidence.append(delegation.summary())
        evidence.append("on portable kernels: " + ", ".join(delegation.portable_ops()))
        evidence += delegation.notes
        return Finding("partial delegation", evidence)
    evidence.append(f"parity inside the contract: {report.summary()}; {delegation.summary()}")
    return Finding("healthy", evidence)


def _same(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Equal element for element, NaN equal to NaN."""
    return a.shape == b.shape and torch.allclose(a, b, rtol=0, atol=0, equal_nan=True)


def _repeat_calls(artifact: PteArtifact, args: tuple[Any, ...], calls: int = 10) -> str:
    """Whether ``calls`` runs of the program on one input all return the same output (dropout's mask is drawn at
    every call, from a source no seed reaches: the count of distinct outputs varies, the verdict does not)."""
    outputs = [artifact.run_raw(*args)[0] for _ in range(calls)]
    same = all(_same(outputs[0], out) for out in outputs[1:])
    return f"{calls} calls on the same input {'all return the same output' if same else 'do not all agree'}"


def drill(name: str) -> Drill:
    """The drill called ``name``."""
    found = {d.name: d for d in [*DRILLS, *FIELD_REPORTS, *LATER_REPORTS]}
    if name not in found:
        raise KeyError(f"no drill {name!r}; there are: {', '.join(found)}")
    return found[name]


def brief(which: Drill | str) -> Source:
    """What the learner gets, as in the field: the symptom in the user's words and the message or output they
    saw (computed: the real exporter, lowering and runtime on what they ran), the export call, and the model's
    source."""
    d = drill(which) if isinstance(which, str) else which
    model, _, _ = d.build()
    code = _code_without_docstrings(type(model))
    text = (f"What the user saw: {d.symptom}\n{seen(d)}\n\nHow it was exported: {d.exported_with}\n\n{code}")
    return Source(f"drill {d.name} ({d.track})", text)


def seen(which: Drill | str) -> str:
    """The message or output the user had in front of them: the first lines of the error of the step that stopped
    (export, lowering, loading), the runtime's refusal of the device's input, or what the program returned."""
    d = drill(which) if isinstance(which, str) else which
    model, example, dynamic = d.build()
    with captured_output():  # what torch prints while it fails is in the message below
        diagnosis = diagnose_export(model, example, dynamic)
    if not diagnosis.ok:
        lines = [line.strip() for line in diagnosis.message.strip().splitlines() if line.strip()][:2]
        lines = lines[:1] + [line for line in lines[1:] if not line.endswith(":")]  # not "There are a few things…:"
        kind = diagnosis.error_type or "error"
        return f"  {diagnosis.stage} failed — {kind}: " + "\n    ".join(lines)
    assert diagnosis.artifact is not None
    if d.device_calls:  # an app that calls it in a loop: what it shows after each call
        program, notebook = diagnosis.artifact.reloaded(), d.reference() if d.reference else d.build()[0]
        shown = [int(program.run_raw(*args)[0].argmax()) for args in d.device_calls()]
        with torch.no_grad():
            expected = [int(notebook(*args).argmax()) for args in d.device_calls()]
        return (f"  no error; the word the app suggests after each of the {len(shown)} calls: {shown}; the notebook's, "
                f"for the same words: {expected}")
    try:
        (out, *_) = diagnosis.artifact.run_raw(*d.device_input())
    except RuntimeRejectedError as exc:
        return f"  the app's log: {exc.reason.split('. Error')[0]}"
    if not _same(out, diagnosis.artifact.run_raw(*d.device_input())[0]):  # a new answer at every call
        return f"  no error; the app's output ({'×'.join(map(str, out.shape))}): {_repeat_calls(diagnosis.artifact, d.device_input())}"
    return f"  no error; the app's output: {fmt(out)}"


def _code_without_docstrings(cls: type) -> str:
    """The class's code as the team wrote it, minus docstrings and comments (ours explain the answer)."""
    import ast

    tree = ast.parse(show_source(cls).code)
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(node, (ast.ClassDef, ast.FunctionDef)) and body and isinstance(body[0], ast.Expr) \
                and isinstance(body[0].value, ast.Constant) and isinstance(body[0].value.value, str):
            node.body = body[1:] or [ast.Pass()]
    return ast.unparse(tree)


def check(which: Drill | str, answer: str | None) -> Finding | None:
    """Judge ``answer`` against what the real tools report for the drill; print the verdict and the evidence.

    With ``answer=None`` it only asks for an answer: nothing is investigated, nothing revealed. A wrong
    answer is reported, never raised, so a notebook runs on whatever the learner wrote.
    """
    d = drill(which) if isinstance(which, str) else which
    if answer is None:
        print(f"No answer yet for drill '{d.name}': set it to one of the answers listed above, then run this cell "
              "again.")
        return None
    if answer not in ANSWERS:
        print(f"{answer!r} is not one of the answers: " + "; ".join(repr(a) for a in ANSWERS))
        return None
    finding = investigate(d)
    mark = "✓ right" if answer == finding.answer else f"✗ not this time — you said {answer!r}"
    print(f"the tools say: {finding.answer} — {mark}")
    print("\n".join(f"  · {e}" for e in finding.evidence))
    print(f"  fix: {finding.fix}")
    return finding


# ----- the camera scenario ------------------------------------------------------------------------
def run_on_device(pte: str | Path, args: tuple[Any, ...], method: str = "forward") -> tuple[Any, list[str]]:
    """Load a ``.pte`` file with the ExecuTorch runtime bindings and run ``method`` as the app would.

    Returns ``(outputs or None, the runtime's log lines)``; nothing from exportlab sits in between.
    """
    from executorch.runtime import Runtime

    with captured_output() as log:
        program = Runtime.get().load_program(Path(pte))
        try:  # copy the outputs: they live in the program's memory, which goes away with it
            outputs = [o.clone() if isinstance(o, torch.Tensor) else o
                       for o in program.load_method(method).execute(list(args))]
        except RuntimeError:
            outputs = None
    return outputs, runtime_log_lines(log.getvalue())


CAMERA_SIZES = ((48, 64), (64, 64))  # what the fleet's cameras deliver, after the app's downscale


def camera_options() -> dict[str, tuple[PteArtifact, Callable[[torch.Tensor], tuple[torch.Tensor, str]]]]:
    """The three deliberate choices for the camera drill, built on the real pipeline.

    Each maps a name to ``(artifact, prepare)`` where ``prepare(frame)`` returns the input the app
    passes and the method it calls.
    """
    from ..host import letterbox

    model, static, _ = shapes.vision_program()
    bounded = lower(model, (shapes.camera_frame(64, 64),),
                    dynamic_shapes={"x": {2: Dim("height", min=32, max=128), 3: Dim("width", min=32, max=128)}})
    buckets = lower_methods({f"frame_{h}x{w}": (model, (shapes.camera_frame(h, w),)) for h, w in CAMERA_SIZES})
    return {
        "normalize on the host (letterbox → 64×64)": (static, lambda f: (letterbox(f, shapes.VISION_SIZE), "forward")),
        "bounded Dims (height, width ∈ 32..128)": (bounded, lambda f: (f, "forward")),
        "buckets (one method per camera size)": (buckets, lambda f: (f, f"frame_{f.shape[2]}x{f.shape[3]}")),
    }


def compare_options(options: dict[str, Any], frames: list[torch.Tensor]) -> list[dict[str, Any]]:
    """For each option: does every device frame run, does it match eager on what the app passes, and
    what does it cost (delegated coverage, planned arena, ``.pte`` bytes)."""
    model = models.TinyVision()
    rows = []
    for name, (artifact, prepare) in options.items():
        ok = True
        for frame in frames:
            args, method = prepare(frame)
            row = check_one(model, artifact, (args,), method=method)
            ok = ok and row.status == "match" and row.within_contract
        methods = artifact.methods
        d = [artifact.delegation(m) for m in methods]
        rows.append({
            "option": name, "all device frames match eager": ok,
            "delegated": f"{sum(x.delegated_nodes for x in d)}/{sum(x.delegated_nodes + x.portable_nodes for x in d)}",
            "arena bytes (largest method)": max(artifact.planned_memory_bytes(m) for m in methods),
            ".pte bytes": artifact.nbytes})
    return rows


def run_ci_example(path: str | Path, config: str | None = None) -> dict[str, Any]:
    """Run the copyable export-CI test file with pytest, in this process; return outcome counts and the
    failed tests' names.

    With ``config``, a copy of the file whose CONFIG section is replaced by ``config`` is run instead
    (how a drill's model is replayed through the same test).
    """
    import pytest

    class Count:
        def __init__(self) -> None:
            self.outcomes: dict[str, int] = {}
            self.failed: list[str] = []

        def pytest_runtest_logreport(self, report):  # noqa: ANN001 - pytest hook
            if report.when == "call" or report.outcome != "passed":
                self.outcomes[report.outcome] = self.outcomes.get(report.outcome, 0) + 1
                if report.outcome == "failed":
                    self.failed.append(report.nodeid.split("::", 1)[-1])

    source = Path(path).read_text()
    with tempfile.TemporaryDirectory() as tmp:
        target = Path(path)
        if config is not None:
            start = source.index("# ===== CONFIG")
            start = source.index("\n", start) + 1
            end = source.index("# =====", start)
            target = Path(tmp) / f"test_export_ci_{abs(hash(config)) % 10**8}.py"
            target.write_text(source[:start] + config.strip() + "\n" + source[end:])
        counter = Count()
        # the test file turns progress lines off for its own run: the setting is restored after it
        with lowering.progress_lines(lowering.progress_enabled()), captured_output():
            # the test needs pytest alone: the installed plugins (xdist, nbval, anyio, ...) are not loaded, which
            # saves ~1.5 s the first time
            code = pytest.main([str(target), "-q", "-p", "no:cacheprovider", "--disable-plugin-autoload"],
                               plugins=[counter])
    return {"exit code": int(code), **counter.outcomes, "failed tests": counter.failed}


# The drills replayed through the CI test: each replaces the test's CONFIG section.
CI_REPLAYS = {
    "one_frame": '''
from helpers.models import ShapeBranch

MODEL = ShapeBranch().eval()
REFERENCE = MODEL
EXAMPLE = (torch.randn(1, 8, 4, generator=torch.Generator().manual_seed(1)),)
DYNAMIC_SHAPES = {"x": {1: Dim("frames", min=1, max=16)}}
INPUT_NAMES = ("x",)
DEVICE_INPUTS = [("a 12-frame clip", (torch.randn(1, 12, 4, generator=torch.Generator().manual_seed(2)),))]
ALLOWED_PORTABLE_OPS = {"aten_mean_dim", "aten_var_correction"}  # no XNNPACK rule for these ranks/ops
ATOL, RTOL = 1e-4, 1e-4
''',
    "flag": '''
from helpers.models import ConfigBranch

MODEL = ConfigBranch(use_residual=True).eval()  # the training repo's setting
REFERENCE = ConfigBranch(use_residual=False).eval()  # the app's setting
EXAMPLE = (torch.randn(2, 4, generator=torch.Generator().manual_seed(1)),)
DYNAMIC_SHAPES = None
INPUT_NAMES = ("x",)
DEVICE_INPUTS = [("an input", (torch.randn(2, 4, generator=torch.Generator().manual_seed(2)),))]
ALLOWED_PORTABLE_OPS = set()
ATOL, RTOL = 1e-4, 1e-4
''',
    "any_size": '''
from helpers.lessons.shapes import TinySegmenter, camera_frame

MODEL = TinySegmenter().eval()
REFERENCE = MODEL
EXAMPLE = (camera_frame(64, 64),)
DYNAMIC_SHAPES = {"x": {2: Dim("height", min=32, max=128), 3: Dim("width", min=32, max=128)}}
INPUT_NAMES = ("x",)
DEVICE_INPUTS = [("a 48×64 frame", (camera_frame(48, 64),))]
ALLOWED_PORTABLE_OPS = set()
ATOL, RTOL = 1e-4, 1e-4
''',
}

# The replays the lesson starts in a process of its own at its top; the lesson's kernel runs the test on its own
# CONFIG and ``one_frame`` meanwhile: the two share the work of the two cores, and both finish at about the same time.
BACKGROUND_REPLAYS = ("flag", "any_size")

_REPO_ROOT = Path(__file__).resolve().parents[2]
# what the background process runs: this module's worker (overridable by tests, to fail on purpose)
_WORKER_CODE = f"import importlib; importlib.import_module({__name__!r})._ci_replay_worker()"


class BackgroundCiRuns:
    """Replays of the CI test running in a process of their own (see :func:`start_ci_replays`)."""

    def __init__(self, path: Path, configs: dict[str, str]) -> None:
        self.names = list(configs)
        self._out = tempfile.TemporaryFile(mode="w+")
        self._err = tempfile.TemporaryFile(mode="w+")
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(_REPO_ROOT),
                                                                          os.environ.get("PYTHONPATH")]))}
        self._process = subprocess.Popen([sys.executable, "-c", _WORKER_CODE], stdin=subprocess.PIPE,
                                         stdout=self._out, stderr=self._err, env=env, cwd=_REPO_ROOT, text=True)
        assert self._process.stdin is not None
        self._process.stdin.write(json.dumps({"path": str(path), "configs": configs}))
        self._process.stdin.close()
        self._results: dict[str, dict[str, Any]] | None = None

    def results(self, timeout: float = 600) -> dict[str, dict[str, Any]]:
        """Wait for the replays; ``{name: what run_ci_example returned}``, in the order they were given."""
        if self._results is None:
            try:
                code = self._process.wait(timeout)
            except subprocess.TimeoutExpired:
                self._process.kill()
                raise RuntimeError(f"the background CI replays did not finish within {timeout:.0f} s (exportlab's "
                                   "runner, not your model): run drills.run_ci_example(path, config) instead") from None
            self._out.seek(0)
            self._err.seek(0)
            lines = self._out.read().strip().splitlines()
            if code != 0 or not lines:
                tail = "\n".join(self._err.read().strip().splitlines()[-8:])
                raise RuntimeError(f"the background CI replays stopped with exit code {code} (exportlab's runner, "
                                   f"not a test's outcome); its last words:\n{tail}")
            self._results = json.loads(lines[-1])
        return self._results


def start_ci_replays(path: str | Path, configs: dict[str, str] | None = None) -> BackgroundCiRuns:
    """Start :func:`run_ci_example` on ``path`` with each CONFIG of ``configs`` (default: the
    :data:`BACKGROUND_REPLAYS` of :data:`CI_REPLAYS`), one after the other in a new Python process, and return at
    once; ``.results()`` waits for them.

    Each replay builds its program from scratch with the stock compiler, as a CI job does (a new process also
    imports the compiler and builds XNNPACK's pattern graphs first, ~6 s): started early, they run beside the lesson
    instead of in front of the learner.
    """
    path = Path(path).resolve()
    if not path.is_file():
        raise FileNotFoundError(f"no CI test file at {path}")
    if configs is None:
        configs = {name: CI_REPLAYS[name] for name in BACKGROUND_REPLAYS}
    return BackgroundCiRuns(path, dict(configs))


def _ci_replay_worker() -> None:
    """The background process: read ``{"path", "configs"}`` on stdin, print the outcomes as one JSON line."""
    spec = json.loads(sys.stdin.read())
    outcomes = {name: run_ci_example(spec["path"], config) for name, config in spec["configs"].items()}
    print(json.dumps(outcomes))


# ----- the drills ------------------------------------------------------------------------------
def _g(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _camera() -> tuple[nn.Module, tuple[Any, ...], Any]:
    model, _, example = shapes.vision_program()
    return model, (example,), None


def _one_frame_clip() -> tuple[nn.Module, tuple[Any, ...], Any]:
    return models.ShapeBranch(), (torch.randn(1, 8, 4, generator=_g(1)),), {"x": {1: Dim("frames", min=1, max=16)}}


def _flag() -> tuple[nn.Module, tuple[Any, ...], Any]:
    return models.ConfigBranch(use_residual=True), (torch.randn(2, 4, generator=_g(2)),), None


def _steps() -> tuple[nn.Module, tuple[Any, ...], Any]:
    return models.ScalarRepeat(), (torch.randn(2, 4, generator=_g(3)), 3), None


def _any_size() -> tuple[nn.Module, tuple[Any, ...], Any]:
    model, _, example, dynamic = shapes.segmenter_program(max_side=128)
    return model, (example,), dynamic


def _bounded_camera() -> tuple[nn.Module, tuple[Any, ...], Any]:
    model, _, example = shapes.vision_program()
    return model, (example,), {"x": {2: Dim("height", min=32, max=128), 3: Dim("width", min=32, max=128)}}


def _no_max() -> tuple[nn.Module, tuple[Any, ...], Any]:
    return models.ShapeBranch(), (torch.randn(1, 8, 4, generator=_g(16)),), {"x": {1: Dim("frames", min=2)}}


DRILLS: list[Drill] = [
    Drill("sign_router", "The nightly export job stops with a traceback before any .pte is written.",
          "torch.export.export(ScaleOrShift(), (torch.randn(2, 4),))",
          lambda: (models.ScaleOrShift(), (torch.randn(2, 4, generator=_g(5)),), None),
          lambda: (torch.randn(2, 4, generator=_g(6)),), "data-dependent control flow", track="control flow"),
    Drill("one_frame", "Audio clips of 2 to 16 frames get sensible scores on the phone; a one-frame clip gets NaN.",
          "helpers.lower(ShapeBranch(), (clip_of_8_frames,), dynamic_shapes={'x': {1: Dim('frames', min=1, max=16)}})",
          _one_frame_clip, lambda: (torch.randn(1, 1, 4, generator=_g(7)),), "silent specialization"),
    Drill("flag", "The team switched use_residual off in the app's configuration; the phone's scores did not change.",
          "helpers.lower(ConfigBranch(use_residual=True), (torch.randn(2, 4),))  # the training repo's setting",
          _flag, lambda: (torch.randn(2, 4, generator=_g(8)),), "silent specialization",
          reference=lambda: models.ConfigBranch(use_residual=False), track="control flow"),
    Drill("batch_gate", "Exporting with a dynamic batch stops with an error; with a fixed batch of 8 it exported fine.",
          "torch.export.export(BatchGate(), (torch.randn(8, 4),), dynamic_shapes={'x': {0: Dim('batch', min=1, "
          "max=16)}})",
          lambda: (BatchGate(), (torch.randn(8, 4, generator=_g(9)),), {"x": {0: Dim("batch", min=1, max=16)}}),
          lambda: (torch.randn(3, 4, generator=_g(10)),), "guard on a dynamic dimension"),
    Drill("steps", "The app calls the model with steps=5 and its log shows an error; the notebook used steps=3.",
          "helpers.lower(ScalarRepeat(), (torch.randn(2, 4), 3))",
          _steps, lambda: (torch.randn(2, 4, generator=_g(11)), 5), "input outside the export contract",
          track="control flow"),
    Drill("median", "torch.export.export succeeds; the next build step, lowering for the phone, stops with an error.",
          "helpers.lower(MedianPool(), (torch.randn(2, 5, 4),))",
          lambda: (MedianPool(), (torch.randn(2, 5, 4, generator=_g(12)),), None),
          lambda: (torch.randn(2, 5, 4, generator=_g(13)),), "unsupported operator", track="control flow"),
    Drill("any_size", "Height and width were made dynamic so that any frame works. Scores are still right, but the "
          "feature is several times slower on the phone than the previous build.",
          "helpers.lower(TinySegmenter(), (frame_64x64,), dynamic_shapes={'x': {2: Dim('height', min=32, max=128), "
          "3: Dim('width', min=32, max=128)}})",
          _any_size, lambda: (shapes.camera_frame(48, 64),), "partial delegation"),
    Drill("loop", "The export job fails on a refinement step that repeats until the output is large enough.",
          "torch.export.export(WhileDouble(), (torch.rand(2, 4),))",
          lambda: (models.WhileDouble(), (torch.rand(2, 4, generator=_g(14)),), None),
          lambda: (torch.rand(2, 4, generator=_g(15)),), "data-dependent control flow", track="control flow"),
    Drill("bounded_camera", "A reviewer asks whether the re-exported classifier is safe to ship; the camera delivers "
          "48×64 frames.",
          "helpers.lower(TinyVision(), (frame_64x64,), dynamic_shapes={'x': {2: Dim('height', min=32, max=128), "
          "3: Dim('width', min=32, max=128)}})",
          _bounded_camera, lambda: (shapes.camera_frame(48, 64),), "healthy"),
    Drill("no_max", "Clips of up to 8 frames work on the phone; every 12-frame clip fails with an error in the log.",
          "helpers.lower(ShapeBranch(), (clip_of_8_frames,), dynamic_shapes={'x': {1: Dim('frames', min=2)}})",
          _no_max, lambda: (torch.randn(1, 12, 4, generator=_g(17)),), "input outside the export contract"),
]


# ----- field reports on models no lesson shows ------------------------------------------------------
class EarlyExit(nn.Module):
    def __init__(self, features: int = 8, depth: int = 4, seed: int = 40):
        super().__init__()
        with models.seeded(seed):
            self.blocks = nn.ModuleList(nn.Linear(features, features) for _ in range(depth))
        self.eval()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for block in self.blocks:
            update = torch.tanh(block(x))
            x = x + update
            if update.abs().mean() < 0.05:
                break
        return x


class CalibratedClassifier(nn.Module):
    def __init__(self, temperature: float = 1.0, seed: int = 41):
        super().__init__()
        with models.seeded(seed):
            self.head = nn.Linear(6, 3)
        self.temperature = temperature
        self.eval()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(self.head(x) / self.temperature, dim=-1)


class KeypointHead(nn.Module):
    def __init__(self, seed: int = 42):
        super().__init__()
        with models.seeded(seed):
            self.conv = nn.Conv2d(3, 4, 3, padding=1)
        self.eval()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(x).mean(dim=(2, 3))


class PoolingHead(nn.Module):
    def __init__(self, seed: int = 43):
        super().__init__()
        with models.seeded(seed):
            self.conv = nn.Conv2d(3, 8, 3, padding=1)
            self.head = nn.Linear(8, 4)
        self.pool = nn.MaxPool2d(2, ceil_mode=True)
        self.eval()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.pool(torch.relu(self.conv(x)))
        return self.head(h.mean(dim=(2, 3)))


class RankFeatures(nn.Module):
    def __init__(self, seed: int = 44):
        super().__init__()
        with models.seeded(seed):
            self.proj = nn.Linear(6, 6)
        self.eval()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.argsort(self.proj(x), dim=-1).float()


class FlattenHead(nn.Module):
    def __init__(self, seed: int = 45):
        super().__init__()
        with models.seeded(seed):
            self.conv = nn.Conv2d(3, 8, 3, padding=1)
            self.head = nn.Linear(8, 4)
        self.eval()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.relu(self.conv(x))
        return self.head(h.flatten(2).mean(-1))


def _any_camera() -> dict[str, Any]:
    return {"x": {2: Dim("height", min=32, max=128), 3: Dim("width", min=32, max=128)}}


FIELD_REPORTS: list[Drill] = [
    Drill("early_exit", "The refinement model stops once its updates get small. It runs in the notebook; the export "
          "job fails on it.",
          "torch.export.export(EarlyExit(), (torch.randn(2, 8),))",
          lambda: (EarlyExit(), (torch.randn(2, 8, generator=_g(30)),), None),
          lambda: (torch.randn(2, 8, generator=_g(31)),), "data-dependent control flow", track="control flow"),
    Drill("temperature", "After calibration the app sets temperature = 2.5 on the classifier; the phone's "
          "probabilities are exactly what they were before.",
          "helpers.lower(CalibratedClassifier(temperature=1.0), (torch.randn(2, 6),))  # before calibration",
          lambda: (CalibratedClassifier(1.0), (torch.randn(2, 6, generator=_g(32)),), None),
          lambda: (torch.randn(2, 6, generator=_g(33)),), "silent specialization",
          reference=lambda: CalibratedClassifier(2.5), track="control flow"),
    Drill("camera_bytes", "The app hands the camera's bytes (values 0 to 255) to the keypoint model; every call fails "
          "with one line in the log.",
          "helpers.lower(KeypointHead(), (torch.rand(1, 3, 64, 64),))",
          lambda: (KeypointHead(), (torch.rand(1, 3, 64, 64, generator=_g(34)),), None),
          lambda: ((torch.rand(1, 3, 64, 64, generator=_g(35)) * 255).to(torch.uint8),),
          "input outside the export contract"),
    Drill("ceil_pool", "Height and width were made dynamic so that any camera works; the export job now stops with an "
          "error.",
          "torch.export.export(PoolingHead(), (frame_64x64,), dynamic_shapes={'x': {2: Dim('height', min=32, "
          "max=128), 3: Dim('width', min=32, max=128)}})",
          lambda: (PoolingHead(), (torch.rand(1, 3, 64, 64, generator=_g(36)),), _any_camera()),
          lambda: (torch.rand(1, 3, 48, 64, generator=_g(37)),), "guard on a dynamic dimension"),
    Drill("rank", "Export and lowering succeed in CI; the app fails as soon as it loads the program.",
          "helpers.lower(RankFeatures(), (torch.randn(2, 6),))",
          lambda: (RankFeatures(), (torch.randn(2, 6, generator=_g(38)),), None),
          lambda: (torch.randn(2, 6, generator=_g(39)),), "unsupported operator", track="control flow"),
    Drill("flatten", "Height and width were made dynamic; scores still match the notebook, but each frame takes "
          "longer on the phone than with the fixed-size build.",
          "helpers.lower(FlattenHead(), (frame_64x64,), dynamic_shapes={'x': {2: Dim('height', min=32, max=128), "
          "3: Dim('width', min=32, max=128)}})",
          lambda: (FlattenHead(), (torch.rand(1, 3, 64, 64, generator=_g(40)),), _any_camera()),
          lambda: (torch.rand(1, 3, 48, 64, generator=_g(41)),), "partial delegation"),
]


# ----- after lesson 18: field reports on the traps of lessons 13-18 ---------------------------------
class PromptPositions(nn.Module):
    def __init__(self, seed: int = 50):
        super().__init__()
        with models.seeded(seed):
            self.embed = nn.Embedding(32, 8)
        self.eval()

    def forward(self, length: torch.Tensor) -> torch.Tensor:
        positions = torch.arange(length.item())
        return self.embed(positions)


class RefineUntilSmall(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        def still_large(y: torch.Tensor) -> torch.Tensor:
            return y.abs().max() > 1

        def shrink(y: torch.Tensor) -> tuple[torch.Tensor]:
            return (y * 0.5,)

        return torch.while_loop(still_large, shrink, (x,))[0]


class LevelMeter(nn.Module):
    def __init__(self, seed: int = 51):
        super().__init__()
        with models.seeded(seed):
            self.proj = nn.Linear(8, 2)
        self.eval()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.proj(x.abs())


class PhotoScorer(nn.Module):
    def __init__(self, seed: int = 48):
        super().__init__()
        with models.seeded(seed):
            self.hidden = nn.Linear(6, 12)
            self.out = nn.Linear(12, 3)
        self.drop = nn.Dropout(0.2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.out(self.drop(torch.relu(self.hidden(x))))


class HeatmapPeak(nn.Module):
    def __init__(self, seed: int = 46):
        super().__init__()
        with models.seeded(seed):
            self.head = nn.Linear(16, 2)
        self.eval()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        hottest = torch.nn.functional.max_pool2d(x, 2)  # the hottest reading of each 2×2 block
        return self.head(torch.relu(hottest).flatten(1))


class NextWord(nn.Module):
    typed: torch.Tensor

    def __init__(self, words: int = 32, width: int = 16, slots: int = 16, seed: int = 60):
        super().__init__()
        with models.seeded(seed):
            self.embed = nn.Embedding(words, width)
            self.head = nn.Linear(width, words)
        self.register_buffer("typed", torch.zeros(slots, width))
        self.position = 0
        self.eval()

    def forward(self, word: torch.Tensor) -> torch.Tensor:
        x = self.embed(word)[0]
        self.typed[self.position] = x.detach()
        self.position += 1
        context = self.typed[: self.position].mean(dim=0)
        return self.head(x + context)


TYPED = (3, 17, 8, 25, 11, 30)  # the words the user typed, one call each


def _recorded_levels() -> tuple[nn.Module, tuple[Any, ...], Any]:
    model, example = LevelMeter(), (torch.randn(2, 8, generator=_g(52)),)
    recorded = torch.export.AdditionalInputs()
    for seed, rows in ((53, 5), (54, 3)):
        recorded.add((torch.randn(rows, 8, generator=_g(seed)),))
    return model, example, recorded.dynamic_shapes(model, example)


def _thermal_frame(seed: int, dead: tuple[int, int] | None = None) -> torch.Tensor:
    frame = torch.rand(1, 1, 8, 8, generator=_g(seed))
    if dead is not None:
        frame[0, 0, dead[0], dead[1]] = float("nan")
    return frame


def _scorer_in_training() -> PhotoScorer:
    return PhotoScorer().train()  # as the training script left it


LATER_REPORTS: list[Drill] = [
    Drill("positions", "Export succeeds; the build of the .pte stops before the file is written.",
          "helpers.lower(PromptPositions(), (torch.tensor(5),))  # the prompt's length, as the app sends it",
          lambda: (PromptPositions(), (torch.tensor(5),), None),
          lambda: (torch.tensor(7),), "data-dependent size", track="lessons 13-18"),
    Drill("refine", "The Python while loop was rewritten with torch.while_loop as a blog post advised; "
          "torch.export.export now succeeds, and the build of the .pte stops.",
          "helpers.lower(RefineUntilSmall(), (torch.randn(2, 4) * 10,))",
          lambda: (RefineUntilSmall(), (torch.randn(2, 4, generator=_g(55)) * 10,), None),
          lambda: (torch.randn(2, 4, generator=_g(56)) * 10,), "unsupported operator", track="lessons 13-18"),
    Drill("recorded_batches", "Export was given the app's recorded batches (5 and 3 rows) so that torch could work out "
          "what varies, and verified them all; on the phone the 5-row batch fails with one line in the log.",
          "recorded = torch.export.AdditionalInputs(); recorded.add((batch_of_5,)); recorded.add((batch_of_3,))\n"
          "helpers.lower(LevelMeter(), (batch_of_2,), dynamic_shapes=recorded.dynamic_shapes(LevelMeter(), "
          "(batch_of_2,)))",
          _recorded_levels, lambda: (torch.randn(5, 8, generator=_g(57)),), "input outside the export contract",
          track="lessons 13-18"),
    Drill("photo_scores", "Scoring the same photo twice on the phone gives two different scores; the notebook's "
          "scores are the same every time.",
          "model = PhotoScorer(); train(model)  # the training script, then straight to export:\n"
          "helpers.lower(model, (torch.randn(2, 6),))",
          lambda: (_scorer_in_training(), (torch.randn(2, 6, generator=_g(49)),), None),
          lambda: (torch.randn(2, 6, generator=_g(58)),), "training-mode export",
          reference=lambda: PhotoScorer().eval(), track="lessons 13-18"),
    Drill("dead_sensor", "A thermal camera has a dead sensor that reads NaN. In the notebook the frames it touches "
          "score NaN and the app drops them; on the phone the same frames get ordinary-looking scores.",
          "helpers.lower(HeatmapPeak(), (torch.rand(1, 1, 8, 8),))",
          lambda: (HeatmapPeak(), (_thermal_frame(47),), None),
          lambda: (_thermal_frame(59, dead=(2, 4)),), "delegate numerics", track="lessons 13-18"),
    Drill("next_word", "The keyboard's next-word model keeps what was typed in a cache on the phone, one call per "
          "word. Its suggestions start out as the notebook's, then part from them for the same words.",
          "helpers.lower(NextWord(), (torch.tensor([3]),))  # one word per call",
          lambda: (NextWord(), (torch.tensor([3]),), None),
          lambda: (torch.tensor([TYPED[0]]),), "silent specialization", track="lessons 13-18",
          device_calls=lambda: [(torch.tensor([word]),) for word in TYPED]),
]


def field_reports(reports: list[Drill] | None = None) -> Source:
    """The briefs of the field reports on models no lesson shows (``FIELD_REPORTS``, or ``reports``), one after the
    other."""
    chosen = FIELD_REPORTS if reports is None else reports
    return Source("field reports", "\n\n".join(f"── {d.name} ──\n{brief(d).code}" for d in chosen))


def check_all(answers: dict[str, str | None]) -> dict[str, Finding | None]:
    """:func:`check` for each field report named in ``answers``."""
    found = {}
    for name, answer in answers.items():
        print(f"── {name} ──")
        found[name] = check(name, answer)
    return found


# ----- every issue at once: draft_export ------------------------------------------------------------
def draft_issues(model: nn.Module, example_args: tuple[Any, ...], dynamic_shapes: Any = None) -> tuple[Any, list[dict[str, str]]]:
    """Run ``torch.export.draft_export`` and list every issue it found: its kind, the expression export
    could not decide or had to guard, and the line of ``forward()`` where it happened.

    Returns ``(draft program, issues)``. The draft program is *not* for shipping: where the trace needed
    an answer, it took the example's, specialized, and inserted asserts.
    """
    import re

    from .._quiet import draft_export_trace

    with draft_export_trace(), captured_output(), torch.random.fork_rng(devices=[]):
        program = torch.export.draft_export(model, tuple(example_args), dynamic_shapes=dynamic_shapes)
    issues = []
    for failure in program._report.failures:  # type: ignore[attr-defined]  # draft_export attaches its report
        data = failure.data
        names = {sym: re.sub(r"L\['(\w+)'\]\.size\(\)\[(\d+)\]", r"\1.shape[\2]", src)
                 for sym, src in (data.get("symbol_to_sources") or {}).items()}
        expression = str(data.get("expr", data.get("op", "")))
        for sym, readable in names.items():
            expression = re.sub(rf"\b{sym}\b", readable, expression)
        stack = data.get("user_stack") or []
        line = (stack[-1].get("loc", "") if stack else "").split("  #")[0].strip()
        kind = {"GUARD_ADDED": "guard added", "DATA_DEPENDENT_ERROR": "data-dependent",
                "MISSING_FAKE_KERNEL": "missing fake kernel", "MISMATCHED_FAKE_KERNEL": "mismatched fake kernel"}.get(
            failure.failure_type.name, failure.failure_type.name)
        issues.append({"kind": kind, "expression": expression, "line": line or "(no line of forward())"})
    return program, issues


# ----- predictions ----------------------------------------------------------------------------------
def _batch_loop() -> Reveal:
    drill = Drill(
        "batch_loop", "A per-item loop exported with batch 3; the device sends 4 items.",
        "helpers.lower(BatchLoop(), (torch.randn(3, 4),))",
        lambda: (models.BatchLoop(), (torch.randn(3, 4, generator=torch.Generator().manual_seed(20)),), None),
        lambda: (torch.randn(4, 4, generator=torch.Generator().manual_seed(21)),),
        "input outside the export contract", track="control flow")
    finding = investigate(drill)
    model, example, _ = drill.build()
    art = lower(model, example)
    at_export = check_one(model, art, example, label="the export's own batch")
    d = art.delegation()
    signature = art.input_contract().signature()
    return Reveal(finding.answer, "\n".join(finding.evidence), why_not={
        "data-dependent control flow": ("export, lowering and loading all succeeded: no branch on a tensor's values "
                                        "stopped export."),
        "guard on a dynamic dimension": f"no Dim was declared, so there is no dynamic dimension to guard: {signature}.",
        "unsupported operator": (f"the program loaded and ran the export's own batch of 3 ({at_export.status} with "
                                 "eager): every operator has a kernel."),
        "silent specialization": ("the loop was specialized (unrolled for batch 3), but nothing is silent here: the "
                                  "runtime refused batch 4 with its own message. Silent means it runs and answers wrong."),
        "partial delegation": (f"true of this program ({d.summary()}), but it does not explain the symptom: partial "
                               "delegation makes a call slower, it never refuses one; the app's input never reached "
                               "an operator."),
        "healthy": "the device refused the app's input: the program cannot serve the batch the app sends.",
    })


QUESTIONS = [
    Question("10.batch_loop", LESSON,
             "BatchLoop (a Python for over the batch) was exported with a batch of 3; the device sends a batch of 4. "
             "Which diagnosis do the tools give?", FIRST_ANSWERS, _batch_loop),
]


# ----- exercises ------------------------------------------------------------------------------------
MAX_PROBES = 400


class _PositiveBranchOnly(models.ScaleOrShift):
    """ScaleOrShift with its sign test resolved at export: only the positive branch (a straight program)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.a(x)


# Each check draws its scenarios from the next of these (example frames, the app's promised max frames, batch of the
# fixed-shape models), so a probe list fitted to the scenarios one check names fails on the next: the probes must
# follow the example and the dims they are given. (Three, so the programs are cached after the first three checks.)
PROBE_SET_VARIANTS = ((8, 16, 2), (6, 12, 3), (10, 20, 1))
_PROBE_SET_CHECKS = itertools.count()


def _probe_scenarios(variant: tuple[int, int, int] = PROBE_SET_VARIANTS[0]) -> list[dict[str, Any]]:
    """Programs the probe set runs against: four broken ones (each with an in-contract bug) and two correct ones.

    ``dims`` is what the app promises (axis → (min, max)), which is what the learner's probes get."""
    frames, hi, batch = variant
    clip = torch.randn(1, frames, 4, generator=torch.Generator().manual_seed(41))
    pair = torch.randn(batch, 4, generator=torch.Generator().manual_seed(42))
    positive = pair.abs() + 0.1  # the team's sample input happened to be positive
    return [
        {"name": "one_frame", "broken": True, "example": clip, "dims": {1: (1, hi)}, "reference": models.ShapeBranch(),
         "what": f"ShapeBranch exported with Dim('frames', min=1, max={hi})",
         "art": lambda: lower(models.ShapeBranch(), (clip,), dynamic_shapes={"x": {1: Dim("frames", min=1, max=hi)}}),
         "hint": "the bug hides at one size: probe every Dim at its min and max (and next to them)"},
        {"name": "no_max", "broken": True, "example": clip, "dims": {1: (2, hi)}, "reference": models.ShapeBranch(),
         "what": f"ShapeBranch promised 2..{hi} frames, exported with Dim('frames', min=2) (no max)",
         "art": lambda: lower(models.ShapeBranch(), (clip,), dynamic_shapes={"x": {1: Dim("frames", min=2)}}),
         "hint": "a promised size the program cannot take shows only at the top of the range: probe each Dim's max"},
        {"name": "flag", "broken": True, "example": pair, "dims": {}, "reference": models.ConfigBranch(use_residual=False),
         "what": "ConfigBranch exported with use_residual=True; the app runs it with use_residual=False",
         "art": lambda: lower(models.ConfigBranch(use_residual=True), (pair,)),
         "hint": "compare on inputs with real values; an all-zero input hides a missing `+ x`"},
        {"name": "sign", "broken": True, "example": positive, "dims": {}, "reference": models.ScaleOrShift(),
         "what": "ScaleOrShift's positive branch baked into a straight program; eager branches on the sign",
         "art": lambda: lower(_PositiveBranchOnly(), (positive,)),
         "hint": "a branch on the values shows only with inputs on both sides of it: vary the values' signs"},
        {"name": "frames, correct", "broken": False, "example": clip, "dims": {1: (2, hi)},
         "reference": models.ShapeBranch(), "what": f"ShapeBranch exported with Dim('frames', min=2, max={hi})",
         "art": lambda: lower(models.ShapeBranch(), (clip,), dynamic_shapes={"x": {1: Dim("frames", min=2, max=hi)}}),
         "hint": "only probes inside the contract are compared; outside it, refusing is the host check's job"},
        {"name": "sign, correct", "broken": False, "example": positive, "dims": {}, "reference": models.ScaleOrShift(),
         "what": "ScaleOrShiftWhere (torch.where, both branches) against eager ScaleOrShift",
         "art": lambda: lower(models.ScaleOrShiftWhere(), (positive,)),
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
    variant = PROBE_SET_VARIANTS[next(_PROBE_SET_CHECKS) % len(PROBE_SET_VARIANTS)]
    for scenario in _probe_scenarios(variant):
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
