"""Read an export failure the way the seeds teach: classify it, find the line, name the fix.

:func:`diagnose_export` never raises for a failing export. It runs the pipeline stage by stage
(``torch.export`` → lowering → loading in the runtime) and returns a :class:`Diagnosis` whose
``kind`` is one of:

- ``"data_dependent"``: Python asked a traced tensor for its *value* (``if x.sum() > 0``,
  ``while`` on a tensor, ``.item()``). Fix: ``torch.cond`` / ``torch.where`` / hoist into the app,
  or delete an incidental branch.
- ``"constraint_violation"``: ``forward()`` reasons about a dynamic size in a way that does not
  hold for every size you declared (export "added a guard on a dynamic dimension"). Fix: bound
  the ``Dim`` as torch suggests, or rewrite the size arithmetic.
- ``"unsupported_operator"``: an operator export, the edge dialect or the runtime cannot handle.
- ``"other"`` and ``"ok"``.

Every kind but ``"ok"`` is a finding about the *model*: torch or ExecuTorch raised it while exporting,
lowering or loading it (:func:`helpers.lowering.stage_of` names the stage). An exception without a
stage is this library's own failure, never the model's: :func:`diagnose_export` lets it propagate
instead of dressing it up as a diagnosis.
"""

from __future__ import annotations

import html
import re
import sys
import traceback
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

import torch

from .artifact import PteArtifact

__all__ = ["Diagnosis", "diagnose_export", "diagnose_exception", "diagnose_failure", "KINDS"]

KINDS = ("ok", "data_dependent", "constraint_violation", "unsupported_operator", "other")

_REPO = Path(__file__).resolve().parent.parent
# Frames in these files are the pipeline's, never the user's "offending line" (helpers/models.py and
# helpers/lessons/ hold the lessons' *models*, which are user code here).
_LIBRARY_FILES = {Path(__file__).with_name(name).resolve() for name in (
    "diagnose.py", "lowering.py", "artifact.py", "parity.py", "contract.py", "cache.py", "_quiet.py", "_runtime.py")}
_LIBRARY_DIRS = (Path(__file__).resolve().parent / "doctor",)

FIXES = {
    "data_dependent": (
        "The Python control flow reads a tensor's value, which does not exist while tracing. Decide what the "
        "branch is: semantic and elementwise → torch.where(cond, a, b) (both sides computed); semantic and "
        "structural → torch.cond(pred, true_fn, false_fn, (x,)) (both branches in the graph), or hoist the "
        "decision into the app (two methods or two .pte files); incidental (debug path, training-only "
        "branch, assertion) → delete it from the export path. Then re-export and compare against eager on "
        "inputs that exercise both sides."),
    "constraint_violation": (
        "forward() reasons about a dynamic size in a way that does not hold for every size you declared. "
        "Either adopt the bound torch suggests (a narrower or derived Dim), or rewrite the size arithmetic "
        "so it holds for the whole range (e.g. reshape(x.shape[0], -1) instead of view(-1, 8)); if the "
        "Dim was specialized to a constant, the code needs that exact size: make the axis static."),
    "unsupported_operator": (
        "Replace the operator with ones the exporter, the edge dialect and the runtime support (or a "
        "decomposition of it), register a fake (meta) kernel for a custom op, or move that step into the "
        "app; a kernel missing at load time needs a runtime build that includes it."),
    "other": "Read the message: common causes are Python side effects in forward() (NumPy, printing "
             "tensors), unsupported input or output types, or a bug that eager mode also has.",
    "ok": "Export, lowering and loading succeed. Now prove parity on varied inputs (helpers.compare).",
}

_DATA_DEPENDENT = ("data-dependent", "data dependent", "GuardOnDataDependentSymNode", "DataDependentOutputException",
                   "Cannot evaluate a finite upper bound")  # memory planning (exir/sym_util.py) on a value read from data
_CONSTRAINT = ("Constraints violated", "ConstraintViolation", "satisfy the generated guard", "specialized it to be a "
               "constant", "not in range")
_UNSUPPORTED = ("no fake impl", "fake kernel", "not in Core ATen", "not found", "Missing operator",
                "was not decomposed or delegated", "Unsupported operator", "does not have an out variant",
                "missing out variant", "Dynamic control flow is not supported", "Unsupported: ")
_OP_PATTERNS = (r"CustomOpDef\(([\w:.]+)\)", r"kernel '([\w:.]+)' not found", r"Missing operator: \[\d+\] ([\w:.]+)",
                r"Operator torch\._ops\.(aten\.[\w.]+) is not in Core ATen", r"Node \w+ with op <EdgeOpOverload: ([\w.]+)>",
                r"(aten[.:]{1,2}[\w.]+)")


@dataclass
class Diagnosis:
    """The verdict on one model: what failed, where, and what to do."""

    kind: str
    stage: str
    summary: str
    fix: str
    source_line: str | None = None
    location: str | None = None  # "helpers/models.py:12" inside this checkout, else the file's name and line
    path: str | None = None  # the offending line's file, absolute (None in a notebook cell)
    line: int | None = None
    error_type: str | None = None
    message: str = ""
    suggested_fixes: list[str] = field(default_factory=list)
    operator: str | None = None
    artifact: PteArtifact | None = None
    exported: Any = field(default=None, repr=False)  # the ExportedProgram, when export succeeded

    @property
    def ok(self) -> bool:
        return self.kind == "ok"

    def __repr__(self) -> str:
        return f"<Diagnosis {self.kind} ({self.stage}): {self.summary}>"

    def __str__(self) -> str:
        lines = [f"{self.kind} ({self.stage}): {self.summary}"]
        if self.source_line:
            lines.append(f"  offending line: {self.source_line}" + (f"   [{self.location}]" if self.location else ""))
        if self.suggested_fixes:
            lines.append("  torch suggests: " + " | ".join(self.suggested_fixes))
        lines.append(f"  fix: {self.fix}")
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        colour = "#d9f2d9" if self.ok else "#f8d0d0"
        rows = [("kind", f"<b>{self.kind}</b> (stage: {self.stage})"), ("summary", html.escape(self.summary))]
        if self.source_line:
            rows.append(("offending line", f"<code>{html.escape(self.source_line)}</code>"
                         + (f" <small>{html.escape(self.location or '')}</small>" if self.location else "")))
        if self.suggested_fixes:
            rows.append(("torch suggests", "<br>".join(f"<code>{html.escape(s)}</code>" for s in self.suggested_fixes)))
        rows.append(("fix", html.escape(self.fix)))
        body = "".join(f"<tr><th style='text-align:left'>{k}</th><td style='text-align:left'>{v}</td></tr>"
                       for k, v in rows)
        return f"<div style='background:{colour};padding:4px'><table>{body}</table></div>"


# ----- reading errors -----------------------------------------------------------------------------
def classify(exc: BaseException) -> str:
    """The kind of an export/lowering/load error (see module docstring)."""
    text = f"{type(exc).__name__}: {exc}"
    if any(k in text for k in _DATA_DEPENDENT):
        return "data_dependent"
    if any(k in text for k in _CONSTRAINT):
        return "constraint_violation"
    if any(k in text for k in _UNSUPPORTED):
        return "unsupported_operator"
    return "other"


def _location(filename: str, lineno: int) -> str:
    path = Path(filename)
    if _in_notebook(filename):
        return f"notebook cell, line {lineno}"
    try:
        return f"{path.resolve().relative_to(_REPO)}:{lineno}"
    except ValueError:
        return f"{path.name}:{lineno}"


def _in_notebook(filename: str) -> bool:
    return "ipykernel" in filename or filename.startswith("<ipython")


class SourceFrame(NamedTuple):
    """The user's line an error points at: ``forward(): if x.sum() > 0:``, where it is for a reader
    (``helpers/models.py:40``), and its file (absolute; None in a notebook cell) and line number."""

    source: str
    location: str
    path: str | None
    line: int


def _frame(filename: str, lineno: int, func: str, code: str) -> SourceFrame:
    path = None if _in_notebook(filename) or filename.startswith("<") else str(Path(filename).resolve())
    return SourceFrame(f"{func}(): {code.strip()}", _location(filename, lineno), path, lineno)


def _is_library(filename: str) -> bool:
    if "site-packages" in filename or "dist-packages" in filename or filename.startswith("<frozen"):
        return True
    resolved = Path(filename).resolve()
    if resolved in _LIBRARY_FILES or any(d in resolved.parents for d in _LIBRARY_DIRS):
        return True
    return filename.startswith(sys.prefix) or filename.startswith(sys.base_prefix)


def _graph_frame(exported: Any, operator: str | None) -> SourceFrame | None:
    """The line of the user's code that created a node calling ``operator`` in the
    exported graph (its ``stack_trace``): where a lowering or loading error points in ``forward()``."""
    if exported is None or not operator:
        return None
    wanted = re.sub(r"^aten(::|\.)", "", operator).split(".")[0]
    for node in exported.graph.nodes:
        name = str(getattr(node.target, "__name__", node.target))
        if node.op != "call_function" or name.replace("aten.", "").split(".")[0] != wanted:
            continue
        found = _node_frame(node)
        if found is not None:
            return found
    return None


def _node_frame(node: torch.fx.Node) -> SourceFrame | None:
    """The innermost line outside the library in the stack trace export recorded for ``node``."""
    frames = re.findall(r'File "([^"]+)", line (\d+), in (\w+)\n\s*(.+)', node.meta.get("stack_trace") or "")
    for filename, lineno, func, code in reversed(frames):
        if not _is_library(filename):
            return _frame(filename, int(lineno), func, code)
    return None


def user_frame(exc: BaseException) -> SourceFrame | None:
    """The line of the user's code that triggered ``exc``, where torch reports it."""
    message = str(exc)
    m = re.search(r'The following call raised this error:\s*\n\s*File "([^"]+)", line (\d+), in (\w+)\n\s*(.+)', message)
    if m:
        return _frame(m.group(1), int(m.group(2)), m.group(3), m.group(4))
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if not _is_library(f.filename)]
    for frame in reversed(frames):
        if frame.line and frame.name not in ("<module>",):
            return _frame(frame.filename, frame.lineno or 0, frame.name, frame.line)
    return None


def _original_frame(message: str) -> SourceFrame | None:
    """The user's line a lowering error names under "Original traceback:" (the stack trace export recorded for the
    node being lowered): the innermost frame outside the library."""
    _, found, after = message.partition("Original traceback:")
    if not found:
        return None
    frames = re.findall(r'File "([^"]+)", line (\d+), in (\w+)\n\s*(.+)', after.split("Use tlparse")[0])
    for filename, lineno, func, code in reversed(frames):
        if not _is_library(filename):
            return _frame(filename, int(lineno), func, code)
    return None


def _unbacked_guard(message: str) -> str | None:
    """The question a guard asked about a value read from data (``u7 > 16``), if that is what the error is."""
    m = re.search(r"Could not guard on data-dependent expression (.+?) \(unhinted", message)
    return m.group(1).strip() if m and re.search(r"\bu\d+\b", m.group(1)) else None


def _suggested_fixes(message: str) -> list[str]:
    m = re.search(r"Suggested fixes:\s*\n((?:[ \t]+.+\n?)+)", message)
    return [line.strip() for line in m.group(1).splitlines() if line.strip()] if m else []


def _operator(message: str) -> str | None:
    for pattern in _OP_PATTERNS:
        m = re.search(pattern, message)
        if m:
            return m.group(1)
    return None


def _readable_guard(text: str) -> str:
    return re.sub(r"L\['(\w+)'\]\.size\(\)\[(\d+)\]", r"\1.shape[\2]", text)


def _summary(kind: str, exc: BaseException, source: str | None, operator: str | None, stage: str) -> str:
    message = str(exc)
    first = message.strip().splitlines()[0] if message.strip() else type(exc).__name__
    if kind == "data_dependent" and stage == "lower" and _unbacked_guard(message):
        return (f"data-dependent: lowering asked whether {_unbacked_guard(message)}, where u… is a value read from "
                "data (an .item(), a mask), and nothing in forward() says what that value can be")
    if kind == "data_dependent" and stage == "lower" and "finite upper bound" in message:
        return ("data-dependent: memory planning needs every tensor's largest size, and a size read from data (an "
                ".item(), a mask) has none: nothing in forward() bounds it")
    if kind == "data_dependent":
        what = "a `while` loop on a tensor" if source and "while " in source else (
            "a tensor value turned into a Python number" if re.search(r"\.item\(\)|int\(|float\(", source or "")
            else "Python control flow on a tensor's value")
        return f"data-dependent: {what} cannot be traced (export needs a Python bool/int where only a symbol exists)"
    if kind == "constraint_violation":
        m = re.search(r"Not all values of (\w+) = .*? satisfy the generated guard (.+)", message)
        if m:
            return f"export added a guard on dynamic dimension '{m.group(1)}' that not every declared size satisfies: " \
                   f"{_readable_guard(m.group(2)).strip()}"
        m = re.search(r"You marked (\w+) as dynamic but your code specialized it to be a constant \((\d+)\)", message)
        if m:
            return f"Dim '{m.group(1)}' was declared dynamic, but forward() only works for the size {m.group(2)}"
        return f"shape constraint violated: {_readable_guard(first)}"
    if kind == "unsupported_operator":
        why = ("has no fake (meta) kernel, so export cannot trace it" if "fake" in message else
               "is not in the Core ATen opset the edge dialect accepts" if "Core ATen" in message else
               "has no kernel in this runtime" if stage == "load" else
               "was neither decomposed nor delegated" if "decomposed or delegated" in message else
               "is not supported")
        return f"unsupported operator {operator or '(unknown)'} {why} (stage: {stage})"
    return f"{type(exc).__name__}: {first}"


# ----- state the program writes ---------------------------------------------------------------------
_GRAD_IN_PLACE = "a leaf Variable that requires grad is being used in an in-place operation"
_WRITE_OF = re.compile(r"target=torch\.ops\.aten\.\w+\.\w+\]\(args = \(%(\w+),")
_MUTATED_CONSTANT = re.compile(r"Constant (\S+) is mutated in the forward method")


def _buffer_name(placeholder: str, exported: Any) -> str:
    """The module's name for the buffer behind an exported program's placeholder (``b_cache`` → ``cache``),
    or the placeholder's own name when the program is not at hand."""
    signature = getattr(exported, "graph_signature", None)
    return (signature.inputs_to_buffers.get(placeholder) if signature is not None else None) or placeholder


def _in_place_writes(exported: Any) -> Iterator[tuple[torch.fx.Node, str]]:
    """The nodes of ``exported``'s graph that write one of its inputs in place, with that input's placeholder."""
    for node in exported.graph.nodes:
        schema = getattr(node.target, "_schema", None)
        if (node.op == "call_function" and schema is not None and schema.is_mutable and node.args
                and isinstance(node.args[0], torch.fx.Node) and node.args[0].op == "placeholder"):
            yield node, node.args[0].name


def written_constants(exported: Any) -> list[str]:
    """The tensor constants of ``exported`` that its graph writes in place, by their names in the module: tensors
    ``forward()`` wrote that export did not find among the module's parameters and buffers."""
    if exported is None:
        return []
    constants = {spec.arg.name: spec.target for spec in exported.graph_signature.input_specs
                 if spec.kind.name == "CONSTANT_TENSOR" and spec.target}
    return list(dict.fromkeys(constants[p] for _, p in _in_place_writes(exported) if p in constants))


def _writer_frame(exported: Any, placeholder: str | None = None, constants: bool = False) -> SourceFrame | None:
    """The user's line that writes ``placeholder`` in place (or, with ``constants``, any tensor constant)."""
    if exported is None:
        return None
    lifted = {spec.arg.name for spec in exported.graph_signature.input_specs if spec.kind.name == "CONSTANT_TENSOR"}
    for node, written in _in_place_writes(exported):
        if written == placeholder or (constants and written in lifted):
            found = _node_frame(node)
            if found is not None:
                return found
    return None


class _StateFinding(NamedTuple):
    summary: str
    fix: str
    frame: SourceFrame | None


def _state_finding(message: str, stage: str, exported: Any) -> _StateFinding | None:
    """What failed, its fix and the user's line, for a failure caused by how ``forward()`` writes its state."""
    if _GRAD_IN_PLACE in message:
        m = _WRITE_OF.search(message)
        what = f"buffer `{_buffer_name(m.group(1), exported)}`" if m else "a buffer"
        return _StateFinding(
            f"forward() writes {what} in place with a value that requires grad (the program was built "
            "with autograd on)",
            "A program for the device needs no autograd. Export and lower inside `with torch.no_grad():`, or call "
            "model.requires_grad_(False) first: the parameters' requires_grad is what makes the written value require "
            "grad, and lowering traces the program again with autograd on, where writing such a value in place into "
            "the buffer is refused. Eager inference gives the same outputs either way.",
            _writer_frame(exported, m.group(1)) if m else None)
    m = _MUTATED_CONSTANT.search(message)
    if m:
        return _StateFinding(
            f"forward() writes in place to `{m.group(1)}`, a tensor attribute that is not a registered "
            "buffer: export made it a constant of the program, and a constant cannot be written",
            f"Register it as a buffer (self.register_buffer(\"{m.group(1)}\", tensor, persistent=False)) so the "
            "program keeps it as state it writes between calls. Then re-export and compare calls in a row with eager, "
            "the state carried on both sides.",
            _writer_frame(exported, constants=True))
    written = written_constants(exported) if stage == "lower" else []
    if written:
        names = ", ".join(f"`{name}`" for name in written)
        them = "a tensor export lifted as a constant" if len(written) == 1 else "tensors export lifted as constants"
        return _StateFinding(
            f"forward() writes in place to {names}, {them} of the program: export did not find "
            f"{'it' if len(written) == 1 else 'them'} among the module's parameters and buffers",
            "State the program writes must be a buffer the module registers and writes through its own attribute "
            "(self.register_buffer, then self.name.copy_(...)). A tensor reached through another object (a cache "
            "object that holds it) is taken as a constant by non-strict export even when the module registers the "
            "same tensor as a buffer; export with strict=True follows that reference back to the buffer "
            "(transformers' static-cache wrapper is such a module: it lowers when exported with strict=True, as "
            "transformers' own recipe does).",
            _writer_frame(exported, constants=True))
    return None


def diagnose_exception(exc: BaseException, stage: str, exported: Any = None) -> Diagnosis:
    """A :class:`Diagnosis` for an exception raised at ``stage`` ("export", "lower" or "load").

    ``exported`` (the ``ExportedProgram``, for a lowering or loading error; by default the one the failing lowering
    was given, :func:`helpers.lowering.exported_of`) lets an unsupported operator, or a write of state, be traced
    back to the line of ``forward()`` that created it.
    """
    from .lowering import exported_of

    exported = exported if exported is not None else exported_of(exc)  # what the failing lowering was given
    exc = getattr(exc, "original", None) or exc  # the stage tag may wrap an exception that has __slots__
    kind = classify(exc)
    message = str(exc)
    operator = _operator(message) if kind == "unsupported_operator" else None
    located = user_frame(exc) or _graph_frame(exported, operator)
    if located is None and stage == "lower" and kind == "data_dependent":  # a guard on a value, asked by lowering
        located = _original_frame(message)
    source = located.source if located else None
    fix = FIXES[kind]
    summary = _summary(kind, exc, source, operator, stage)
    state = _state_finding(message, stage, exported) if kind == "other" else None
    if state is not None:
        summary, fix = state.summary, state.fix
        located = state.frame or located  # the graph's writing line, before a frame of whoever called the pipeline
        source = located.source if located else None
    elif kind == "data_dependent" and stage == "lower" and (_unbacked_guard(message) or "finite upper bound" in message):
        fix = ("A value read from data (.item(), nonzero, a mask) became a size or an index, and lowering asked a "
               "question about it that nothing answers. Right after reading it, promise its range in forward(): "
               "torch._check(k >= lo) and torch._check(k <= hi). Export uses the promises to answer such questions, "
               "and the memory plan reserves the largest size they allow; the device does not check them, so the app "
               "validates the value before the call (lesson 14).")
    elif kind == "data_dependent" and source and "while " in source:
        fix = ("A `while` on a tensor cannot be traced: bound it (a fixed number of steps with torch.where "
               "masking the finished ones) or run the loop in the app, calling the exported step. ") + fix
    return Diagnosis(kind=kind, stage=stage, summary=summary, fix=fix,
                     source_line=source, location=located.location if located else None,
                     path=located.path if located else None, line=located.line if located else None,
                     error_type=type(exc).__name__,
                     message=message, suggested_fixes=_suggested_fixes(message), operator=operator,
                     exported=exported)


def diagnose_failure(exc: BaseException, exported: Any = None) -> Diagnosis | None:
    """The model's :class:`Diagnosis` for an exception from the pipeline, or ``None`` when the exception
    carries no stage (:func:`helpers.lowering.stage_of`): then it is the library's own failure, and the
    caller must not report it as the model's."""
    from .lowering import stage_of

    stage = stage_of(exc)
    if stage is None:
        return None
    return diagnose_exception(exc, stage, exported)


def diagnose_export(model: torch.nn.Module, example_args: Any, dynamic_shapes: Any = None, *,
                    backend: str = "xnnpack", lower: bool = True) -> Diagnosis:
    """Try export (and, with ``lower=True``, lowering and loading); never raise for a failure of the model.

    The model is exported once; that exported program is what is lowered. On success the returned
    diagnosis carries the loaded ``artifact`` (and the ``exported`` program). An exception raised by
    this library itself (not by torch or ExecuTorch on the model) propagates unchanged: it says
    nothing about the model.
    """
    from .lowering import export_methods, lower_exported

    if isinstance(example_args, torch.Tensor):
        example_args = (example_args,)
    example_args = tuple(example_args)
    try:
        with torch.random.fork_rng(devices=[]):  # tracing may draw random numbers: leave the caller's RNG alone
            normalised, exported = export_methods({"forward": (model, example_args, dynamic_shapes)})
    except Exception as exc:  # noqa: BLE001 - diagnosing is the point
        diagnosis = diagnose_failure(exc)
        if diagnosis is None:
            raise
        return diagnosis
    program = exported["forward"]
    if not lower:
        return Diagnosis(kind="ok", stage="export", summary="torch.export succeeded", fix=FIXES["ok"], exported=program)
    try:
        artifact = lower_exported(normalised, exported, backend=backend)
    except Exception as exc:  # noqa: BLE001
        diagnosis = diagnose_failure(exc, program)
        if diagnosis is None:
            raise
        return diagnosis
    d = artifact.delegation()
    return Diagnosis(kind="ok", stage="load", fix=FIXES["ok"], artifact=artifact, exported=program,
                     summary=f"exported, lowered and loaded; {d.summary()}")
