"""The doctor's pipeline: :func:`examine` runs a model through every stage and fills a :class:`DoctorReport`.

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

import copy
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from ..contract import forward_parameter_names
from ..display import error_line
from ..parity import Tolerance, value_range_names, value_ranges_by_position
from .report import STAGE_NAMES, DoctorReport, Stage

if TYPE_CHECKING:
    from ..artifact import PteArtifact

__all__ = ["examine", "examine_methods", "call_keeping_state", "initial_state", "written_buffers"]


# ----- the pipeline --------------------------------------------------------------------------------
def _finite_bound(value: Any) -> Any:
    """A Dim's max for display: the number, or ∞ (None, sympy's ``oo``/``int_oo`` or a huge value)."""
    try:
        top = int(value)
    except (TypeError, ValueError, AttributeError, OverflowError):
        return "∞"
    return "∞" if top > 2**31 else top


def _describe_inputs(model: torch.nn.Module, args: tuple[Any, ...], dynamic: Any) -> str:
    names = forward_parameter_names(model)
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
            if isinstance(dims, (tuple, list)):
                dim = dims[axis] if axis < len(dims) else None
            hint = getattr(getattr(dim, "type", None), "name", None)  # Dim.AUTO / STATIC / DYNAMIC
            if hint in ("AUTO", "DYNAMIC"):
                axes.append(f"Dim.{hint} (example {size})")
            elif dim is not None and hasattr(dim, "__name__"):
                hi = _finite_bound(getattr(dim, "max", None))
                axes.append(f"{dim.__name__}∈[{dim.min},{hi}] (example {size})")
            else:
                axes.append(str(int(size)))
        parts.append(f"{name}: {str(a.dtype).replace('torch.', '')}[{', '.join(axes)}]")
    return ", ".join(parts)


def written_buffers(program: torch.export.ExportedProgram) -> list[str]:
    """The buffers the exported program writes: state it keeps between calls on the device, such as a KV cache.

    Its graph signature's ``buffers_to_mutate``, and every buffer an in-place operator of the graph writes (directly
    or through a view of it): torch 2.13's ``torch.export.export`` leaves ``transformers``' static-cache writes
    (``index_copy_`` on the cache buffers) in the graph with ``buffers_to_mutate`` empty; ``to_edge`` plans them as
    mutable buffers."""
    from torch.export.graph_signature import InputKind

    signature = program.graph_signature
    buffers = {spec.arg.name: str(spec.target) for spec in signature.input_specs
               if spec.kind == InputKind.BUFFER and spec.target is not None}
    written = set(signature.buffers_to_mutate.values())

    def buffer_behind(value: Any) -> str | None:
        for _ in range(16):  # a view of a view of … a buffer
            if not isinstance(value, torch.fx.Node):
                return None
            if value.op == "placeholder":
                return buffers.get(value.name)
            schema = getattr(value.target, "_schema", None)
            if value.op != "call_function" or schema is None or not schema.returns or \
                    schema.returns[0].alias_info is None or not value.args:
                return None
            value = value.args[0]
        return None

    for node in program.graph.nodes:
        schema = getattr(node.target, "_schema", None) if node.op == "call_function" else None
        if schema is None or not schema.is_mutable:
            continue
        for argument, value in zip(schema.arguments, node.args):
            if argument.alias_info is not None and argument.alias_info.is_write:
                name = buffer_behind(value)
                if name is not None:
                    written.add(name)
    return sorted(written)


def call_keeping_state(model: torch.nn.Module, args: Sequence[Any]) -> Any:
    """``model(*args)`` leaving ``model`` as it was, for the probes to start from: the call runs on a copy of it, so
    that neither its buffers (a KV cache) nor a Python attribute ``forward()`` changes (a counter) move on. A model
    that cannot be copied is called itself, its buffers put back afterwards."""
    try:
        copied = copy.deepcopy(model)
    except Exception:  # noqa: BLE001 - a module that cannot be copied: called as it is
        copied = None
    if copied is not None:
        return copied(*args)
    saved = [(buffer, buffer.detach().clone()) for buffer in model.buffers()]
    try:
        return model(*args)
    finally:
        with torch.no_grad():
            for buffer, value in saved:
                buffer.copy_(value)


def initial_state(model: torch.nn.Module) -> torch.nn.Module:
    """A copy of ``model`` as it is now, before the doctor calls it (a model with state changes when called); the
    model itself when it cannot be copied."""
    try:
        return copy.deepcopy(model)
    except Exception:  # noqa: BLE001 - a module that cannot be copied: compared as it is
        return model


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
            target: str | None = None, seed: int = 0, atol: Tolerance = 1e-4, rtol: Tolerance = 1e-4,
            progress: Callable[[str], None] | None = None, strict: bool = False,
            min_delegated: float | None = None, max_arena_bytes: int | None = None, pte: bytes | None = None,
            pte_path: str | None = None, bundle: str | Path | None = None, draft_export: bool = False,
            allow_portable: tuple[str, ...] | None = None, max_subgraphs: int | None = None,
            max_pte_bytes: int | None = None, extra_inputs: Sequence[tuple[Any, ...]] = (),
            max_portable_time: float | None = None, strict_export: bool = False,
            value_ranges: Mapping[str, tuple[int, int]] | None = None) -> DoctorReport:
    """Run the doctor's pipeline on a model and return the :class:`DoctorReport`.

    Never raises for the model: a failing export is in the report (verdict ``fail``), and so is the
    doctor's own failure (verdict ``error``, :attr:`DoctorReport.internal_error`).

    ``strict``: probes outside the contract that the runtime runs, and Dims without a max, fail.
    ``min_delegated`` (percent), ``max_arena_bytes``, ``max_subgraphs`` (delegated subgraphs), ``max_pte_bytes``:
    thresholds that fail the verdict; ``allow_portable``: the operators (as the delegation report names them,
    ``aten_mean_dim``) that may run on portable kernels, any other one fails.
    ``pte``: the bytes of a shipped ``.pte`` to examine instead of lowering the model here.
    ``bundle``: write an ExecuTorch BundledProgram there (verified in the runtime before the report).
    ``draft_export``: also run ``torch.export.draft_export`` and list every issue it finds.
    ``extra_inputs``: the user's own inputs (``--inputs``), compared after the generated probes and reported apart.
    ``max_portable_time``: measure the example's run time (ExecuTorch's ETDump profile, :mod:`helpers.doctor.profile`)
    and fail when the portable operators take more than this percentage of it.
    ``strict_export``: ``torch.export.export(..., strict=True)`` (Dynamo), for a model that needs it (``transformers``'
    static-cache wrapper: lesson 13).
    ``value_ranges``: ``{input name: (low, high)}``, the values an integer input takes in the app, both included (token
    ids, positions): the probes draw that input's values from it (:func:`helpers.probe_inputs`); a
    :class:`helpers.PositionRange` range (``--positions``) gives each probe one run of consecutive values, as a prompt's
    ``cache_position``; a ``ValueError`` for a name that is not an integer input of ``forward()``.

    A model whose program writes buffers it keeps between calls (a KV cache) is compared from its initial state on
    every probe (:func:`helpers.compare`'s ``fresh_state``), then on the probes that matched once more, one call after
    another with the state carried on both sides (:func:`calls_in_a_row`); the stage locator is skipped for it.
    """
    # torch.cond runs through Dynamo in eager mode; on a probe shape the model cannot take, torch logs the
    # failed fake-tensor trace at ERROR level (timestamped) before raising. compare() records the error;
    # the log line is noise, so logging is paused while the pipeline runs.
    say = progress or (lambda _text: None)
    if isinstance(example_args, torch.Tensor):
        example_args = (example_args,)
    example_args = tuple(example_args)
    check_value_ranges(model, example_args, value_ranges)
    target = target or type(model).__name__
    report = DoctorReport(target, backend, "", None, strict=strict, min_delegated=min_delegated,
                          arena_limit=max_arena_bytes, pte_path=pte_path, atol=atol, rtol=rtol,
                          allow_portable=allow_portable, max_subgraphs=max_subgraphs, pte_limit=max_pte_bytes,
                          max_portable_time=max_portable_time, value_ranges=dict(value_ranges or {}))
    run = _Run(report, say)
    wanted = ["export"] + (["draft_export"] if draft_export else []) + [
        "lower", "load", "compare", "delegation", "memory"] + (
        ["profile"] if max_portable_time is not None else []) + (["bundle"] if bundle is not None else [])
    previous = logging.root.manager.disable
    logging.disable(logging.ERROR)
    try:
        report.inputs = _describe_inputs(model, example_args, dynamic_shapes)
        _pipeline(run, model, example_args, dynamic_shapes, backend=backend, seed=seed, atol=atol, rtol=rtol,
                  pte=pte, pte_path=pte_path, bundle=bundle, draft_export=draft_export, extra_inputs=extra_inputs,
                  strict_export=strict_export)
    except Exception as exc:  # noqa: BLE001 - the doctor's own failure: reported as such, never as the model's
        report.internal_error = exc
        report.internal_stage = run.current.name if run.current is not None else None
        run.end("error", f"internal error: {error_line(exc)}")
        say(f"internal error of export doctor ({error_line(exc)})")
    finally:
        logging.disable(previous)
    run.skip_rest(wanted)
    report.stages.sort(key=lambda s: STAGE_NAMES.index(s.name) if s.name in STAGE_NAMES else len(STAGE_NAMES))
    return report


def _pipeline(run: _Run, model: torch.nn.Module, example_args: tuple[Any, ...], dynamic_shapes: Any, *,
              backend: str, seed: int, atol: Tolerance, rtol: Tolerance, pte: bytes | None, pte_path: str | None,
              bundle: str | Path | None, draft_export: bool, extra_inputs: Sequence[tuple[Any, ...]] = (),
              strict_export: bool = False) -> None:
    from ..diagnose import FIXES, Diagnosis, diagnose_failure
    from ..lowering import export_methods, lower_exported

    report = run.report
    # 1. export (once: the same exported program is lowered, and gives the contract of a shipped .pte)
    run.begin("export", "torch.export")
    try:
        with torch.random.fork_rng(devices=[]):  # tracing may draw random numbers: leave the caller's RNG alone
            normalised, exported = export_methods({"forward": (model, example_args, dynamic_shapes)},
                                                  strict=strict_export)
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
    report.stateful = written_buffers(program)
    initial = initial_state(model) if report.stateful else model  # export does not run it on real tensors
    if draft_export:
        _draft(run, model, example_args, dynamic_shapes)

    # 2. lower and load (or load the shipped file)
    artifact: PteArtifact | None
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
    report.diagnosis = Diagnosis(kind="ok", stage="load", fix=FIXES["ok"], artifact=artifact, exported=program,
                                 summary=summary)
    _examine_loaded(run, artifact, initial if report.stateful else model, example_args, dynamic_shapes, seed=seed,
                    atol=atol, rtol=rtol, extra_inputs=extra_inputs)
    if not report.stateful:  # the locator runs each stage on one input after another: state would carry over
        _locate(run, artifact, model, normalised, exported, atol=atol, rtol=rtol,
                examined="shipped .pte" if pte is not None else f"{artifact.backend} .pte")
    if report.max_portable_time is not None:
        from .profile import RUNS, measure

        run.begin("profile", f"measuring the example's run time ({RUNS} runs, ExecuTorch's ETDump profile)")
        report.profile = measure(artifact.pte_bytes, example_args)
        run.end("ok", report.profile.summary())

    # 6. bundle
    if bundle is not None:
        from .bundle import write_bundle

        run.begin("bundle", f"writing and verifying the BundledProgram {bundle}")
        if not isinstance(atol, (int, float)) or not isinstance(rtol, (int, float)):
            raise ValueError("a bundle takes one atol and one rtol (a bundled test case has one tolerance)")
        report.bundle = write_bundle(artifact, model, report.probes, report.parity, path=bundle, atol=atol, rtol=rtol)
        run.end("ok" if report.bundle.ok else "failed",
                report.bundle.problem or f"{len(report.bundle.labels)} test case(s) written to {bundle}")

    _mark_failed_checks(report)


def _examine_loaded(run: _Run, artifact: PteArtifact, model: torch.nn.Module, example_args: tuple[Any, ...],
                    dynamic_shapes: Any, *, seed: int, atol: Tolerance, rtol: Tolerance, method: str = "forward",
                    extra_inputs: Sequence[tuple[Any, ...]] = ()) -> None:
    """Stages 3-5 on a loaded program: compare ``method`` with eager on probes around its contract (and on the
    user's ``extra_inputs``, last), then its delegation and memory plan."""
    from .. import Probe, compare, probe_inputs

    report = run.report
    report.backend = artifact.backend
    named = f" ({method})" if method != "forward" else ""
    # 3. compare with eager on probes around the contract
    run.begin("compare")
    report.contract = artifact.input_contract(method)
    report.probes = probe_inputs(example_args, dynamic_shapes, seed=seed, model=model, contract=report.contract,
                                 value_ranges=report.value_ranges)
    report.probes += [Probe(f"your input {i}", tuple(args)) for i, args in enumerate(extra_inputs)]
    report.user_inputs = len(extra_inputs)
    run.say(f"compare{named}: {len(report.probes)} probes, eager vs the ExecuTorch runtime")
    report.parity = compare(model, artifact, report.probes, method=method, atol=atol, rtol=rtol,
                            fresh_state=bool(report.stateful))
    if report.stateful:
        report.sequence = calls_in_a_row(model, artifact, report, method=method, atol=atol, rtol=rtol)
    sequence_ok = report.sequence is None or all(r.status == "match" for r in report.sequence.rows)
    run.end("ok" if report.parity.ok_within_contract and sequence_ok else "failed", report.parity.summary())

    # 4. delegation, 5. memory
    run.begin("delegation", f"delegation and memory plan{named}")
    report.delegation = artifact.delegation(method)
    report.diagnosis.summary += f"; {report.delegation.summary()}"
    run.end("ok", report.delegation.summary())
    run.begin("memory")
    report.arena_bytes = artifact.planned_memory_bytes(method)
    report.pte_bytes = artifact.nbytes
    run.end("ok", f"arena {report.arena_bytes:,} bytes, .pte {report.pte_bytes:,} bytes")


def check_value_ranges(model: torch.nn.Module, example_args: tuple[Any, ...],
                       value_ranges: Mapping[str, tuple[int, int]] | None) -> None:
    """``ValueError`` unless every name of ``value_ranges`` is an integer input of ``forward()`` and each range is two
    integers, low ≤ high."""
    if value_ranges:
        value_ranges_by_position(example_args, forward_parameter_names(model), value_ranges)


def _ranges_per_method(methods: Mapping[str, tuple[torch.nn.Module, tuple[Any, ...], Any]],
                       value_ranges: Mapping[str, tuple[int, int]]) -> dict[str, dict[str, tuple[int, int]]]:
    per_method = {}
    for name, (model, args, _dynamic) in methods.items():
        integers = set(value_range_names(tuple(args), forward_parameter_names(model)))
        per_method[name] = {k: v for k, v in value_ranges.items() if k in integers}
        check_value_ranges(model, tuple(args), per_method[name])
    unknown = sorted(set(value_ranges) - {k for ranges in per_method.values() for k in ranges})
    if unknown:
        raise ValueError(f"value_ranges names {', '.join(unknown)}: not an integer input of any method")
    return per_method


def calls_in_a_row(model: torch.nn.Module, artifact: PteArtifact, report: DoctorReport, *, method: str,
                   atol: Tolerance, rtol: Tolerance) -> Any:
    """For a program with state: the probes inside the contract that matched eager from the initial state, called
    again one after another on one copy of ``model`` and one loaded program, the state carried on both sides, as an
    app's loop calls it. What a state-free comparison cannot see: a value kept in a Python attribute (a counter, a
    position) moves on in eager and was taken once by export. A :class:`helpers.ParityReport`, or None when no
    probe qualifies."""
    from .. import compare

    calls = [probe for probe, row in zip(report.probes, report.parity.rows)
             if row.within_contract and row.status == "match"]
    if len(calls) < 2:
        return None
    return compare(copy.deepcopy(model), artifact.reloaded(), calls, method=method, atol=atol, rtol=rtol)


def _initial_together(methods: Mapping[str, tuple[torch.nn.Module, tuple[Any, ...], Any]]
                      ) -> dict[str, torch.nn.Module] | None:
    """The methods' models copied in one go, so that a module two methods share (one language model behind prefill
    and decode) stays one module in the copy; None when they cannot be copied."""
    try:
        return copy.deepcopy({name: model for name, (model, _args, _dynamic) in methods.items()})
    except Exception:  # noqa: BLE001 - a model that cannot be copied: no calls across methods
        return None


def _sharing_state(methods: Mapping[str, tuple[torch.nn.Module, tuple[Any, ...], Any]],
                   reports: Mapping[str, DoctorReport]) -> list[str]:
    """The methods, in order, whose programs write state and whose eager models share a buffer with another method's
    that one of the two writes: what one of them writes, the other holds in eager (a KV cache behind prefill and
    decode). Buffers they both only read (a table of constants, a rotary embedding's frequencies) do not count."""
    live = [name for name in methods if reports[name].stateful and reports[name].parity is not None]
    held = {name: {id(b) for b in methods[name][0].buffers()} for name in live}
    written = {name: {id(b) for key, b in methods[name][0].named_buffers() if key in set(reports[name].stateful)}
               for name in live}
    return [name for name in live
            if any(written[name] & held[other] or written[other] & held[name] for other in live if other != name)]


def shared_buffer_places(artifact: PteArtifact, methods: Mapping[str, tuple[torch.nn.Module, tuple[Any, ...], Any]],
                         order: Sequence[str]) -> dict[str, list[tuple[int, int]]]:
    """Per method of ``order``: the (arena, offset) its memory plan gives the buffers the methods share in eager and
    the program writes back (planned tensors made by ``copy_`` with a shared buffer's shape), read from the ``.pte``.
    Built with ``share_mutable_buffers`` they are in an arena of their own, at one place for every method; without
    it each method's plan places them on its own."""
    shared = set.intersection(*({id(b) for b in methods[name][0].buffers()} for name in order))
    shapes = {tuple(b.shape) for name in order for b in methods[name][0].buffers() if id(b) in shared}
    return {name: sorted((int(r["arena"]), int(r["offset"])) for r in artifact.memory_plan(name)
                         if r["made by"] == "copy_" and tuple(r["shape"]) in shapes) for name in order}


def calls_across_methods(models: Mapping[str, torch.nn.Module], artifact: PteArtifact,
                         reports: Mapping[str, DoctorReport], order: Sequence[str], *, atol: Tolerance,
                         rtol: Tolerance) -> Any:
    """Methods that share state in eager, called as an app calls them: each method's probes that matched eager from
    the initial state, method after method in ``order`` (prefill's, then decode's), on ``models`` (copies that
    share what the originals share) and one loaded program, the state carried on both sides. What comparing each
    method alone cannot see: whether the ``.pte``'s methods share the buffers (``share_mutable_buffers``). A
    :class:`helpers.ParityReport` whose row labels name the method, or None when fewer than two calls qualify."""
    from ..parity import ParityReport, check_one

    program = artifact.reloaded()
    across = ParityReport(" then ".join(order))
    for name in order:
        report = reports[name]
        for probe, row in zip(report.probes, report.parity.rows):
            if row.within_contract and row.status == "match":
                across.rows.append(check_one(models[name], program, probe.args, method=name,
                                             label=f"{name}: {probe.label}", atol=atol, rtol=rtol))
    return across if len({r.label.split(":")[0] for r in across.rows}) > 1 else None


def _locate(run: _Run, artifact: PteArtifact, model: torch.nn.Module, normalised: Any, exported: Any, *,
            atol: Tolerance, rtol: Tolerance, examined: str) -> None:
    """Where each diverging probe (inside the contract) first leaves eager: :mod:`helpers.doctor.locate`.
    ``normalised``/``exported``: the one export the examined program came from, lowered again without a delegate."""
    from ..lowering import lower_exported, progress_lines
    from .locate import MAX_LOCATED, locate_divergences

    report = run.report
    diverging = [r for r in report.parity.rows if r.within_contract and r.status == "diverge"]
    if not diverging:
        return
    run.begin("locate", f"locating where {min(len(diverging), MAX_LOCATED)} diverging probe(s) leave eager")

    def portable_program() -> PteArtifact:
        with progress_lines(False):  # the doctor's own step, not a lesson's: no "✓ forward → .pte" line
            return lower_exported(normalised, exported, backend="portable")

    portable = None if artifact.backend == "portable" else portable_program
    report.located = locate_divergences(model, exported["forward"], report.parity.rows,
                                        [p.args for p in report.probes], examined=examined, portable=portable,
                                        atol=atol, rtol=rtol)
    run.end("ok", "; ".join(f"{found.label}: first diverges at the {found.first or 'no stage'}"
                            for found in report.located))


def _mark_failed_checks(report: DoctorReport) -> None:
    failed = {c.name for c in report.checks if not c.passed}
    for stage in report.stages:
        if stage.name == "delegation" and failed & {"min-delegated", "allow-portable", "max-subgraphs"}:
            stage.status = "failed"
        if stage.name == "memory" and failed & {"max-arena-bytes", "max-pte-bytes"}:
            stage.status = "failed"
        if stage.name == "profile" and "max-portable-time" in failed:
            stage.status = "failed"


def examine_methods(methods: Mapping[str, tuple[torch.nn.Module, tuple[Any, ...], Any]], *,
                    backend: str = "xnnpack", target: str | None = None, seed: int = 0, atol: Tolerance = 1e-4,
                    rtol: Tolerance = 1e-4, progress: Callable[[str], None] | None = None, strict: bool = False,
                    min_delegated: float | None = None, max_arena_bytes: int | None = None,
                    allow_portable: tuple[str, ...] | None = None, max_subgraphs: int | None = None,
                    max_pte_bytes: int | None = None,
                    extra_inputs: Mapping[str, Sequence[tuple[Any, ...]]] | None = None,
                    strict_export: Mapping[str, bool] | None = None,
                    value_ranges: Mapping[str, tuple[int, int]] | None = None,
                    share_mutable_buffers: bool = False) -> list[DoctorReport]:
    """The doctor's pipeline on a program of several methods (``{name: (model, example_args, dynamic_shapes)}``):
    one :class:`DoctorReport` per method, in order.

    Each method is exported on its own (a method that does not export fails its report, and the program is not
    lowered: the others say so). The methods are lowered *together* into one ``.pte``, as an app ships them, and
    each method of that program is then compared with its eager model on probes around its own contract, with its
    delegation and memory plan; the checks (as :func:`examine` takes them) apply to each method. Never raises: the doctor's own failure is an ``error`` verdict on every report.
    ``strict_export``: the methods exported with ``strict=True``. A method that writes state (a KV cache shared by
    prefill and decode) is compared from the initial state on every probe, then in calls one after another, as
    :func:`examine` does. ``value_ranges``: as :func:`examine`'s, applied to every method with an integer input of that
    name (a ``ValueError`` for a name no method has).

    Methods whose eager models share a buffer they write (prefill and decode of one language model, one KV cache) are
    also called *across methods*, as the app calls them: each method's matching probes in the order of ``methods``
    (prefill's, then decode's), on one copy of the models and one loaded program, the state carried
    (:func:`calls_across_methods`; the check "state across methods"). ``share_mutable_buffers``: build the program
    with ExecuTorch's ``MemoryPlanningPass(share_mutable_buffers=True)`` (:func:`helpers.lower_methods`); without
    it each method's memory plan has its own place for the buffers, and the calls across methods say so (unless both
    plans chose the same offset: the host runtime gives a program's methods one set of arenas; README). Methods
    sharing different buffers with different partners are still called as one sequence, in the order of ``methods``.
    """
    from ..diagnose import FIXES, Diagnosis, diagnose_failure
    from ..lowering import export_methods, lower_exported

    say = progress or (lambda _text: None)
    target = target or "program"
    ranges = _ranges_per_method(methods, value_ranges or {})
    reports = {name: DoctorReport(f"{target} · method {name}", backend, "", None, strict=strict,
                                  min_delegated=min_delegated, arena_limit=max_arena_bytes, atol=atol, rtol=rtol,
                                  method=name, allow_portable=allow_portable, max_subgraphs=max_subgraphs,
                                  pte_limit=max_pte_bytes, value_ranges=ranges[name]) for name in methods}
    runs = {name: _Run(report, say) for name, report in reports.items()}
    wanted = ["export", "lower", "load", "compare", "delegation", "memory"]
    previous = logging.root.manager.disable
    logging.disable(logging.ERROR)
    try:
        normalised: dict[str, tuple[torch.nn.Module, tuple[Any, ...], Any]] = {}
        exported: dict[str, torch.export.ExportedProgram] = {}
        initial: dict[str, torch.nn.Module] = {}
        together = _initial_together(methods)  # before any call: the methods' models as the app starts them
        for name, (model, args, dynamic) in methods.items():
            run = runs[name]
            run.report.inputs = _describe_inputs(model, args, dynamic)
            run.begin("export", f"torch.export: method {name}")
            try:
                with torch.random.fork_rng(devices=[]):
                    one, programs = export_methods({name: (model, args, dynamic)},
                                                   strict=bool((strict_export or {}).get(name)))
            except Exception as exc:  # noqa: BLE001
                diagnosis = diagnose_failure(exc)
                if diagnosis is None:
                    raise
                run.report.diagnosis = diagnosis
                run.end("failed", diagnosis.summary)
                say(f"method {name}: export failed ({diagnosis.kind})")
                continue
            run.end("ok", "torch.export succeeded")
            run.report.stateful = written_buffers(programs[name])
            initial[name] = initial_state(model) if run.report.stateful else model
            normalised.update(one)
            exported.update(programs)
        failed = [name for name in methods if name not in exported]
        if failed:
            why = f"not lowered: method {', '.join(failed)} of the program did not export"
            for name in exported:
                runs[name].skip("lower", why)
                reports[name].diagnosis = Diagnosis(
                    kind="other", stage="lower", summary=why, exported=exported[name],
                    fix=f"Fix method {', '.join(failed)} first (its report says how): the program is lowered with all "
                        "of its methods, and then this one is compared with eager.")
            return list(reports.values())

        for run in runs.values():
            run.begin("lower")
        say(f"lowering {len(methods)} methods together to {backend} and loading the .pte in the ExecuTorch runtime")
        try:
            artifact = lower_exported(normalised, exported, backend=backend,
                                      share_mutable_buffers=share_mutable_buffers)
        except Exception as exc:  # noqa: BLE001
            diagnosis = diagnose_failure(exc)
            if diagnosis is None:
                raise
            for run in runs.values():
                run.report.diagnosis = diagnosis
                if diagnosis.stage == "load":
                    run.end("ok", f"lowered to {backend}")
                    run.begin("load")
                run.end("failed", diagnosis.summary)
            say(f"{diagnosis.stage} failed ({diagnosis.kind})")
            return list(reports.values())
        for name, run in runs.items():
            run.end("ok", f"lowered to {backend} with {', '.join(methods)}")
            run.begin("load")
            run.end("ok", "loaded in the ExecuTorch runtime")
            run.report.diagnosis = Diagnosis(kind="ok", stage="load", fix=FIXES["ok"], artifact=artifact,
                                             exported=exported[name], summary="exported, lowered and loaded")
        for name, (_model, args, dynamic) in normalised.items():
            _examine_loaded(runs[name], artifact, initial[name], args, dynamic, seed=seed, atol=atol, rtol=rtol,
                            method=name, extra_inputs=(extra_inputs or {}).get(name, ()))
        sharing = _sharing_state(methods, reports)
        if together is not None and len(sharing) > 1:
            say(f"calling {' then '.join(sharing)} one after another, as the app does (state carried)")
            across = calls_across_methods(together, artifact, reports, sharing, atol=atol, rtol=rtol)
            places = shared_buffer_places(artifact, methods, sharing) if across is not None else {}
            for name in sharing:
                reports[name].across_methods = across
                reports[name].share_mutable_buffers = share_mutable_buffers
                reports[name].shared_places = places
                if across is not None and (not share_mutable_buffers or any(r.status != "match" for r in across.rows)):
                    compare_stage = next((s for s in reports[name].stages if s.name == "compare"), None)
                    if compare_stage is not None:
                        compare_stage.status = "failed"
        for name in normalised:
            _mark_failed_checks(reports[name])
    except Exception as exc:  # noqa: BLE001 - the doctor's own failure: reported as such on every method
        for run in runs.values():
            run.report.internal_error = exc
            run.report.internal_stage = run.current.name if run.current is not None else None
            if run.current is not None:
                run.end("error", f"internal error: {error_line(exc)}")
        say(f"internal error of export doctor ({error_line(exc)})")
    finally:
        logging.disable(previous)
        for run in runs.values():
            run.skip_rest(wanted)
            run.report.stages.sort(
                key=lambda s: STAGE_NAMES.index(s.name) if s.name in STAGE_NAMES else len(STAGE_NAMES))
    return list(reports.values())


def _draft(run: _Run, model: torch.nn.Module, example_args: tuple[Any, ...], dynamic_shapes: Any) -> None:
    from .draft import run_draft_export

    run.begin("draft_export", "torch.export.draft_export (every issue, not only the first)")
    findings = run_draft_export(model, example_args, dynamic_shapes)
    run.report.draft = findings
    if findings.error:
        run.end("failed", f"draft_export raised: {findings.error}")
    else:
        run.end("failed" if findings.issues else "ok", f"{len(findings.issues)} issue(s)")
