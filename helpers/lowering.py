"""From an ``nn.Module`` to a ``.pte`` loaded in the ExecuTorch runtime.

The pipeline is the one you would ship: ``torch.export.export`` → ``to_edge_transform_and_lower``
(with the XNNPACK partitioner, or none for the portable kernels) → ``to_executorch()`` → load the
bytes in the runtime. Lowered programs are cached, keyed on the exported program
(:func:`helpers.cache.program_key`): every call exports (a fraction of the lowering's cost), and a
program is lowered only when no identical exported program was lowered before. A cached program is
loaded with the runtime's compiled module alone (:mod:`helpers._runtime`): the ahead-of-time
compiler (``executorch.exir``) is imported only to build.

Errors keep their own type and message. One raised *by torch or ExecuTorch* while exporting,
lowering or loading the model is tagged with its stage (:func:`stage_of` gives ``"export"``,
``"lower"`` or ``"load"``); an exception without a stage is the library's own failure, not the
model's. A lowering error is also recorded in the cache (and a load refused for a missing kernel), and a later call
on the same exported program raises it again without running the compiler (it would fail the same way): the
exception has the same type and message, and a note that says it was replayed.

One adjustment is made for ``torch.cond``: XNNPACK asks the lowering not to decompose some
operators (``linear`` among them) because it will take them itself, but it never looks inside
a cond branch, so such an operator would be left undecomposed *and* undelegated ("was not
decomposed or delegated"). We keep that request for the straight-line graph only, so the
operators inside branches are decomposed and run on portable kernels. The delegation report
says so.
"""

from __future__ import annotations

import contextlib
import copy
import importlib
import logging
import re
import sys
import traceback
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, NamedTuple

import torch

from . import cache, serialized
from ._decomp_memo import registry_survey_memoized
from ._quiet import captured_output, import_executorch_quietly, log_records, runtime_log_lines
from ._runtime import load_program
from .artifact import _LIVE_PROGRAMS, PteArtifact, RuntimeRejectedError
from .contract import contract_from_export, forward_parameter_names
from .operators import BOOKKEEPING, CONTROL_FLOW
from .records import ProgramRecord

__all__ = ["lower", "lower_methods", "export_methods", "lower_exported", "exported_of", "ProgramOptions", "lower_by_recipe",
           "known_by_recipe", "remember_recipe", "stage_of", "BACKENDS", "STAGES"]

STAGES = ("export", "lower", "load")
_STAGE_ATTRIBUTE = "_exportlab_stage"
_EXPORTED_ATTRIBUTE = "_exportlab_exported"

BACKENDS = ("xnnpack", "portable")
_MEMORY: dict[str, PteArtifact] = {}
_progress_enabled: bool | None = None


def set_progress(enabled: bool | None) -> None:
    """Force the export progress line on or off (``None``: only in notebooks and terminals)."""
    global _progress_enabled
    _progress_enabled = enabled


@contextlib.contextmanager
def progress_lines(enabled: bool | None) -> Iterator[None]:
    """Force the progress line on or off inside the block, then restore the setting as it was (even on error)."""
    before = _progress_enabled
    set_progress(enabled)
    try:
        yield
    finally:
        set_progress(before)


def progress_enabled() -> bool | None:
    """The forced progress setting (``None``: automatic)."""
    return _progress_enabled


def _progress_wanted() -> bool:
    if _progress_enabled is not None:
        return _progress_enabled
    if "ipykernel" in sys.modules:
        return True
    return bool(getattr(sys.stderr, "isatty", lambda: False)())


def stage_of(exc: BaseException) -> str | None:
    """The pipeline stage at which torch or ExecuTorch raised ``exc`` for the model (``"export"``,
    ``"lower"`` or ``"load"``), or ``None`` when the exception did not come from those calls:
    then it is this library's own failure, never evidence about the model."""
    return getattr(exc, _STAGE_ATTRIBUTE, None)


@contextlib.contextmanager
def _stage(name: str) -> Iterator[None]:
    """Tag any exception raised inside the block with the pipeline stage ``name`` (type unchanged)."""
    try:
        yield
    except Exception as exc:
        if stage_of(exc) is None:
            try:
                setattr(exc, _STAGE_ATTRIBUTE, name)
            except AttributeError:  # an exception type with __slots__: wrap it so the stage survives
                raise _StageError(name, exc) from exc
        raise


class _StageError(RuntimeError):
    def __init__(self, stage: str, original: BaseException):
        super().__init__(f"{type(original).__name__}: {original}")
        setattr(self, _STAGE_ATTRIBUTE, stage)
        self.original = original


# ----- failures that repeat ------------------------------------------------------------------------
_NOT_RECORDED = (MemoryError, OSError)  # about this machine at this moment, not about the program


# runtime/core/error.h: OperatorMissing, a fact of this runtime build (the bindings write "error: 0x:14")
_OPERATOR_MISSING = re.compile(r"error:? 0x:?14\b")


def _record_failure(key: str, exc: BaseException) -> None:
    """Keep a lowering error torch or ExecuTorch raised, if it can be raised again exactly (its type, from its
    message alone), and a load refused because this runtime has no kernel for an operator: the same exported
    program, versions and code fail the same way every time."""
    kind = type(exc)
    if isinstance(exc, RuntimeRejectedError) and kind is RuntimeRejectedError and stage_of(exc) == "load" \
            and _OPERATOR_MISSING.search(exc.error):
        cache.store_failure(key, {"type": "load", "message": str(exc), "traceback": "".join(traceback.format_exception(exc)),
                                  "method": exc.method, "error": exc.error, "log": "\n".join(exc.log)})
        return
    if stage_of(exc) != "lower" or isinstance(exc, _NOT_RECORDED) or not isinstance(exc, Exception):
        return
    if "<locals>" in kind.__qualname__ or _rebuilt(f"{kind.__module__}:{kind.__qualname__}", str(exc)) is None:
        return
    cache.store_failure(key, {"type": f"{kind.__module__}:{kind.__qualname__}", "message": str(exc),
                              "traceback": "".join(traceback.format_exception(exc))})


def _rebuilt(kind: str, message: str) -> BaseException | None:
    """The exception ``kind`` ("module:qualname") raised with ``message``, or None if that does not give it back."""
    module, _, qualname = kind.partition(":")
    try:
        found: Any = importlib.import_module(module)
        for part in qualname.split("."):
            found = getattr(found, part)
        exc = found(message)
    except Exception:  # noqa: BLE001 - a type we cannot rebuild is simply not replayed
        return None
    return exc if isinstance(exc, Exception) and str(exc) == message else None


def _raise_recorded_failure(key: str, progress: _Progress) -> None:
    """Raise the error this program's lowering raised before (recorded by :func:`_record_failure`), if any."""
    failure = cache.load_failure(key)
    if failure is None:
        return
    stage = "load" if failure["type"] == "load" else "lower"
    if stage == "load":
        exc: BaseException | None = RuntimeRejectedError(failure.get("method", ""), failure.get("error", ""),
                                                         failure.get("log", "").splitlines())
        exc = exc if str(exc) == failure["message"] else None
    else:
        exc = _rebuilt(failure["type"], failure["message"])
    if exc is None:
        return
    setattr(exc, _STAGE_ATTRIBUTE, stage)
    exc.add_note(f"(exportlab: this program's {stage} stage raised this error before, with the same torch, ExecuTorch "
                 "and library code; replayed from the cache. The traceback it had then is in "
                 f"{cache.cache_dir() / (key + '.failed.json')})")
    progress.fail(exc)
    raise exc


class _Progress:
    """One line that is rewritten in place (``\\r``); only its last state remains in a notebook.

    Before each rewrite the line is blanked with spaces: JupyterLab (like a terminal) overlays the
    new text on the old one, so a shorter state would otherwise keep the tail of a longer one.
    """

    def __init__(self, label: str | None):
        """``label`` None: a build nobody asked for yet (a sibling: :func:`lower_exported`) shows nothing."""
        self.label = label
        self.stream = sys.stdout if "ipykernel" in sys.modules else sys.stderr
        self.on = label is not None and _progress_wanted()
        self.shown = 0  # columns of the unfinished line currently shown

    def _write(self, line: str, *, final: bool) -> None:
        if not self.on:
            return
        blank = "\r" + " " * self.shown if self.shown else ""
        self.stream.write(f"{blank}\r{line}" + ("\n" if final else ""))
        self.stream.flush()
        self.shown = 0 if final else len(line) + 1  # + 1: the symbol takes two columns in a terminal

    def step(self, text: str) -> None:
        self._write(f"⏳ {self.label}: {text}…", final=False)

    def done(self, text: str) -> None:
        self._write(f"✓ {self.label}: {text}", final=True)

    def fail(self, exc: BaseException) -> None:
        self._write(f"✗ {self.label}: failed ({type(exc).__name__})", final=True)


def _xnnpack_partitioner():
    from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner

    class XnnpackOutsideControlFlow(XnnpackPartitioner):
        """XNNPACK, asking to keep operators whole only where it can actually take them."""

        def ops_to_not_decompose(self, ep):
            ops, keep = super().ops_to_not_decompose(ep)
            top = ep.graph_module.graph

            def keep_outside_branches(node: torch.fx.Node) -> bool:
                if node.graph is not top:  # inside a cond/while branch: let it decompose
                    return False
                return True if keep is None else keep(node)

            return ops, keep_outside_branches

    return XnnpackOutsideControlFlow()


def _normalise(methods: Mapping[str, Any]) -> dict[str, tuple[torch.nn.Module, tuple[Any, ...], Any]]:
    if not methods:
        raise ValueError("lower_methods needs at least one method: {'forward': (model, example_args)}")
    out = {}
    for name, spec in methods.items():
        if not isinstance(name, str) or not name.isidentifier():
            raise ValueError(f"method name must be a Python identifier, got {name!r}")
        if not isinstance(spec, (tuple, list)) or len(spec) not in (2, 3):
            raise ValueError(f"method '{name}' must be (model, example_args) or (model, example_args, dynamic_shapes)")
        model, args = spec[0], spec[1]
        dynamic = spec[2] if len(spec) == 3 else None
        if not isinstance(model, torch.nn.Module):
            raise TypeError(f"method '{name}': expected a torch.nn.Module, got {type(model).__name__}")
        if isinstance(args, torch.Tensor):
            args = (args,)
        if not isinstance(args, tuple):
            args = tuple(args) if isinstance(args, list) else (args,)
        for i, a in enumerate(args):
            if not isinstance(a, (torch.Tensor, bool, int, float)):
                raise TypeError(f"method '{name}': example input {i} is a {type(a).__name__}; lower() takes flat "
                                "positional tensors (and Python int/float/bool, which export bakes in as constants)")
        out[name] = (model, args, dynamic)
    return out


def _delegation_rows(gm: torch.fx.GraphModule, region: str, rows: list[dict[str, Any]],
                     counter: list[int]) -> int:
    """Append one row per operator of ``gm`` (and, recursively, of its control-flow branches) to ``rows``;
    return how many delegated subgraphs there are.

    The counts are ``get_delegation_info``'s per-operator breakdown, in operator-name order as its dataframe
    lists them. The dataframe itself is not used: ExecuTorch cannot build it for a graph without operators
    (``forward(x): return x``: ``KeyError: 'op_type'``), where the breakdown is simply empty.
    """
    from executorch.devtools.backend_debug import get_delegation_info

    info = get_delegation_info(gm)
    for op, counts in sorted(info.delegation_by_operator.items(), key=lambda item: item[0]):
        if op in BOOKKEEPING:
            continue
        rows.append({"region": region, "op": str(op), "delegated": int(counts.delegated),
                     "portable": int(counts.non_delegated)})
    subgraphs = int(info.num_delegated_subgraphs)
    for node in gm.graph.nodes:
        if node.op == "call_function" and getattr(node.target, "__name__", "") in CONTROL_FLOW:
            index = counter[0]
            counter[0] += 1
            kind = node.target.__name__
            branch_names = ("true branch", "false branch") if kind == "cond" else ("body", "body 2")
            branches = [a for a in node.args if isinstance(a, torch.fx.Node) and a.op == "get_attr"]
            for label, arg in zip(branch_names, branches):
                sub = getattr(gm, str(arg.target))
                subgraphs += _delegation_rows(sub, f"{kind}#{index} {label}", rows, counter)
    return subgraphs


def _user_output_positions(edge_program) -> tuple[list[int], int]:
    """Which runtime outputs are the model's own (input mutations become extra outputs)."""
    from torch.export.graph_signature import OutputKind

    specs = [s for s in edge_program.graph_signature.output_specs if s.kind != OutputKind.BUFFER_MUTATION]
    return [i for i, s in enumerate(specs) if s.kind == OutputKind.USER_OUTPUT], len(specs)


def _control_flow_nodes(ep: torch.export.ExportedProgram) -> int:
    return sum(1 for n in ep.graph.nodes
               if n.op == "call_function" and getattr(n.target, "__name__", "") in CONTROL_FLOW)


def _graph_text(ep: torch.export.ExportedProgram) -> str:
    lines = [line for line in ep.graph_module.code.strip().splitlines() if line.strip()]
    return "\n".join(lines)


@contextlib.contextmanager
def _partitioner_reasons() -> Iterator[list[tuple[str, str, str]]]:
    """Collect the XNNPACK partitioner's own reasons for declining nodes: ``(node, operator, reason)``.

    Its rules report through ``WhyNoPartition`` at DEBUG level on the loggers of
    ``executorch.backends.xnnpack.partition``; a handler there (not propagating, so nothing is printed)
    keeps them. Only that subtree is set to DEBUG: at DEBUG the XNNPACK *serializer* would also write
    every delegate graph to a JSON file in the working directory.
    """
    def reason_of(record: logging.LogRecord) -> tuple[str, str, str] | None:
        why = record.msg
        node = getattr(why, "node", None)
        reason = getattr(why, "reason", None)
        return (str(node.name), _op_name(node), str(reason)) if node is not None and reason else None

    with log_records("executorch.backends.xnnpack.partition", logging.DEBUG, keep=reason_of) as found:
        yield found


def _op_name(node: torch.fx.Node) -> str:
    target = node.target
    name = getattr(target, "__name__", None) or str(target)
    # aten.upsample_bilinear2d.vec and edge ops print as e.g. "aten.mean.dim": keep the operator part
    return name.replace("aten.", "", 1) if name.startswith("aten.") else name


def export_methods(methods: Mapping[str, Any], *, strict: bool = False) -> tuple[
        dict[str, tuple[torch.nn.Module, tuple[Any, ...], Any]], dict[str, torch.export.ExportedProgram]]:
    """Normalise ``methods`` and ``torch.export`` each one (errors tagged with stage ``"export"``); ``strict=True``
    traces with Dynamo (``torch.export.export(..., strict=True)``)."""
    normalised = _normalise(methods)
    exported = {}
    for name, (model, args, dynamic) in normalised.items():
        with _stage("export"), captured_output():
            exported[name] = torch.export.export(model, args, dynamic_shapes=dynamic, strict=strict)
    return normalised, exported


def _described(methods: dict[str, tuple[torch.nn.Module, tuple[Any, ...], Any]],
               share_mutable_buffers: bool = False, constant_methods: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """What the library records beside the program and takes from the Python side (part of the key)."""
    described: dict[str, Any] = {
        "order": list(methods),
        "methods": {name: {"dynamic": cache.dynamic_shapes_repr(dynamic), "parameters": forward_parameter_names(model)}
                    for name, (model, _args, dynamic) in methods.items()}}
    if share_mutable_buffers:  # only when set: every other program keeps its key
        described["share_mutable_buffers"] = True
    if constant_methods:
        described["constant_methods"] = {name: repr(value) for name, value in sorted(constant_methods.items())}
    return described


class ProgramOptions(NamedTuple):
    """What may differ between programs built from one lowering: memory planning's option and constant methods
    (see :func:`lower_methods`)."""

    share_mutable_buffers: bool = False
    constant_methods: Mapping[str, Any] | None = None


def _lower_to_edge(exported: dict[str, torch.export.ExportedProgram], backend: str,
                   progress: _Progress) -> tuple[Any, list[tuple[str, str, str]]]:
    """``to_edge_transform_and_lower`` (the costly part: XNNPACK's passes run once per delegated subgraph), and the
    partitioner's reasons for what it declined."""
    import_executorch_quietly()
    from executorch.exir import to_edge_transform_and_lower

    progress.step(f"lowering to {backend}")
    partitioner = [_xnnpack_partitioner()] if backend == "xnnpack" else []
    with _stage("lower"), captured_output(), _partitioner_reasons() as reasons, registry_survey_memoized():
        edge = to_edge_transform_and_lower(dict(exported), partitioner=partitioner)
    return edge, reasons


def _with_constant_methods(edge: Any, order: list[str], constant_methods: Mapping[str, Any] | None) -> Any:
    """The lowered methods with ``constant_methods`` beside them: a new manager made as ``to_backend`` makes one
    (``to_edge_transform_and_lower(constant_methods=...)`` only stores them; nothing is lowered for them)."""
    if not constant_methods:
        return edge
    from executorch.exir import EdgeCompileConfig, EdgeProgramManager

    return EdgeProgramManager({name: edge.exported_program(name) for name in order},
                              dict(constant_methods), EdgeCompileConfig(_check_ir_validity=False))


def _build(methods: dict[str, tuple[torch.nn.Module, tuple[Any, ...], Any]],
           exported: dict[str, torch.export.ExportedProgram], backend: str,
           key: str, progress: _Progress, lowered: tuple[Any, list[tuple[str, str, str]]],
           options: ProgramOptions) -> tuple[bytes, ProgramRecord]:
    """The ``.pte`` of ``lowered`` (from :func:`_lower_to_edge`, consumed: ``to_executorch`` rewrites its graphs)
    with ``options``, loaded once to read what the runtime says about each method, and its record."""
    from executorch.exir import ExecutorchBackendConfig
    from executorch.exir.passes import MemoryPlanningPass

    edge, reasons = lowered
    edge = _with_constant_methods(edge, list(exported), options.constant_methods)
    with _stage("lower"), captured_output(), registry_survey_memoized():
        progress.step("to_executorch (memory planning)")
        program = (edge.to_executorch(ExecutorchBackendConfig(
            memory_planning_pass=MemoryPlanningPass(share_mutable_buffers=True)))
            if options.share_mutable_buffers else edge.to_executorch())
        pte = bytes(program.buffer)
    plans = {plan.name: list(plan.non_const_buffer_sizes) for plan in program.executorch_program.execution_plan}
    read_back = serialized.read_methods(pte)  # instructions and memory plan, read while the compiler is loaded

    with _stage("load"), captured_output():
        loaded = load_program(pte)
    _LIVE_PROGRAMS.append(loaded)  # never freed: see artifact._LIVE_PROGRAMS
    meta: ProgramRecord = {"key": key, "backend": backend, "methods": {}, "method_order": list(methods)}
    for name, (model, args, dynamic) in methods.items():
        ep = exported[name]
        with captured_output() as log:
            try:
                loaded_method = loaded.load_method(name)  # keep it (and the program) alive while reading
                method_meta = loaded_method.method_meta()
            except Exception as exc:  # noqa: BLE001 - e.g. a kernel this runtime does not have: re-raised
                error = RuntimeRejectedError(name, str(exc), runtime_log_lines(log.getvalue()))
                setattr(error, _STAGE_ATTRIBUTE, "load")
                raise error from None
            planned: list[tuple[int, ...] | None] = []
            for i in range(method_meta.num_inputs()):
                try:
                    planned.append(tuple(method_meta.input_tensor_meta(i).sizes()))
                except Exception:  # noqa: BLE001 - a non-tensor input (the runtime logs "is not Tensor")
                    planned.append(None)
        edge_ep = edge.exported_program(name)
        rows: list[dict[str, Any]] = []
        subgraphs = _delegation_rows(edge_ep.graph_module, "main", rows, [0])
        notes = []
        n_cf = _control_flow_nodes(ep)
        if n_cf and backend == "xnnpack":
            in_branches = sum(r["portable"] + r["delegated"] for r in rows if r["region"] != "main")
            if all(r["region"].startswith("cond#") for r in rows if r["region"] != "main"):
                notes.append(f"{name}: {n_cf} control-flow region(s) (torch.cond): XNNPACK does not lower inside "
                             f"branches, so their {in_branches} node(s) were decomposed to run on portable kernels")
            else:
                notes.append(f"{name}: {n_cf} control-flow region(s) (torch.cond, scan or map): XNNPACK does not "
                             f"lower inside their branches or loop bodies, so their {in_branches} node(s) were "
                             "decomposed to run on portable kernels")
        user_outputs, runtime_outputs = _user_output_positions(edge_ep)
        contract = contract_from_export(name, model, args, dynamic, ep, planned)
        meta["methods"][name] = {
            "contract": contract.to_dict(), "delegation": rows, "delegated_subgraphs": subgraphs,
            "notes": notes, "planned_buffer_sizes": plans.get(name, []), "graph": _graph_text(ep),
            "user_outputs": user_outputs, "runtime_outputs": runtime_outputs,
            "declined": _declined_for(name, reasons, edge_ep) if backend == "xnnpack" else [],
            "xnnpack_rules": _xnnpack_rules() if backend == "xnnpack" else [],
            "serialized": read_back[name],
        }
    return pte, meta


def _xnnpack_rules() -> list[str]:
    """The operators the XNNPACK partitioner has a rule for (e.g. ``add.Tensor``): what it can take at all."""
    from executorch.backends.xnnpack.partition.config import ALL_PARTITIONER_CONFIGS

    return sorted({str(getattr(c, "target_name", "")) for c in ALL_PARTITIONER_CONFIGS} - {""})


def _declined_for(method: str, reasons: list[tuple[str, str, str]], edge_ep: Any) -> list[dict[str, str]]:
    """The partitioner's reasons for the nodes of ``method`` that it declined (one per operator and reason)."""
    names = {n.name for gm in edge_ep.graph_module.modules() if isinstance(gm, torch.fx.GraphModule)
             for n in gm.graph.nodes}
    seen: set[tuple[str, str]] = set()
    out = []
    for node, op, reason in reasons:
        if node not in names or (op, reason) in seen:
            continue
        seen.add((op, reason))
        out.append({"op": op, "reason": reason})
    return out


def exported_of(exc: BaseException) -> torch.export.ExportedProgram | None:
    """The exported program a lowering or loading failure (:func:`stage_of` ``"lower"`` or ``"load"``) came from,
    when it had one method: what a diagnosis reads to name the line of ``forward()`` behind the failure."""
    programs = getattr(exc, _EXPORTED_ATTRIBUTE, None)
    return next(iter(programs.values())) if programs and len(programs) == 1 else None


def lower_exported(methods: dict[str, tuple[torch.nn.Module, tuple[Any, ...], Any]],
                   exported: dict[str, torch.export.ExportedProgram], *, backend: str = "xnnpack",
                   share_mutable_buffers: bool = False, constant_methods: Mapping[str, Any] | None = None,
                   siblings: Sequence[ProgramOptions] = ()) -> PteArtifact:
    """Lower already-exported methods (from :func:`export_methods`), or load them from the cache.

    ``siblings``: other options (:class:`ProgramOptions`) to build from the same lowering when this program has to
    be built, each cached under its own key (what a later call with those options loads), none returned. Lowering
    is the costly part; memory planning and constant methods come after it. A failure of the model's (one with a
    stage) carries the exported programs: :func:`exported_of`."""
    try:
        return _lower_exported(methods, exported, backend=backend, share_mutable_buffers=share_mutable_buffers,
                               constant_methods=constant_methods, siblings=siblings)
    except Exception as exc:
        if stage_of(exc) is not None and getattr(exc, _EXPORTED_ATTRIBUTE, None) is None:
            with contextlib.suppress(AttributeError):  # an exception type with __slots__ goes without
                setattr(exc, _EXPORTED_ATTRIBUTE, dict(exported))
        raise


def _lower_exported(methods: dict[str, tuple[torch.nn.Module, tuple[Any, ...], Any]],
                    exported: dict[str, torch.export.ExportedProgram], *, backend: str,
                    share_mutable_buffers: bool, constant_methods: Mapping[str, Any] | None,
                    siblings: Sequence[ProgramOptions]) -> PteArtifact:
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {BACKENDS}, got {backend!r}")
    wanted = ProgramOptions(share_mutable_buffers, constant_methods)
    key = _key(methods, exported, backend, wanted)
    label = f"{'+'.join(methods)} → .pte ({backend})"
    progress = _Progress(label)
    memory_key = f"{cache.cache_dir()}/{key}"
    if memory_key in _MEMORY:
        progress.done("ready")
        return _MEMORY[memory_key]
    stored = cache.load_entry(key)
    if stored is None:
        _raise_recorded_failure(key, progress)
        with cache.build_lock(key):  # another process may be building this very program
            stored = cache.load_entry(key)
            if stored is None:
                _raise_recorded_failure(key, progress)
                progress.step("starting")
                try:
                    # Lowering may draw random numbers; a cold build must leave the caller's RNG exactly
                    # as a cache hit does, or printed values would depend on the cache state.
                    with torch.random.fork_rng(devices=[]):
                        lowered = _lower_to_edge(exported, backend, progress)
                        for options in (o for o in siblings if o != wanted):
                            _build_sibling(methods, exported, backend, lowered, options)
                        pte, meta = _build(methods, exported, backend, key, progress, lowered, wanted)
                except BaseException as exc:
                    progress.fail(exc)
                    _record_failure(key, exc)
                    raise
                cache.store_entry(key, pte, meta)
                stored = (pte, meta)
    with _stage("load"):
        artifact = PteArtifact(*stored)
    _MEMORY[memory_key] = artifact
    progress.done("ready")
    return artifact


def _build_sibling(methods: dict[str, tuple[torch.nn.Module, tuple[Any, ...], Any]],
                   exported: dict[str, torch.export.ExportedProgram], backend: str,
                   lowered: tuple[Any, list[tuple[str, str, str]]], options: ProgramOptions) -> None:
    """Build and cache ``options``' program from a copy of ``lowered`` (``to_executorch`` rewrites the graphs it is
    given), silently, unless the cache has it. A failure is left to the sibling's own call, which builds and reports."""
    key = _key(methods, exported, backend, options)
    if cache.load_entry(key) is not None:
        return
    try:
        pte, meta = _build(methods, exported, backend, key, _Progress(None), (copy.deepcopy(lowered[0]), lowered[1]),
                           options)
    except Exception:  # noqa: BLE001 - built for later only
        return
    cache.store_entry(key, pte, meta)


def _key(methods: dict[str, tuple[torch.nn.Module, tuple[Any, ...], Any]],
         exported: dict[str, torch.export.ExportedProgram], backend: str, options: ProgramOptions) -> str:
    described = _described(methods, options.share_mutable_buffers, options.constant_methods)
    for name, (_model, args, _dynamic) in methods.items():
        if name in exported and _has_unbounded_size(exported[name]):
            # Memory planning gives a size without an upper bound the example's value: two examples, two programs.
            described["methods"][name]["example_shapes"] = [
                list(leaf.shape) if isinstance(leaf, torch.Tensor) else repr(leaf)
                for leaf in torch.utils._pytree.tree_leaves(args)]
    return cache.program_key(exported, described, backend)


def _has_unbounded_size(ep: torch.export.ExportedProgram) -> bool:
    """Does a symbolic size of ``ep`` have no finite upper bound (a ``Dim`` without a max)?"""
    from torch.utils._sympy.numbers import int_oo

    return any(vr.upper == int_oo for vr in ep.range_constraints.values())


def lower_methods(methods: Mapping[str, Any], *, backend: str = "xnnpack", strict: bool = False,
                  share_mutable_buffers: bool = False, constant_methods: Mapping[str, Any] | None = None,
                  siblings: Sequence[ProgramOptions] = ()) -> PteArtifact:
    """Export several methods into ONE ``.pte`` (bucketing, hoisting a decision into the app).

    ``methods`` maps a method name to ``(model, example_args)`` or
    ``(model, example_args, dynamic_shapes)``. Lowered programs are cached (see the module docstring).

    A buffer the graph writes (a *mutable buffer*, e.g. a KV cache) is planned in each method's own memory plan:
    two methods of one program hold two copies and neither sees the other's writes. ``share_mutable_buffers=True``
    is ExecuTorch's ``MemoryPlanningPass(share_mutable_buffers=True)``: buffers of the same name get one place,
    in an arena of their own (``mem_id`` 2) that every method's plan lists, so what one method writes the next
    reads, when the runtime gives the methods one set of arenas: ExecuTorch's Python runtime does for methods on
    the host; a C++ app's ``Module`` needs ``share_memory_arenas = true`` (default false, module.h). Lesson 13:
    a prefill method and a decode method sharing one KV cache.

    ``constant_methods`` adds methods without inputs that return a constant (``to_edge_transform_and_lower``'s
    option of that name): metadata an app reads from the program, such as the LLM runner's ``get_max_seq_len``.

    ``siblings`` (:class:`ProgramOptions`): when this program has to be built, build these variants of it from the
    same lowering too, for later calls (see :func:`lower_exported`).
    """
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {BACKENDS}, got {backend!r}")
    with torch.random.fork_rng(devices=[]):  # tracing may draw random numbers: leave the caller's RNG alone
        normalised, exported = export_methods(methods, strict=strict)
    return lower_exported(normalised, exported, backend=backend, share_mutable_buffers=share_mutable_buffers,
                          constant_methods=constant_methods, siblings=siblings)


def lower(model: torch.nn.Module, example_args: Any, *, dynamic_shapes: Any = None,
          backend: str = "xnnpack", strict: bool = False) -> PteArtifact:
    """Export ``model`` with ``example_args``, lower it for ``backend`` and load the ``.pte``.

    ``backend="xnnpack"`` delegates what XNNPACK supports; ``"portable"`` uses only the
    runtime's portable kernels. Export errors propagate unchanged (read them! or use
    :func:`helpers.diagnose_export`). Cached: lowering an identical exported program again is fast.
    ``strict=True`` exports with Dynamo, as some wrappers need (``transformers``' static-cache wrapper: lesson 13).
    """
    return lower_methods({"forward": (model, example_args, dynamic_shapes)}, backend=backend, strict=strict)


def known_by_recipe(recipe: str, *, label: str = "forward") -> PteArtifact | None:
    """The program ``recipe`` produced before (:func:`lower_by_recipe`), loaded, if the cache still has it; its
    progress line then reads as a cache hit of :func:`lower` does (``label`` names the methods), so that what a
    notebook prints does not depend on which way the program was found."""
    key = cache.recipe_program(recipe)
    if key is None:
        return None
    memory_key = f"{cache.cache_dir()}/{key}"
    if memory_key not in _MEMORY:
        stored = cache.load_entry(key)
        if stored is None:
            return None
        _MEMORY[memory_key] = PteArtifact(*stored)
    artifact = _MEMORY[memory_key]
    _Progress(f"{label} → .pte ({artifact.backend})").done("ready")
    return artifact


def remember_recipe(recipe: str, artifact: PteArtifact) -> None:
    """Note that ``recipe`` produced ``artifact`` (what :func:`known_by_recipe` finds next time)."""
    cache.note_recipe(recipe, artifact.key)


def lower_by_recipe(recipe: str, build: Callable[[], PteArtifact], *, label: str = "forward") -> PteArtifact:
    """``build()`` (a :func:`lower` or :func:`lower_methods` call) once per ``recipe``.

    The cache's key is computed from the exported program, so even a cache hit exports first; a strict export of a
    language model takes 1–2 s per method. ``recipe`` names the program by how it is made instead: the first build
    notes which program it produced, and a later call with the same recipe loads it without exporting. The
    recipe must name everything the program depends on besides this library's recording code and the versions of
    torch and ExecuTorch, which are added (see :func:`helpers.cache.note_recipe`)."""
    artifact = known_by_recipe(recipe, label=label)
    if artifact is not None:
        return artifact
    artifact = build()
    remember_recipe(recipe, artifact)
    return artifact


def forget_in_memory() -> None:
    """Drop the in-process cache (the on-disk cache stays)."""
    _MEMORY.clear()
