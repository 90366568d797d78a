"""What the doctor finds (:class:`DoctorReport`), its exit statuses and the rules of its verdict.

The pipeline (:mod:`helpers.doctor.examine`) fills a report; the renderers (:mod:`helpers.doctor.render`:
``to_text(report)``, ``to_html``, ``to_json``, ``to_junit``, ``to_dict``) and the command line
(:mod:`helpers.doctor.cli`) read it. This module imports none of them.

A failure *of the model* (torch or ExecuTorch raised it while exporting, lowering or loading) is a
finding: verdict ``fail``. Any other exception is the doctor's own failure: verdict ``error``, exit
status 3, and the report says so instead of blaming the model.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ..display import error_line
from ..parity import STATUS_WORDS

__all__ = ["program_verdict", "runs_verdict", "ModelRun", "EXIT_PASS", "EXIT_FAIL", "EXIT_USAGE", "EXIT_ERROR", "VERDICTS", "STAGE_NAMES", "Stage", "Check",
           "DraftFindings", "BundleInfo", "DoctorReport"]

EXIT_PASS, EXIT_FAIL, EXIT_USAGE, EXIT_ERROR = 0, 1, 2, 3
VERDICTS = ("pass", "fail", "error")
STAGE_NAMES = ("export", "draft_export", "lower", "load", "compare", "locate", "delegation", "memory", "profile",
               "bundle")
STAGE_STATUSES = ("ok", "failed", "skipped", "error")


def _first_apart(calls: Any) -> int | None:
    """The index of the first row of a :class:`helpers.ParityReport` that does not match eager (None: all match, or
    no report)."""
    rows = calls.rows if calls is not None else []
    return next((k for k, r in enumerate(rows) if r.status != "match"), None)


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

    def verify_code(self, path: str | None = None, method: str = "forward") -> str:
        """Python that verifies the bundle with ExecuTorch's own bindings (what a device build does in C++):
        one tolerance per test case (``atols``), the doctor's ``atol`` scaled by the largest expected value.
        ``path``: the file to open (default: where the bundle was written)."""
        path = path or self.path or "bundle.bpte"
        return (
            "from executorch.extension.pybindings.portable_lib import _load_bundled_program_from_buffer\n"
            f"bundle = _load_bundled_program_from_buffer(open({path!r}, 'rb').read())\n"
            f"atols = [{', '.join(f'{a:g}' for a in self.atols)}]  # one per test case\n"
            "for i, atol in enumerate(atols):  # raises RuntimeError when the program's outputs differ from eager's\n"
            f"    bundle.verify_result_with_bundled_expected_output({method!r}, i, rtol={self.rtol:g}, atol=atol)\n")


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
    allow_portable: tuple[str, ...] | None = None  # operators allowed on portable kernels (--allow-portable)
    max_subgraphs: int | None = None
    pte_limit: int | None = None  # --max-pte-bytes
    pte_path: str | None = None
    draft: DraftFindings | None = None
    bundle: BundleInfo | None = None
    internal_error: BaseException | None = field(default=None, repr=False)
    internal_stage: str | None = None
    atol: float | Sequence[float] = 1e-4  # one per output when a sequence
    rtol: float | Sequence[float] = 1e-4
    method: str = "forward"  # the program's method this report is about (--spec with several methods)
    user_inputs: int = 0  # the last this many probes are the user's own inputs (--inputs)
    located: list[Any] = field(default_factory=list)  # helpers.doctor.locate.Located: where diverging probes start
    stateful: list[str] = field(default_factory=list)  # buffers the program writes (kept between calls: a KV cache)
    sequence: Any = None  # helpers.ParityReport: with state, the matching probes again one call after another
    across_methods: Any = None  # helpers.ParityReport: methods sharing state, called one after another (prefill, decode)
    share_mutable_buffers: bool = False  # the program was built with MemoryPlanningPass(share_mutable_buffers=True)
    shared_places: dict[str, list[tuple[int, int]]] = field(default_factory=dict)  # per method: (arena, offset) of the
    # buffers the methods share in eager, in its memory plan
    value_ranges: dict[str, tuple[int, int]] = field(default_factory=dict)  # integer inputs' values, both included
    max_portable_time: float | None = None  # --max-portable-time (percent of the measured run time)
    profile: Any = None  # helpers.doctor.profile.RuntimeProfile, measured when --max-portable-time is given

    @property
    def first_call_apart(self) -> int | None:
        """With state: the index in :attr:`sequence` of the first call in a row that does not match eager (None when
        every call matches, or when there is no sequence)."""
        return _first_apart(self.sequence)

    @property
    def first_across_apart(self) -> int | None:
        """Methods sharing state: the index in :attr:`across_methods` of the first call that does not match eager."""
        return _first_apart(self.across_methods)

    @property
    def shared_by_accident(self) -> bool:
        """Methods that share state in eager, every call across them matching, in a program built without
        ``share_mutable_buffers``: each method's plan has its own place for the buffers, and they met only on this
        host (its runtime gives a program's methods one set of arenas)."""
        return (self.across_methods is not None and self.first_across_apart is None
                and not self.share_mutable_buffers)

    def _places_text(self) -> str:
        """Where each method's plan puts the shared buffers, e.g. "prefill: arena 1 at 256; decode: arena 1 at 256"."""
        return "; ".join(f"{name}: " + (", ".join(f"arena {a} at {o:,}" for a, o in places) or "not found in the plan")
                         for name, places in self.shared_places.items())

    @property
    def user_rows(self) -> list[Any]:
        """The rows of the user's own inputs (``--inputs``), after the generated probes."""
        rows = self.parity.rows if self.parity else []
        return rows[len(rows) - self.user_inputs:] if self.user_inputs else []

    # ----- verdict ---------------------------------------------------------------------------
    @property
    def exported_ok(self) -> bool:
        """Export, lowering (or the shipped file) and loading succeeded."""
        return self.diagnosis is not None and self.diagnosis.ok

    def _rows(self, kind: str) -> list[Any]:
        return [r for r in (self.parity.rows if self.parity else []) if r.kind == kind]

    @property
    def inside_rows(self) -> list[Any]:
        """Probes inside the input contract (the ones parity is judged on)."""
        return [r for r in (self.parity.rows if self.parity else []) if r.within_contract]

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
        if self.sequence is not None:
            rows, first = self.sequence.rows, self.first_call_apart
            out.append(Check(
                "state across calls", first is None,
                f"the {len(rows)} matching probes called again one after another, state carried on both sides: "
                + ("every call matches eager" if first is None else
                   f"call {first + 1} of {len(rows)} is the first that differs from eager ({rows[first].label}: "
                   f"{STATUS_WORDS[rows[first].status]})"),
                [f"call {k + 1} ({r.label}): {STATUS_WORDS[r.status]}" for k, r in enumerate(rows)
                 if r.status != "match"],
                f"calls in a row differ from call {first + 1}" if first is not None else ""))
        if self.across_methods is not None:
            rows, first = self.across_methods.rows, self.first_across_apart
            message = (f"{self.across_methods.method}, one after another on one loaded program ({len(rows)} calls, "
                       "state carried): " + ("every call matches eager" if first is None else
                                             f"call {first + 1} ({rows[first].label}) is the first that differs from "
                                             f"eager: {STATUS_WORDS[rows[first].status]}"))
            if self.shared_by_accident:
                same = len({tuple(p) for p in self.shared_places.values()}) == 1 and any(self.shared_places.values())
                message += (", but the program was built without share_mutable_buffers: each method's memory plan "
                            f"places the buffers they share on its own ({self._places_text()})"
                            + (", at the same place by chance" if same else "")
                            + ". This host's runtime gives a program's methods one set of arenas; a C++ Module "
                              "without share_memory_arenas gives each method its own, where the methods would not "
                              "share them")
            out.append(Check(
                "state across methods", first is None and not self.shared_by_accident, message,
                [f"call {k + 1} ({r.label}): {STATUS_WORDS[r.status]}" for k, r in enumerate(rows)
                 if r.status != "match"],
                f"{self.across_methods.method} differ from call {first + 1}" if first is not None else
                (f"{self.across_methods.method} share their buffers only by chance (no share_mutable_buffers)"
                 if self.shared_by_accident else "")))
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
        if self.allow_portable is not None and self.delegation is not None:
            portable = {op: n_p for op, (_n_d, n_p) in self.delegation.by_op().items() if n_p}
            others = {op: n for op, n in portable.items() if op not in set(self.allow_portable)}
            reasons = self.delegation.reasons()
            unused = sorted(set(self.allow_portable) - set(portable))
            out.append(Check(
                "allow-portable", not others,
                (f"{len(others)} operator(s) run on portable kernels that --allow-portable does not list: "
                 f"{', '.join(sorted(others))}" if others else
                 f"every operator on portable kernels is allowed ({', '.join(sorted(portable)) or 'none'})")
                + (f"; listed but not on portable kernels: {', '.join(unused)}" if unused else ""),
                [f"{op} ({n} node(s)): {'; '.join(reasons.get(op, [])) or 'no reason given'}"
                 for op, n in sorted(others.items())],
                f"portable {', '.join(sorted(others))} (not in --allow-portable)"))
        if self.max_subgraphs is not None and self.delegation is not None:
            n = self.delegation.delegated_subgraphs
            ok = n <= self.max_subgraphs
            out.append(Check("max-subgraphs", ok,
                             f"{n} delegated subgraph(s) ({'≤' if ok else '>'} --max-subgraphs {self.max_subgraphs})",
                             [], f"{n} delegated subgraphs (--max-subgraphs {self.max_subgraphs})"))
        if self.pte_limit is not None and self.pte_bytes is not None:
            ok = self.pte_bytes <= self.pte_limit
            out.append(Check("max-pte-bytes", ok,
                             f".pte {self.pte_bytes:,} bytes ({'≤' if ok else '>'} --max-pte-bytes {self.pte_limit:,})",
                             [], f".pte {self.pte_bytes:,} bytes (--max-pte-bytes {self.pte_limit:,})"))
        if self.max_portable_time is not None and self.profile is not None:
            share = 100 * self.profile.share
            ok = share <= self.max_portable_time + 1e-9
            slowest = sorted(self.profile.by_operator.items(), key=lambda kv: -kv[1])
            out.append(Check("max-portable-time", ok,
                             f"{self.profile.summary()} ({'≤' if ok else '>'} --max-portable-time "
                             f"{self.max_portable_time:g}%)",
                             [] if ok else [f"{op}: {ms:.3f} ms per run" for op, ms in slowest],
                             f"portable operators {share:.0f}% of the run time "
                             f"(--max-portable-time {self.max_portable_time:g}%)"))
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
                   f"{error_line(self.internal_error)}"
        d = self.diagnosis
        if not d.ok and self.pte_path and d.stage == "load":
            return f"the shipped .pte cannot run these inputs (stage: load): {d.summary.split(': ', 1)[-1]}"
        if not d.ok and d.summary.startswith("not lowered:"):  # another method of the program did not export
            return d.summary
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
            if "strict=True" in self.diagnosis.fix:  # the export mode, which the doctor's --strict is not
                steps.append("Here, export with strict=True by giving the --spec function's dict \"strict\": True "
                             "(from Python, examine(..., strict_export=True)); the --strict flag is a gate on the "
                             "probes, not the export mode.")
            steps.append("Then run the doctor again: a clean export still has to match eager on varied inputs.")
            return steps
        bad = self.failing_rows
        if self.pte_path and any(r.status == "diverge" for r in bad):
            steps.append("The shipped .pte computes something else than this eager model on inputs it accepts: it "
                         "was built from other weights or another version of the code, or the export took a Python "
                         "decision once. Rebuild it from this model (run the doctor without --pte) and compare.")
        elif self.located and all(f.first not in (None, "exported program") for f in self.located):
            firsts = sorted({f.first for f in self.located if f.first})
            steps.append(f"The exported program matches eager on the diverging probes; they first diverge at the "
                         f"{' and the '.join(firsts)}, so the model is not the cause: {self.located[0].meaning}.")
        elif self.sequence is not None and not bad and any(r.status != "match" for r in self.sequence.rows):
            steps.append("Each call matches eager from the initial state, and calls one after another do not: "
                         "something eager carries from call to call is not in the program's state. A value kept in "
                         "a Python attribute (a counter, a next position) is read once at export, and the .pte "
                         "uses that value on every call. Keep it in a buffer the graph writes (register_buffer, "
                         "updated in place), or take it as an input from the app.")
        elif (self.first_across_apart is not None or self.shared_by_accident) and not bad:
            if self.share_mutable_buffers:
                steps.append("Each method matches eager on its own, and called one after another they do not, though "
                             "the program shares its mutable buffers: look for state one method keeps that the "
                             "other does not read (a buffer of another name, a value kept in a Python attribute).")
            elif self.shared_by_accident:
                steps.append("In eager the methods share the buffers they write, and ExecuTorch's memory planner plans "
                             "each method on its own, so each has its own place for them: the calls across methods "
                             "matched here only because this host's runtime gives a program's methods one set of "
                             "arenas. Build the program with MemoryPlanningPass(share_mutable_buffers=True) (the "
                             "spec's \"share_mutable_buffers\": True), and in a C++ app share the Module's arenas "
                             "between methods (share_memory_arenas).")
            else:
                steps.append("Each method matches eager on its own, and called one after another they do not: in "
                             "eager the methods share the buffers they write, and ExecuTorch's memory planner plans "
                             "each method on its own, so each has its own place for them, unless the program is "
                             "built with "
                             "MemoryPlanningPass(share_mutable_buffers=True) (the spec's \"share_mutable_buffers\": "
                             "True). A C++ app's Module must then share its arenas between methods "
                             "(share_memory_arenas).")
        elif self.stateful and any(r.status == "diverge" for r in bad):
            steps.append("The program writes state it keeps between calls, and every probe started from the state "
                         "the model had. ExecuTorch serializes only the shape and dtype of a buffer the graph writes, "
                         "not its value: the program leaves it uninitialized (this runtime gave zeros) unless built "
                         "with InitializedMutableBufferPass([its name]) (executorch.exir.passes.init_mutable_pass), so "
                         "a buffer whose starting value matters diverges from the first call. Build with that pass or "
                         "pass the state in as an input; otherwise look for a Python decision taken once at export.")
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
            steps.append("Eager PyTorch itself fails inside the declared range: read its error in the table. A size "
                         "forward() cannot take: narrow the Dim to the sizes it supports. A value (an index past a "
                         "table or a cache): give the values the app sends, --value-range NAME=LOW:HIGH, or "
                         "--positions NAME=LOW:HIGH for positions that run on from a start (a prompt's "
                         "cache_position).")
        if self.silent_rows:
            steps.append("ExecuTorch does not check a Dim's min, shared Dims, or sizes that fit the memory plan: "
                         "check inputs on the host before the device (PteArtifact.run / InputContract.check), and handle "
                         "the ones outside there (padding or resizing only where the model's answer stays the same).")
        if self.unbounded_dims:
            steps.append(f"Dim {', '.join(self.unbounded_dims)} has no max, so the memory plan reserves the "
                         "example's size and a longer input is rejected on the device: give every Dim the max "
                         "production needs.")
        steps += self._delegation_steps()
        failed_checks = {c.name for c in self.checks if not c.passed}
        if "allow-portable" in failed_checks:
            steps.append("An operator --allow-portable does not list runs on portable kernels (the table names it, with "
                         "the partitioner's reason): rewrite it with operators the delegate takes, or list it once "
                         "its cost on the device is measured and accepted.")
        if "max-subgraphs" in failed_checks:
            steps.append("Every delegated subgraph is a call into the delegate and a copy of its inputs and outputs: "
                         "operators left on portable kernels between delegated ones split the graph; delegate them "
                         "(or move them to the start or the end) to join the subgraphs.")
        if "max-portable-time" in failed_checks:
            steps.append("The operators left on portable kernels take more of the run time than the budget (the "
                         "check lists them, slowest first): delegate the slowest one (a supported operator, a static "
                         "shape) before the rest; a high delegated share by node count does not say this.")
        if "max-pte-bytes" in failed_checks:
            steps.append("The .pte is mostly the weights: quantize them, or share one program's weights between "
                         "methods instead of shipping several .pte files.")
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

    def __repr__(self) -> str:
        return f"<DoctorReport {self.target}: {self.verdict.upper()} (exit {self.exit_code}) — {self.headline}>"


@dataclass
class ModelRun:
    """One model of a ``--config`` run: its name in the configuration, what was examined, and its report (one per
    method of a program); ``error``: the doctor failed on it before any report (exit status 3)."""

    name: str
    target: str
    reports: list[DoctorReport] = field(default_factory=list)
    program: bool = False
    error: BaseException | None = field(default=None, repr=False)

    @property
    def verdict(self) -> str:
        return "error" if self.error is not None else program_verdict(self.reports)[0]

    @property
    def exit_code(self) -> int:
        return EXIT_ERROR if self.error is not None else program_verdict(self.reports)[1]


def runs_verdict(runs: list[ModelRun]) -> tuple[str, int]:
    """The verdict and exit status of a ``--config`` run: ``error`` (3) when the doctor failed on any model, else
    ``fail`` (1) when any fails, else ``pass`` (0)."""
    verdicts = {run.verdict for run in runs}
    if "error" in verdicts:
        return "error", EXIT_ERROR
    return ("fail", EXIT_FAIL) if "fail" in verdicts else ("pass", EXIT_PASS)


def program_verdict(reports: list[DoctorReport]) -> tuple[str, int]:
    """The verdict and exit status of a program of several methods, one report each: ``error`` (3) when the doctor
    failed on any, else ``fail`` (1) when any method fails, else ``pass`` (0)."""
    if any(r.verdict == "error" for r in reports):
        return "error", EXIT_ERROR
    if any(r.verdict == "fail" for r in reports):
        return "fail", EXIT_FAIL
    return "pass", EXIT_PASS
