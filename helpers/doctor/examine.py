"""The doctor's pipeline (:func:`examine`) and what it finds (:class:`DoctorReport`).

Stages, in order: ``export`` (``torch.export``, once) → ``lower`` (XNNPACK or portable, cached) →
``load`` (the ``.pte`` in the ExecuTorch runtime; with ``pte=`` a shipped file instead of the two
before) → ``compare`` (:func:`helpers.probe_inputs` on the ``.pte``'s input contract, then
:func:`helpers.compare` against eager) → ``delegation`` → ``memory``, plus ``draft_export`` and
``bundle`` when asked for.

A failure *of the model* (torch or ExecuTorch raised it while exporting, lowering or loading:
:func:`helpers.lowering.stage_of`) is a finding: verdict ``fail``. Any other exception is the doctor's
own failure: verdict ``error``, exit status 3, and the report says so instead of blaming the model.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

__all__ = ["EXIT_PASS", "EXIT_FAIL", "EXIT_USAGE", "EXIT_ERROR", "VERDICTS", "STAGE_NAMES", "Stage", "Check",
           "DraftFindings", "BundleInfo", "DoctorReport", "examine"]

EXIT_PASS, EXIT_FAIL, EXIT_USAGE, EXIT_ERROR = 0, 1, 2, 3
VERDICTS = ("pass", "fail", "error")
STAGE_NAMES = ("export", "draft_export", "lower", "load", "compare", "delegation", "memory", "bundle")
STAGE_STATUSES = ("ok", "failed", "skipped", "error")


@dataclass
class Stage:
    """One step of the pipeline: ``ok``, ``failed`` (the model fails it), ``skipped`` (not reached or not
    asked for) or ``error`` (the doctor itself failed there)."""

    name: str
    status: str
    message: str = ""
    seconds: float | None = None


@dataclass
class Check:
    """One criterion of the verdict: parity inside the contract, and each option asked for."""

    name: str
    passed: bool
    message: str
    details: list[str] = field(default_factory=list)
    short: str = ""  # what the headline says when the check fails


@dataclass
class DraftFindings:
    """What ``torch.export.draft_export`` found: every issue, not only the first one export raises."""

    issues: list[dict[str, str]]
    text: str = ""  # torch's own report, trimmed
    error: str | None = None  # draft_export itself raised


@dataclass
class BundleInfo:
    """The BundledProgram written with ``bundle=``: its test cases and their verification in the runtime."""

    path: str | None
    nbytes: int
    labels: list[str]
    rtol: float
    atols: list[float]  # per test case: the doctor's atol scaled by the largest expected value, as compare() does
    verified: list[str]
    failed: list[str]
    left_out: list[str] = field(default_factory=list)
    problem: str | None = None  # why nothing could be bundled

    @property
    def ok(self) -> bool:
        return self.problem is None and bool(self.labels) and not self.failed


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}".rstrip(": ")


def _row_kind(row: Any) -> str:
    """How a probe reads in the report: its status inside the contract; outside it, ``silent`` (the
    runtime ran it anyway) or ``expected`` (refused by the runtime or on the host, or eager fails)."""
    if row.within_contract:
        return row.status
    if row.silently_accepted:
        return "silent"
    return "expected"


@dataclass
class DoctorReport:
    """Everything ``export doctor`` found about one model: diagnosis, parity, delegation, memory, checks."""

    target: str
    backend: str
    inputs: str
    diagnosis: Any  # helpers.Diagnosis (None only when the doctor failed before export finished)
    parity: Any = None  # helpers.ParityReport
    contract: Any = None  # helpers.InputContract
    delegation: Any = None  # helpers.DelegationReport
    arena_bytes: int | None = None
    pte_bytes: int | None = None
    probes: list[Any] = field(default_factory=list, repr=False)  # helpers.Probe, in the order of parity.rows
    stages: list[Stage] = field(default_factory=list)
    strict: bool = False
    min_delegated: float | None = None
    arena_limit: int | None = None
    pte_path: str | None = None
    draft: DraftFindings | None = None
    bundle: BundleInfo | None = None
    internal_error: BaseException | None = field(default=None, repr=False)
    internal_stage: str | None = None
    atol: float = 1e-4
    rtol: float = 1e-4

    # ----- verdict ---------------------------------------------------------------------------
    @property
    def exported_ok(self) -> bool:
        """Export, lowering (or the shipped file) and loading succeeded."""
        return self.diagnosis is not None and self.diagnosis.ok

    def _rows(self, kind: str) -> list[Any]:
        return [r for r in (self.parity.rows if self.parity else []) if _row_kind(r) == kind]

    @property
    def failing_rows(self) -> list[Any]:
        """Probes inside the input contract that did not match eager (diverge, rejected, refused, eager error)."""
        return [r for r in (self.parity.rows if self.parity else []) if r.within_contract and r.status != "match"]

    @property
    def silent_rows(self) -> list[Any]:
        """Probes outside the contract that the runtime ran anyway (a device would too)."""
        return self._rows("silent")

    @property
    def unbounded_dims(self) -> list[str]:
        """Dims without a max: the memory plan is sized for the example, so a longer input is rejected."""
        if self.contract is None:
            return []
        return [name for name, ax in self.contract.dims().items() if ax.max is None]

    @property
    def checks(self) -> list[Check]:
        """Every criterion of the verdict (empty when the model did not export, lower and load)."""
        if not self.exported_ok or self.parity is None:
            return []
        from ..parity import STATUS_WORDS

        inside = [r for r in self.parity.rows if r.within_contract]
        bad = self.failing_rows
        out = [Check("parity", bool(inside) and not bad,
                     f"{len(inside) - len(bad)} of {len(inside)} probes inside the input contract match eager",
                     [f"{r.label}: {STATUS_WORDS[r.status]}" for r in bad])]
        if self.strict:
            silent = self.silent_rows
            out.append(Check("strict: outside the contract", not silent,
                             f"{len(silent)} probe(s) outside the contract run silently by the runtime"
                             if silent else "every probe outside the contract is refused",
                             [f"{r.label}: {r.status} — {r.contract_message}" for r in silent],
                             f"--strict: {len(silent)} outside it run silently"))
            unbounded = self.unbounded_dims
            out.append(Check("strict: bounded Dims", not unbounded,
                             f"Dim {', '.join(unbounded)} has no max: the memory plan is sized for the example, so "
                             "a longer input is rejected in production" if unbounded else "every Dim has a max",
                             [f"{name}: planned for {self.contract.dims()[name].planned}" for name in unbounded],
                             f"--strict: Dim {', '.join(unbounded)} has no max"))
        if self.min_delegated is not None and self.delegation is not None:
            share = 100 * self.delegation.coverage
            ok = share + 1e-9 >= self.min_delegated
            out.append(Check("min-delegated", ok,
                             f"{share:.0f}% of the nodes delegated to {self.backend} "
                             f"({'≥' if ok else '<'} --min-delegated {self.min_delegated:g}%)",
                             [] if ok else self.declined_lines(),
                             f"{share:.0f}% delegated (--min-delegated {self.min_delegated:g}%)"))
        if self.arena_limit is not None and self.arena_bytes is not None:
            ok = self.arena_bytes <= self.arena_limit
            out.append(Check("max-arena-bytes", ok,
                             f"arena {self.arena_bytes:,} bytes ({'≤' if ok else '>'} --max-arena-bytes "
                             f"{self.arena_limit:,})", [],
                             f"arena {self.arena_bytes:,} bytes (--max-arena-bytes {self.arena_limit:,})"))
        if self.bundle is not None:
            b = self.bundle
            out.append(Check("bundle", b.ok, b.problem or (
                f"{len(b.verified)} of {len(b.labels)} bundled test case(s) verified by the runtime"),
                [f"{label}: the runtime's output differs from eager's" for label in b.failed],
                b.problem or f"{len(b.failed)} bundled test case(s) fail verification"))
        return out

    def declined_lines(self) -> list[str]:
        """One line per operator left on portable kernels: the partitioner's own reasons."""
        if self.delegation is None:
            return []
        counts = self.delegation.by_op()
        return [f"{op} ({counts.get(op, (0, 0))[1]} node(s)): {'; '.join(reasons) or 'no reason given'}"
                for op, reasons in self.delegation.reasons().items()]

    @property
    def passed(self) -> bool:
        return self.internal_error is None and self.exported_ok and self.parity is not None and all(
            c.passed for c in self.checks)

    @property
    def exit_code(self) -> int:
        if self.internal_error is not None:
            return EXIT_ERROR
        return EXIT_PASS if self.passed else EXIT_FAIL

    @property
    def verdict(self) -> str:
        """``pass``, ``fail`` or ``error`` (the doctor failed: no verdict about the model)."""
        if self.internal_error is not None:
            return "error"
        return "pass" if self.passed else "fail"

    @property
    def headline(self) -> str:
        if self.internal_error is not None:
            where = f" during stage '{self.internal_stage}'" if self.internal_stage else ""
            return f"internal error of export doctor{where}, not a finding about the model: " \
                   f"{_one_line(self.internal_error)}"
        d = self.diagnosis
        if not d.ok and self.pte_path and d.stage == "load":
            return f"the shipped .pte cannot run these inputs (stage: load): {d.summary.split(': ', 1)[-1]}"
        if not d.ok:
            what = {"export": "the export failed", "lower": "lowering failed",
                    "load": "loading in the ExecuTorch runtime failed"}.get(d.stage, "the export failed")
            return f"{what}: {d.kind.replace('_', ' ')} (stage: {d.stage})"
        inside = [r for r in self.parity.rows if r.within_contract]
        if not inside:
            text = "no probe fell inside the input contract, so parity is unproven"
        elif self.failing_rows:
            bad = self.failing_rows
            kinds = {"diverge": ("diverges", "diverge"), "rejected": ("is rejected", "are rejected"),
                     "refused": ("is refused on the host", "are refused on the host"),
                     "eager_error": ("fails in eager", "fail in eager")}
            parts = []
            for status, (one, many) in kinds.items():
                n = sum(r.status == status for r in bad)
                if n:
                    parts.append(f"{n} {one if n == 1 else many}")
            text = (f"{len(bad)} of {len(inside)} probes inside the input contract "
                    f"{'does' if len(bad) == 1 else 'do'} not match eager: {', '.join(parts)}")
        else:
            text = f"all {len(inside)} probes inside the input contract match eager"
            if self.silent_rows and not self.strict:
                text += f"; {len(self.silent_rows)} outside it run silently on the device"
        others = [c.short or c.message for c in self.checks if c.name != "parity" and not c.passed]
        if others:
            text += ", but " + "; ".join(others)
        return text

    def next_steps(self) -> list[str]:
        """What to do about what was found (the lessons' workflow, shortened)."""
        steps: list[str] = []
        if self.internal_error is not None:
            return ["This is a failure of export doctor itself, not a finding about the model: rerun with "
                    "--traceback and report it with the command line."]
        if not self.diagnosis.ok:
            steps.append(self.diagnosis.fix)
            steps.append("Then run the doctor again: a clean export still has to match eager on varied inputs.")
            return steps
        bad = self.failing_rows
        if self.pte_path and any(r.status == "diverge" for r in bad):
            steps.append("The shipped .pte computes something else than this eager model on inputs it accepts: it "
                         "was built from other weights or another version of the code, or the export took a Python "
                         "decision once. Rebuild it from this model (run the doctor without --pte) and compare.")
        elif any(r.status == "diverge" for r in bad):
            steps.append("The .pte computes something else than eager on inputs it accepts: a Python decision (an "
                         "`if` on a size or a flag, a loop bound) was taken once at export. Find it in forward(); "
                         "make it torch.where / torch.cond, hoist it into the app, or narrow the Dim so the "
                         "contract excludes those sizes.")
        if any(r.status == "rejected" for r in bad):
            steps.append("The runtime refuses inputs the contract allows: read its message in the table (memory "
                         "plan capacity, a kernel's own limit) and narrow the Dim or fix the operator.")
        if any(r.status == "refused" for r in bad):
            steps.append("Inputs the contract allows were refused on the host, because the runtime would hand them "
                         "to the delegate as undefined behaviour: read the reason in the table.")
        if any(r.status == "eager_error" for r in bad):
            steps.append("Eager PyTorch itself fails inside the declared range: narrow the Dim to the sizes "
                         "forward() supports.")
        if self.silent_rows:
            steps.append("ExecuTorch does not check a Dim's min, shared Dims, or sizes that fit the memory plan: "
                         "check inputs on the host before the device (PteArtifact.run / InputContract.check), or "
                         "pad/resize them there.")
        if self.unbounded_dims:
            steps.append(f"Dim {', '.join(self.unbounded_dims)} has no max, so the memory plan reserves the "
                         "example's size and a longer input is rejected on the device: give every Dim the max "
                         "production needs.")
        steps += self._delegation_steps()
        if any(c.name == "max-arena-bytes" and not c.passed for c in self.checks):
            steps.append("The arena is planned for each Dim's max: lower the max, bucket the sizes into a few "
                         "static methods (lesson 09), or raise the budget if the device has the memory.")
        if self.bundle is not None and self.bundle.labels:
            steps.append("Verify the bundle where the .pte runs (see the bundle section): the same program must "
                         "reproduce eager's outputs on the device.")
        return steps

    def _delegation_steps(self) -> list[str]:
        dl = self.delegation
        if dl is None or not dl.portable_nodes or self.backend != "xnnpack":
            return []
        reasons = dl.reasons()
        words = " ".join(" ".join(r) for r in reasons.values())
        steps = [f"{dl.portable_nodes} node(s) run on portable kernels; the partitioner's reasons: "
                 + "; ".join(f"{op}: {', '.join(r) or 'no reason given'}" for op, r in reasons.items())]
        if "dynamic" in words:
            steps.append("XNNPACK declined an operator because of a dynamic size: a static export (or a few "
                         "static buckets) keeps it delegated, at the cost of refusing other sizes.")
        if "torch.cond" in words:
            steps.append("XNNPACK never looks inside torch.cond branches: torch.where (both sides computed) keeps "
                         "that work on the delegate.")
        if "no rule" in words:
            steps.append("Operators XNNPACK has no rule for stay on portable kernels whatever the shapes: rewrite "
                         "them with supported operators if they matter for speed.")
        if "not known from a .pte file" in words:
            steps.append("Run the doctor without --pte to get the partitioner's reasons from a lowering.")
        return steps

    # ----- rendering (helpers/doctor/render.py) ----------------------------------------------
    def to_text(self) -> str:
        from .render import to_text

        return to_text(self)

    def to_html(self, document: bool = False) -> str:
        """The report as HTML: a fragment (for a notebook) or, with ``document=True``, a standalone page.

        The verdict is in the element with class ``exportlab-verdict`` (``data-verdict`` pass/fail/error,
        ``data-exit-code``); each probe row has ``data-status`` and ``data-within-contract``.
        """
        from .render import to_html

        return to_html(self, document=document)

    def to_dict(self) -> dict[str, Any]:
        """The report as JSON-ready data (the schema in :mod:`helpers.doctor.render`)."""
        from .render import to_dict

        return to_dict(self)

    def to_json(self) -> str:
        from .render import to_json

        return to_json(self)

    def to_junit(self) -> str:
        """JUnit XML: one testcase per stage, per probe and per check."""
        from .render import to_junit

        return to_junit(self)

    def __str__(self) -> str:
        return self.to_text()

    def __repr__(self) -> str:
        return f"<DoctorReport {self.target}: {self.verdict.upper()} (exit {self.exit_code}) — {self.headline}>"

    def _repr_html_(self) -> str:
        return self.to_html()


# ----- the pipeline --------------------------------------------------------------------------------
def _finite_bound(value: Any) -> Any:
    """A Dim's max for display: the number, or ∞ (None, sympy's ``oo``/``int_oo`` or a huge value)."""
    try:
        top = int(value)
    except (TypeError, ValueError, AttributeError, OverflowError):
        return "∞"
    return "∞" if top > 2**31 else top


def _describe_inputs(model: torch.nn.Module, args: tuple[Any, ...], dynamic: Any) -> str:
    from .cli import forward_inputs

    names, _ = forward_inputs(model)
    parts = []
    for i, a in enumerate(args):
        name = names[i] if i < len(names) else f"input{i}"
        if not isinstance(a, torch.Tensor):
            parts.append(f"{name}={a!r}")
            continue
        dims = (dynamic or {}).get(name, {}) if isinstance(dynamic, dict) else {}
        axes = []
        for axis, size in enumerate(a.shape):
            dim = dims.get(axis) if isinstance(dims, dict) else None
            if dim is not None and hasattr(dim, "__name__"):
                hi = _finite_bound(getattr(dim, "max", None))
                axes.append(f"{dim.__name__}∈[{dim.min},{hi}] (example {size})")
            else:
                axes.append(str(int(size)))
        parts.append(f"{name}: {str(a.dtype).replace('torch.', '')}[{', '.join(axes)}]")
    return ", ".join(parts)


class _Run:
    """Stage bookkeeping: which stage is running, how long each took, what each found."""

    def __init__(self, report: DoctorReport, say: Callable[[str], None]):
        self.report = report
        self.say = say
        self.current: Stage | None = None
        self.started = 0.0

    def begin(self, name: str, progress: str | None = None) -> Stage:
        if progress:
            self.say(progress)
        self.current = Stage(name, "ok")
        self.report.stages.append(self.current)
        self.started = time.perf_counter()
        return self.current

    def end(self, status: str = "ok", message: str = "") -> None:
        stage = self.current
        if stage is None:
            return
        stage.status, stage.message = status, message
        stage.seconds = round(time.perf_counter() - self.started, 3)
        self.current = None

    def skip(self, name: str, message: str) -> None:
        self.report.stages.append(Stage(name, "skipped", message))

    def skip_rest(self, wanted: list[str]) -> None:
        seen = {s.name for s in self.report.stages}
        for name in wanted:
            if name not in seen:
                self.skip(name, "not reached")


def examine(model: torch.nn.Module, example_args: Any, dynamic_shapes: Any = None, *, backend: str = "xnnpack",
            target: str | None = None, seed: int = 0, atol: float = 1e-4, rtol: float = 1e-4,
            progress: Callable[[str], None] | None = None, strict: bool = False,
            min_delegated: float | None = None, max_arena_bytes: int | None = None, pte: bytes | None = None,
            pte_path: str | None = None, bundle: str | Path | None = None, draft_export: bool = False) -> DoctorReport:
    """Run the doctor's pipeline on a model and return the :class:`DoctorReport`.

    Never raises for the model: a failing export is in the report (verdict ``fail``), and so is the
    doctor's own failure (verdict ``error``, :attr:`DoctorReport.internal_error`).

    ``strict``: probes outside the contract that the runtime runs, and Dims without a max, fail.
    ``min_delegated`` (percent) and ``max_arena_bytes``: thresholds that fail the verdict.
    ``pte``: the bytes of a shipped ``.pte`` to examine instead of lowering the model here.
    ``bundle``: write an ExecuTorch BundledProgram there (verified in the runtime before the report).
    ``draft_export``: also run ``torch.export.draft_export`` and list every issue it finds.
    """
    # torch.cond runs through Dynamo in eager mode; on a probe shape the model cannot take, torch logs the
    # failed fake-tensor trace at ERROR level (timestamped) before raising. compare() records the error;
    # the log line is noise, so logging is paused while the pipeline runs.
    say = progress or (lambda _text: None)
    if isinstance(example_args, torch.Tensor):
        example_args = (example_args,)
    example_args = tuple(example_args)
    target = target or type(model).__name__
    report = DoctorReport(target, backend, "", None, strict=strict, min_delegated=min_delegated,
                          arena_limit=max_arena_bytes, pte_path=pte_path, atol=atol, rtol=rtol)
    run = _Run(report, say)
    wanted = ["export"] + (["draft_export"] if draft_export else []) + [
        "lower", "load", "compare", "delegation", "memory"] + (["bundle"] if bundle is not None else [])
    previous = logging.root.manager.disable
    logging.disable(logging.ERROR)
    try:
        report.inputs = _describe_inputs(model, example_args, dynamic_shapes)
        _pipeline(run, model, example_args, dynamic_shapes, backend=backend, seed=seed, atol=atol, rtol=rtol,
                  pte=pte, pte_path=pte_path, bundle=bundle, draft_export=draft_export)
    except Exception as exc:  # noqa: BLE001 - the doctor's own failure: reported as such, never as the model's
        report.internal_error = exc
        report.internal_stage = run.current.name if run.current is not None else None
        run.end("error", f"internal error: {_one_line(exc)}")
        say(f"internal error of export doctor ({_one_line(exc)})")
    finally:
        logging.disable(previous)
    run.skip_rest(wanted)
    report.stages.sort(key=lambda s: STAGE_NAMES.index(s.name) if s.name in STAGE_NAMES else len(STAGE_NAMES))
    return report


def _pipeline(run: _Run, model: torch.nn.Module, example_args: tuple[Any, ...], dynamic_shapes: Any, *,
              backend: str, seed: int, atol: float, rtol: float, pte: bytes | None, pte_path: str | None,
              bundle: str | Path | None, draft_export: bool) -> None:
    from .. import compare, probe_inputs
    from ..diagnose import FIXES, Diagnosis, diagnose_failure
    from ..lowering import export_methods, lower_exported

    report = run.report
    # 1. export (once: the same exported program is lowered, and gives the contract of a shipped .pte)
    run.begin("export", "torch.export")
    try:
        with torch.random.fork_rng(devices=[]):  # tracing may draw random numbers: leave the caller's RNG alone
            normalised, exported = export_methods({"forward": (model, example_args, dynamic_shapes)})
    except Exception as exc:  # noqa: BLE001
        diagnosis = diagnose_failure(exc)
        if diagnosis is None:
            raise
        report.diagnosis = diagnosis
        run.end("failed", diagnosis.summary)
        run.say(f"export failed ({diagnosis.kind})")
        if draft_export:
            _draft(run, model, example_args, dynamic_shapes)
        return
    run.end("ok", "torch.export succeeded")
    program = exported["forward"]
    if draft_export:
        _draft(run, model, example_args, dynamic_shapes)

    # 2. lower and load (or load the shipped file)
    if pte is None:
        run.begin("lower", f"lowering to {backend} and loading the .pte in the ExecuTorch runtime")
        try:
            artifact = lower_exported(normalised, exported, backend=backend)
        except Exception as exc:  # noqa: BLE001
            diagnosis = diagnose_failure(exc, program)
            if diagnosis is None:
                raise
            report.diagnosis = diagnosis
            if diagnosis.stage == "load":
                run.end("ok", f"lowered to {backend}")
                run.begin("load")
            run.end("failed", diagnosis.summary)
            run.say(f"{diagnosis.stage} failed ({diagnosis.kind})")
            return
        run.end("ok", f"lowered to {backend}")
        run.begin("load")
        run.end("ok", "loaded in the ExecuTorch runtime")
        summary = "exported, lowered and loaded"
    else:
        from .shipped import load_shipped

        name = Path(pte_path).name if pte_path else "the .pte"
        run.skip("lower", f"--pte: {name} is examined as shipped, not lowered here")
        run.begin("load", f"loading {name} in the ExecuTorch runtime")
        artifact, problem = load_shipped(pte, model=model, example_args=example_args, dynamic_shapes=dynamic_shapes,
                                         exported=program, name=name)
        if artifact is None:
            report.diagnosis = Diagnosis(
                kind="other", stage="load", summary=problem or f"{name} cannot be loaded", exported=program,
                fix=f"Examine the .pte built from this model with these inputs: rebuild {name}, or give the --example "
                    "and --dim the file was exported with.")
            run.end("failed", report.diagnosis.summary)
            return
        run.end("ok", f"{name} loaded in the ExecuTorch runtime")
        summary = f"exported (for the input contract); {name} loaded as shipped"
    report.backend = artifact.backend
    report.diagnosis = Diagnosis(kind="ok", stage="load", fix=FIXES["ok"], artifact=artifact, exported=program,
                                 summary=summary)

    # 3. compare with eager on probes around the contract
    run.begin("compare")
    report.contract = artifact.input_contract()
    report.probes = probe_inputs(example_args, dynamic_shapes, seed=seed, model=model, contract=report.contract)
    run.say(f"compare: {len(report.probes)} probes, eager vs the ExecuTorch runtime")
    report.parity = compare(model, artifact, report.probes, atol=atol, rtol=rtol)
    run.end("ok" if report.parity.ok_within_contract else "failed", report.parity.summary())

    # 4. delegation, 5. memory
    run.begin("delegation", "delegation and memory plan")
    report.delegation = artifact.delegation()
    report.diagnosis.summary += f"; {report.delegation.summary()}"
    run.end("ok", report.delegation.summary())
    run.begin("memory")
    report.arena_bytes = artifact.planned_memory_bytes()
    report.pte_bytes = artifact.nbytes
    run.end("ok", f"arena {report.arena_bytes:,} bytes, .pte {report.pte_bytes:,} bytes")

    # 6. bundle
    if bundle is not None:
        from .bundle import write_bundle

        run.begin("bundle", f"writing and verifying the BundledProgram {bundle}")
        report.bundle = write_bundle(artifact, model, report.probes, report.parity, path=bundle, atol=atol, rtol=rtol)
        run.end("ok" if report.bundle.ok else "failed",
                report.bundle.problem or f"{len(report.bundle.labels)} test case(s) written to {bundle}")

    failed = {c.name for c in report.checks if not c.passed}
    for stage in report.stages:
        if stage.name == "delegation" and "min-delegated" in failed:
            stage.status = "failed"
        if stage.name == "memory" and "max-arena-bytes" in failed:
            stage.status = "failed"


def _draft(run: _Run, model: torch.nn.Module, example_args: tuple[Any, ...], dynamic_shapes: Any) -> None:
    from .draft import run_draft_export

    run.begin("draft_export", "torch.export.draft_export (every issue, not only the first)")
    findings = run_draft_export(model, example_args, dynamic_shapes)
    run.report.draft = findings
    if findings.error:
        run.end("failed", f"draft_export raised: {findings.error}")
    else:
        run.end("failed" if findings.issues else "ok", f"{len(findings.issues)} issue(s)")
