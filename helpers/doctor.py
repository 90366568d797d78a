"""``python -m helpers.doctor``: the diagnosis workflow of the lessons, as a command for an export CI job.

    python -m helpers.doctor MODULE_OR_FILE:FACTORY --example SHAPE[:DTYPE[:HIGH]] ...
        [--dim INPUT:AXIS:NAME:MIN:MAX ...] [--arg KEY=VALUE ...] [--backend xnnpack|portable]
        [--int-high N] [--seed N] [--atol X] [--rtol X] [--report out.html] [--quiet]

It imports the factory (an ``nn.Module`` class, a function returning one, or a module instance),
builds seeded example inputs, and runs the library's pipeline: :func:`helpers.diagnose_export`
(export, lowering, loading) → :func:`helpers.probe_inputs` on the ``.pte``'s input contract →
:func:`helpers.compare` against eager → delegation and memory-plan summary. It prints a report
(verdict first, then the evidence) and can write the same report as HTML.

Exit status: **0** export succeeded and every probe inside the input contract matches eager;
**1** the export failed or a probe inside the contract diverged, was rejected or broke eager;
**2** bad arguments (one line on stderr, never a traceback). Progress goes to stderr.

From Python (a notebook, a test): :func:`prepare` turns command-line arguments into a model and
inputs, :func:`examine` turns a model and inputs into a :class:`DoctorReport`.
"""

from __future__ import annotations

import argparse
import ast
import html
import importlib
import importlib.util
import inspect
import logging
import re
import sys
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

__all__ = ["EXIT_PASS", "EXIT_FAIL", "EXIT_USAGE", "UsageError", "Prepared", "DoctorReport", "prepare", "examine",
           "main"]

EXIT_PASS, EXIT_FAIL, EXIT_USAGE = 0, 1, 2
DEFAULT_INT_HIGH = 10

DTYPES: dict[str, torch.dtype] = {
    "float32": torch.float32, "float": torch.float32, "float16": torch.float16, "half": torch.float16,
    "bfloat16": torch.bfloat16, "float64": torch.float64, "double": torch.float64,
    "int64": torch.int64, "long": torch.int64, "int32": torch.int32, "int": torch.int32, "int16": torch.int16,
    "int8": torch.int8, "uint8": torch.uint8, "bool": torch.bool,
}


class UsageError(ValueError):
    """A bad argument: the message is the one line the command prints before exiting with status 2."""


# ----- parsing the command line ---------------------------------------------------------------------
@dataclass(frozen=True)
class ExampleSpec:
    """One ``--example``: a shape, a dtype and (for integer inputs) the exclusive upper bound of the values."""

    shape: tuple[int, ...]
    dtype: torch.dtype
    high: int | None = None


@dataclass(frozen=True)
class DimSpec:
    """One ``--dim INPUT:AXIS:NAME:MIN:MAX`` (``max`` is None for an unbounded Dim)."""

    text: str
    input: str
    axis: int
    name: str
    min: int
    max: int | None


def parse_example(text: str) -> ExampleSpec:
    """``1x3x64x64``, ``1x16:int64`` or ``1x16:int64:32`` (values in [0, 32))."""
    parts = text.split(":")
    if len(parts) > 3 or not re.fullmatch(r"\d+(x\d+)*", parts[0] or "?"):
        raise UsageError(f"--example {text!r}: expected SHAPE[:DTYPE[:HIGH]] such as 1x3x64x64 or 1x16:int64")
    shape = tuple(int(s) for s in parts[0].split("x"))
    dtype_name = parts[1] if len(parts) > 1 and parts[1] else "float32"
    if dtype_name not in DTYPES:
        raise UsageError(f"--example {text!r}: unknown dtype {dtype_name!r}; use one of "
                         f"{', '.join(sorted(set(DTYPES) - {'float', 'half', 'double', 'long', 'int'}))}")
    dtype = DTYPES[dtype_name]
    high = None
    if len(parts) == 3:
        if dtype.is_floating_point or dtype == torch.bool or not parts[2].isdigit() or int(parts[2]) < 1:
            raise UsageError(f"--example {text!r}: HIGH (a positive integer) only applies to integer dtypes")
        high = int(parts[2])
    return ExampleSpec(shape, dtype, high)


def parse_dim(text: str) -> DimSpec:
    """``x:1:frames:1:32`` or ``ids:1:seq:2:`` (empty MAX: unbounded)."""
    parts = text.split(":")
    if len(parts) != 5:
        raise UsageError(f"--dim {text!r}: expected INPUT:AXIS:NAME:MIN:MAX, e.g. x:1:frames:2:32")
    inp, axis, name, lo, hi = parts
    if not inp:
        raise UsageError(f"--dim {text!r}: INPUT must be an argument name of forward() or its index")
    if not re.fullmatch(r"-?\d+", axis):
        raise UsageError(f"--dim {text!r}: AXIS must be an integer, got {axis!r}")
    if not name.isidentifier():
        raise UsageError(f"--dim {text!r}: NAME must be a Python identifier, got {name!r}")
    if not lo.isdigit():
        raise UsageError(f"--dim {text!r}: MIN must be a non-negative integer, got {lo!r}")
    if hi not in ("", "inf") and not hi.isdigit():
        raise UsageError(f"--dim {text!r}: MAX must be an integer (or empty for no max), got {hi!r}")
    top = None if hi in ("", "inf") else int(hi)
    if top is not None and top <= int(lo):
        raise UsageError(f"--dim {text!r}: MAX must be greater than MIN")
    return DimSpec(text, inp, int(axis), name, int(lo), top)


def parse_kwarg(text: str) -> tuple[str, Any]:
    """``KEY=VALUE`` with VALUE a Python literal (``False``, ``8``, ``'relu'``) or else a plain string."""
    key, sep, value = text.partition("=")
    if not sep or not key.isidentifier():
        raise UsageError(f"--arg {text!r}: expected KEY=VALUE, e.g. --arg use_residual=False")
    try:
        return key, ast.literal_eval(value)
    except (ValueError, SyntaxError):
        return key, value


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}".rstrip(": ")


# ----- loading the model ----------------------------------------------------------------------------
def _import_target(where: str) -> Any:
    looks_like_file = where.endswith(".py") or "/" in where or "\\" in where
    if looks_like_file:
        path = Path(where)
        if not path.is_file():
            raise UsageError(f"cannot import {where!r}: no such file")
        name = "_doctor_" + re.sub(r"\W", "_", path.stem)
        spec = importlib.util.spec_from_file_location(name, path)
        if spec is None or spec.loader is None:
            raise UsageError(f"cannot import {where!r}: not a Python file")
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        sys.path.insert(0, str(path.resolve().parent))
        loader = spec.loader
        run: Callable[[], Any] = lambda: loader.exec_module(module)  # noqa: E731
    else:
        if str(Path.cwd()) not in sys.path and "" not in sys.path:
            sys.path.insert(0, str(Path.cwd()))
        module = None
        run = lambda: importlib.import_module(where)  # noqa: E731
    try:
        result = run()
    except UsageError:
        raise
    except ModuleNotFoundError as exc:
        missing = f"no module named {exc.name!r}" if exc.name else _one_line(exc)
        raise UsageError(f"cannot import {where!r}: {missing}") from None
    except Exception as exc:  # noqa: BLE001 - any failure while importing user code is a bad argument
        frames = [f for f in traceback.extract_tb(exc.__traceback__) if Path(f.filename).name.endswith(".py")]
        at = f" ({Path(frames[-1].filename).name}:{frames[-1].lineno})" if frames else ""
        if isinstance(exc, SyntaxError):
            at = f" ({Path(exc.filename or where).name}:{exc.lineno})"
        raise UsageError(f"cannot import {where!r}: {_one_line(exc)}{at}") from None
    return module if looks_like_file else result


def _candidates(module: Any) -> list[str]:
    out = []
    for name, value in vars(module).items():
        if name.startswith("_"):
            continue
        if inspect.isclass(value) and issubclass(value, torch.nn.Module) and value.__module__ == module.__name__:
            out.append(name)
        elif inspect.isfunction(value) and value.__module__ == module.__name__:
            out.append(name)
    return out


def load_model(target: str, kwargs: dict[str, Any] | None = None) -> torch.nn.Module:
    """Import ``MODULE_OR_FILE:FACTORY`` and build the model (in ``eval()`` mode)."""
    where, sep, attr = target.rpartition(":")
    if not sep or not where or not attr:
        raise UsageError(f"{target!r}: expected MODULE_OR_FILE:FACTORY, e.g. helpers.models:TinyVision or "
                         "my_model.py:build")
    module = _import_target(where)
    factory: Any = module
    for part in attr.split("."):
        if not hasattr(factory, part):
            hint = ", ".join(_candidates(module)[:8])
            raise UsageError(f"{where!r} has no attribute {attr!r}" + (f"; candidates: {hint}" if hint else ""))
        factory = getattr(factory, part)
    if isinstance(factory, torch.nn.Module):
        if kwargs:
            raise UsageError(f"{target} is already a module instance; --arg applies to a class or function")
        model = factory
    elif inspect.isclass(factory) and not issubclass(factory, torch.nn.Module):
        raise UsageError(f"{target} is a class but not a torch.nn.Module subclass")
    elif not callable(factory):
        raise UsageError(f"{target} is a {type(factory).__name__}, not an nn.Module class or a function returning one")
    else:
        try:
            model = factory(**(kwargs or {}))
        except Exception as exc:  # noqa: BLE001
            raise UsageError(f"calling {target}({', '.join(f'{k}={v!r}' for k, v in (kwargs or {}).items())}) "
                             f"failed: {_one_line(exc)}") from None
        if not isinstance(model, torch.nn.Module):
            raise UsageError(f"{target} returned a {type(model).__name__}, not a torch.nn.Module")
    return model.eval()


# ----- building inputs and dynamic shapes -----------------------------------------------------------
def _int_high_default(model: torch.nn.Module) -> int:
    """The smallest ``nn.Embedding`` vocabulary in the model (ids stay valid), else :data:`DEFAULT_INT_HIGH`."""
    sizes = [m.num_embeddings for m in model.modules() if isinstance(m, torch.nn.Embedding)]
    return min(sizes) if sizes else DEFAULT_INT_HIGH


def make_examples(specs: Sequence[ExampleSpec], *, int_high: int, seed: int = 0) -> tuple[torch.Tensor, ...]:
    """Seeded example tensors. Integer inputs take values in [0, high) and contain both 0 and high-1,
    so the probes (which stay inside the example's value range) cover the whole range."""
    gen = torch.Generator().manual_seed(seed)
    out = []
    for spec in specs:
        if spec.dtype == torch.bool:
            t = torch.rand(spec.shape, generator=gen) > 0.5
        elif spec.dtype.is_floating_point:
            t = torch.randn(spec.shape, generator=gen).to(spec.dtype)
        else:
            high = spec.high or int_high
            t = torch.randint(0, high, spec.shape, generator=gen, dtype=torch.int64)
            if t.numel() >= 2:
                flat = t.view(-1)
                flat[0], flat[-1] = 0, high - 1
            t = t.to(spec.dtype)
        out.append(t)
    return tuple(out)


def forward_inputs(model: torch.nn.Module) -> tuple[list[str], int]:
    """forward()'s positional parameter names and how many of them are required."""
    params = [p for p in inspect.signature(model.forward).parameters.values()
              if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    return [p.name for p in params], sum(p.default is p.empty for p in params)


def build_dynamic_shapes(names: list[str], examples: tuple[torch.Tensor, ...], dims: Sequence[DimSpec]
                         ) -> dict[str, dict[int, Any]] | None:
    """``{argument: {axis: Dim}}`` from the ``--dim`` flags; one ``Dim`` object per NAME (shared Dims)."""
    from torch.export import Dim

    if not dims:
        return None
    made: dict[str, tuple[Any, DimSpec, int]] = {}
    out: dict[str, dict[int, Any]] = {}
    for d in dims:
        if d.input.isdigit():
            index = int(d.input)
            if index >= len(examples):
                raise UsageError(f"--dim {d.text!r}: input index {index}, but there are {len(examples)} inputs")
        elif d.input in names[:len(examples)]:
            index = names.index(d.input)
        else:
            raise UsageError(f"--dim {d.text!r}: no input named {d.input!r}; forward() takes "
                             f"{', '.join(names[:len(examples)])}")
        arg = names[index]
        rank = examples[index].dim()
        axis = d.axis + rank if d.axis < 0 else d.axis
        if not 0 <= axis < rank:
            raise UsageError(f"--dim {d.text!r}: {arg} has rank {rank}, so there is no axis {d.axis}")
        size = int(examples[index].shape[axis])
        top = "∞" if d.max is None else d.max
        if not d.min <= size <= (d.max if d.max is not None else size):
            raise UsageError(f"--dim {d.text!r}: the example's {arg} axis {axis} is {size}, outside [{d.min}, {top}]; "
                             "change --example or the range")
        if size < 2:
            raise UsageError(f"--dim {d.text!r}: the example's size on a dynamic axis must be at least 2 "
                             f"(export specializes sizes 0 and 1); it is {size}: change --example")
        if d.name in made:
            dim, first, first_size = made[d.name]
            if (first.min, first.max) != (d.min, d.max):
                raise UsageError(f"--dim {d.text!r}: Dim {d.name!r} is already declared with range "
                                 f"[{first.min}, {first.max if first.max is not None else '∞'}] by {first.text!r}")
            if first_size != size:
                raise UsageError(f"--dim {d.text!r}: Dim {d.name!r} is shared, so the examples must agree on it "
                                 f"({first_size} vs {size})")
        else:
            dim = Dim(d.name, min=d.min, max=d.max) if d.max is not None else Dim(d.name, min=d.min)
            made[d.name] = (dim, d, size)
        if axis in out.setdefault(arg, {}):
            raise UsageError(f"--dim {d.text!r}: {arg} axis {axis} is declared twice")
        out[arg][axis] = dim
    return out


@dataclass
class Prepared:
    """A model, its example inputs and dynamic shapes, ready for :func:`examine`."""

    target: str
    model: torch.nn.Module
    example_args: tuple[Any, ...]
    dynamic_shapes: dict[str, dict[int, Any]] | None
    backend: str = "xnnpack"
    seed: int = 0
    atol: float = 1e-4
    rtol: float = 1e-4
    report_path: str | None = None
    quiet: bool = False


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        raise UsageError(message)


def _parser() -> argparse.ArgumentParser:
    p = _Parser(prog="python -m helpers.doctor", description=__doc__.split("\n\n")[0],
                formatter_class=argparse.RawDescriptionHelpFormatter,
                epilog="exit status: 0 pass, 1 export failed or a probe inside the contract did not match, "
                       "2 bad arguments")
    p.add_argument("target", metavar="MODULE_OR_FILE:FACTORY",
                   help="e.g. helpers.models:TinyVision or path/to/model.py:build (a class, a function returning "
                        "an nn.Module, or a module instance)")
    p.add_argument("--example", action="append", default=[], metavar="SHAPE[:DTYPE[:HIGH]]",
                   help="one per forward() input, in order: 1x3x64x64, 1x16:int64, 1x16:int64:32 "
                        "(integers in [0, HIGH))")
    p.add_argument("--dim", action="append", default=[], metavar="INPUT:AXIS:NAME:MIN:MAX",
                   help="a dynamic axis; INPUT is an argument name or index; the same NAME on two inputs is a "
                        "shared Dim (the axes must be equal); empty MAX means no max")
    p.add_argument("--arg", action="append", default=[], metavar="KEY=VALUE",
                   help="keyword argument for the factory (a Python literal), e.g. use_residual=False")
    p.add_argument("--backend", choices=("xnnpack", "portable"), default="xnnpack")
    p.add_argument("--int-high", type=int, default=None, metavar="N",
                   help="integer example values are drawn from [0, N); default: the smallest nn.Embedding "
                        f"vocabulary in the model, else {DEFAULT_INT_HIGH}")
    p.add_argument("--seed", type=int, default=0, help="seed for example and probe values (default 0)")
    p.add_argument("--atol", type=float, default=1e-4)
    p.add_argument("--rtol", type=float, default=1e-4)
    p.add_argument("--report", metavar="out.html", help="also write the report as a standalone HTML file")
    p.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    p.add_argument("--traceback", action="store_true", help="show the traceback of an internal error")
    return p


def prepare(argv: Sequence[str]) -> Prepared:
    """Parse command-line arguments and build model, example inputs and dynamic shapes.

    Raises :class:`UsageError` (one line) for anything wrong with the arguments, including example
    shapes that eager PyTorch itself rejects.
    """
    ns = _parser().parse_args(list(argv))
    examples_spec = [parse_example(e) for e in ns.example]
    dims = [parse_dim(d) for d in ns.dim]
    kwargs = dict(parse_kwarg(a) for a in ns.arg)
    if ns.int_high is not None and ns.int_high < 1:
        raise UsageError("--int-high must be a positive integer")
    if ns.report and not Path(ns.report).resolve().parent.is_dir():
        raise UsageError(f"--report {ns.report!r}: the folder does not exist")
    model = load_model(ns.target, kwargs)
    names, required = forward_inputs(model)
    if not examples_spec:
        raise UsageError(f"give one --example per input of forward({', '.join(names)}), e.g. --example 1x3x64x64")
    if not required <= len(examples_spec) <= len(names):
        want = f"{required}" if required == len(names) else f"{required} to {len(names)}"
        raise UsageError(f"forward({', '.join(names)}) takes {want} input(s), but {len(examples_spec)} --example "
                         "were given")
    int_high = ns.int_high or _int_high_default(model)
    examples = make_examples(examples_spec, int_high=int_high, seed=ns.seed)
    dynamic = build_dynamic_shapes(names, examples, dims)
    try:
        with torch.no_grad():
            model(*[e.clone() for e in examples])
    except Exception as exc:  # noqa: BLE001 - a shape the model cannot take is an argument problem
        shapes = ", ".join(f"{n}={tuple(e.shape)}" for n, e in zip(names, examples))
        raise UsageError(f"the example inputs do not fit {ns.target} in eager PyTorch ({shapes}): "
                         f"{_one_line(exc)}") from None
    return Prepared(ns.target, model, examples, dynamic, ns.backend, ns.seed, ns.atol, ns.rtol, ns.report, ns.quiet)


# ----- the report ----------------------------------------------------------------------------------
_ROW_COLOURS = {"match": "#d9f2d9", "diverge": "#f4b4b4", "rejected": "#fbd49b", "eager_error": "#d6d6d6",
                "silent": "#e3d3f2", "expected": "#f3f3f3"}


def _row_kind(row: Any) -> str:
    """How a probe reads in the report: a failure inside the contract, a silent run, or expected."""
    if row.within_contract:
        return row.status
    if row.silently_accepted:
        return "silent"
    return "expected"


def _shorten(text: str, limit: int = 150) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[:limit - 1] + "…"


@dataclass
class DoctorReport:
    """Everything ``export doctor`` found about one model: diagnosis, parity, delegation, memory."""

    target: str
    backend: str
    inputs: str
    diagnosis: Any  # helpers.Diagnosis
    parity: Any = None  # helpers.ParityReport
    contract: Any = None  # helpers.InputContract
    delegation: Any = None  # helpers.DelegationReport
    arena_bytes: int | None = None
    pte_bytes: int | None = None
    probes: list[Any] = field(default_factory=list, repr=False)  # helpers.Probe, in the order of parity.rows

    # ----- verdict ---------------------------------------------------------------------------
    def _rows(self, kind: str) -> list[Any]:
        return [r for r in (self.parity.rows if self.parity else []) if _row_kind(r) == kind]

    @property
    def failing_rows(self) -> list[Any]:
        """Probes inside the input contract that did not match eager (diverge, rejected, eager error)."""
        return [r for r in (self.parity.rows if self.parity else []) if r.within_contract and r.status != "match"]

    @property
    def silent_rows(self) -> list[Any]:
        """Probes outside the contract that the runtime ran anyway (a device would too)."""
        return self._rows("silent")

    @property
    def passed(self) -> bool:
        return bool(self.diagnosis.ok and self.parity is not None and self.parity.ok_within_contract)

    @property
    def exit_code(self) -> int:
        return EXIT_PASS if self.passed else EXIT_FAIL

    @property
    def verdict(self) -> str:
        """``pass`` or ``fail`` (what the HTML report's ``data-verdict`` says)."""
        return "pass" if self.passed else "fail"

    @property
    def headline(self) -> str:
        d = self.diagnosis
        if not d.ok:
            return f"the export failed: {d.kind.replace('_', ' ')} (stage: {d.stage})"
        inside = [r for r in self.parity.rows if r.within_contract]
        if not inside:
            return "no probe fell inside the input contract, so parity is unproven"
        bad = self.failing_rows
        if bad:
            kinds = {"diverge": ("diverges", "diverge"), "rejected": ("is rejected", "are rejected"),
                     "eager_error": ("fails in eager", "fail in eager")}
            parts = []
            for status, (one, many) in kinds.items():
                n = sum(r.status == status for r in bad)
                if n:
                    parts.append(f"{n} {one if n == 1 else many}")
            return (f"{len(bad)} of {len(inside)} probes inside the input contract "
                    f"{'does' if len(bad) == 1 else 'do'} not match eager: {', '.join(parts)}")
        text = f"all {len(inside)} probes inside the input contract match eager"
        if self.silent_rows:
            text += f"; {len(self.silent_rows)} outside it run silently on the device"
        return text

    def next_steps(self) -> list[str]:
        """What to do about what was found (the lessons' workflow, shortened)."""
        steps = []
        if not self.diagnosis.ok:
            steps.append(self.diagnosis.fix)
            steps.append("Then run the doctor again: a clean export still has to match eager on varied inputs.")
            return steps
        bad = self.failing_rows
        if any(r.status == "diverge" for r in bad):
            steps.append("The .pte computes something else than eager on inputs it accepts: a Python decision (an "
                         "`if` on a size or a flag, a loop bound) was taken once at export. Find it in forward(); "
                         "make it torch.where / torch.cond, hoist it into the app, or narrow the Dim so the "
                         "contract excludes those sizes.")
        if any(r.status == "rejected" for r in bad):
            steps.append("The runtime refuses inputs the contract allows: read its message in the table (memory "
                         "plan capacity, a kernel's own limit) and narrow the Dim or fix the operator.")
        if any(r.status == "eager_error" for r in bad):
            steps.append("Eager PyTorch itself fails inside the declared range: narrow the Dim to the sizes "
                         "forward() supports.")
        if self.silent_rows:
            steps.append("ExecuTorch does not check a Dim's min, shared Dims, or sizes that fit the memory plan: "
                         "check inputs on the host before the device (PteArtifact.run / InputContract.check), or "
                         "pad/resize them there.")
        if self.delegation is not None and self.delegation.portable_nodes and self.backend == "xnnpack":
            steps.append(f"{self.delegation.portable_nodes} node(s) run on portable kernels "
                         f"({', '.join(self.delegation.portable_ops())}); a dynamic axis or a torch.cond region "
                         "can make the delegate decline: compare with a static export if speed matters.")
        return steps

    # ----- text --------------------------------------------------------------------------------
    def to_text(self) -> str:
        d = self.diagnosis
        lines = [f"export doctor · {self.target} · backend {self.backend}",
                 f"verdict: {self.verdict.upper()} (exit {self.exit_code}) — {self.headline}",
                 f"inputs: {self.inputs}", ""]
        if not d.ok:
            lines.append(f"1. export      ✗ {d.summary}")
            if d.source_line:
                lines.append(f"   offending line: {d.source_line}" + (f"   [{d.location}]" if d.location else ""))
            if d.operator:
                lines.append(f"   operator: {d.operator}")
            for fix in d.suggested_fixes:
                lines.append(f"   torch suggests: {fix}")
            lines.append("   (nothing was lowered, so there is no parity, delegation or memory plan to report)")
        else:
            lines.append("1. export      ✓ torch.export, lowering and loading in the runtime succeeded")
            lines.append(f"2. contract    {self.contract.signature()}")
            for name, axes in self.contract.ties.items():
                if len(axes) > 1:
                    lines.append(f"              Dim {name} ties {', '.join(f'{i}[{a}]' for i, a in axes)} (must be equal)")
            lines.append(f"3. parity      {self.parity.summary()}")
            groups = [("diverge", "✗ diverge inside the contract"),
                      ("rejected", "✗ rejected by the runtime inside the contract"),
                      ("eager_error", "✗ eager PyTorch fails inside the contract"),
                      ("silent", "! outside the contract, yet the runtime ran them (a device would too)"),
                      ("expected", "· outside the contract and refused (expected)")]
            for kind, title in groups:
                rows = self._rows(kind)
                if not rows:
                    continue
                lines.append(f"   {title}:")
                for r in rows:
                    lines.append(f"     - {r.label} {r.shapes}: {self._row_detail(r)}")
            matched = sum(r.status == "match" and r.within_contract for r in self.parity.rows)
            lines.append(f"   ✓ {matched} probe(s) inside the contract match eager")
            dl = self.delegation
            lines.append(f"4. delegation  {dl.delegated_nodes}/{dl.delegated_nodes + dl.portable_nodes} nodes on "
                         f"{self.backend} ({dl.coverage:.0%}) in {dl.delegated_subgraphs} subgraph(s)"
                         + (f"; portable: {', '.join(dl.portable_ops())}" if dl.portable_nodes else ""))
            for note in dl.notes:
                lines.append(f"              {note}")
            lines.append(f"5. memory      arena {self.arena_bytes:,} bytes (planned for each Dim's max) · "
                         f".pte {self.pte_bytes:,} bytes")
        steps = self.next_steps()
        if steps:
            lines.append("")
            lines.append("next steps:")
            lines += [f"  - {s}" for s in steps]
        return "\n".join(lines)

    @staticmethod
    def _row_detail(r: Any) -> str:
        from .parity import format_diff

        if r.status == "diverge":
            diff = f"max |Δ| = {format_diff(r.max_abs_diff)}" if r.max_abs_diff is not None else ""
            text = "; ".join(t for t in (diff, r.runtime_message) if t)
        elif r.status == "rejected":
            text = f"runtime: {r.runtime_message.split('; ')[0]}"
        elif r.status == "eager_error":
            text = f"eager: {r.eager_message}"
        else:
            text = "matches eager"
        if not r.within_contract and r.silently_accepted:
            text += f" — contract: {r.contract_message}"
        return _shorten(text)

    def __str__(self) -> str:
        return self.to_text()

    def __repr__(self) -> str:
        return f"<DoctorReport {self.target}: {self.verdict.upper()} (exit {self.exit_code}) — {self.headline}>"

    # ----- HTML --------------------------------------------------------------------------------
    def to_html(self, document: bool = False) -> str:
        """The report as HTML: a fragment (for a notebook) or, with ``document=True``, a standalone page.

        The verdict is in the element with class ``exportlab-verdict`` (``data-verdict`` pass/fail,
        ``data-exit-code``); each probe row has ``data-status`` and ``data-within-contract``.
        """
        e = html.escape
        d = self.diagnosis
        colour = "#2e7d32" if self.passed else "#c62828"
        parts = [f"<div class='exportlab-doctor' data-verdict='{self.verdict}' data-exit-code='{self.exit_code}'>",
                 f"<div style='font-size:110%'><span class='exportlab-verdict' data-verdict='{self.verdict}' "
                 f"data-exit-code='{self.exit_code}' style='background:{colour};color:white;padding:2px 8px;"
                 f"border-radius:4px;font-weight:bold'>{self.verdict.upper()} · exit {self.exit_code}</span> "
                 f"<b>{e(self.headline)}</b></div>",
                 f"<p><code>{e(self.target)}</code> · backend <code>{e(self.backend)}</code> · inputs "
                 f"<code>{e(self.inputs)}</code></p>",
                 "<h4>1 · export</h4>", d._repr_html_()]
        if d.ok:
            parts += ["<h4>2 · input contract of the .pte</h4>", self.contract._repr_html_(),
                      f"<h4>3 · parity with eager</h4><p>{e(self.parity.summary())}</p>", self._probes_html(),
                      "<h4>4 · delegation</h4>", self.delegation._repr_html_(),
                      f"<h4>5 · memory</h4><p>memory-plan arena <b>{self.arena_bytes:,} bytes</b> (planned for each "
                      f"Dim's max) · .pte {self.pte_bytes:,} bytes</p>"]
        steps = self.next_steps()[0 if d.ok else 1:]  # a failed export's fix is already in the table above
        if steps:
            parts.append("<h4>next steps</h4><ul>" + "".join(f"<li>{e(s)}</li>" for s in steps) + "</ul>")
        parts.append("</div>")
        body = "".join(parts)
        if not document:
            return body
        return ("<!doctype html><html><head><meta charset='utf-8'>"
                f"<title>export doctor: {e(self.target)} — {self.verdict}</title>"
                "<style>body{font-family:sans-serif;max-width:70em;margin:1em auto}table{border-collapse:collapse}"
                "td,th{border:1px solid #ccc;padding:2px 6px;text-align:left}</style></head><body>"
                f"<h2>export doctor</h2>{body}</body></html>\n")

    def _probes_html(self) -> str:
        from .parity import format_diff

        e = html.escape
        legend = {"match": "match", "diverge": "diverges inside the contract", "rejected": "rejected inside the contract",
                  "eager_error": "eager fails", "silent": "outside the contract, run anyway",
                  "expected": "outside the contract, refused (expected)"}
        rows = []
        for r in self.parity.rows:
            kind = _row_kind(r)
            note = f"eager: {r.eager_message}" if r.status == "eager_error" else r.runtime_message
            if not r.within_contract:
                note = (note + " — " if note else "") + f"contract: {r.contract_message}"
            diff = format_diff(r.max_abs_diff) if r.status in ("match", "diverge") else "—"
            rows.append(f"<tr class='exportlab-probe' data-status='{r.status}' data-kind='{kind}' "
                        f"data-within-contract='{'yes' if r.within_contract else 'no'}' "
                        f"style='background:{_ROW_COLOURS[kind]}'><td>{e(r.label)}</td><td style='white-space:nowrap'><code>{e(r.shapes)}</code>"
                        f"</td><td><b>{e(r.status)}</b></td><td>{'yes' if r.within_contract else '<b>no</b>'}</td>"
                        f"<td>{diff}</td><td style='font-size:85%'>{e(_shorten(note, 220))}</td></tr>")
        keys = "".join(f"<span style='background:{_ROW_COLOURS[k]};padding:1px 6px;margin-right:4px'>{e(v)}</span>"
                       for k, v in legend.items())
        return (f"<p style='font-size:85%'>{keys}</p><table class='exportlab-probes'><tr><th>probe</th><th>shapes</th>"
                "<th>status</th><th>in contract</th><th>max |Δ|</th><th>runtime / eager / contract message</th></tr>"
                + "".join(rows) + "</table>")

    def _repr_html_(self) -> str:
        return self.to_html()


# ----- the pipeline --------------------------------------------------------------------------------
def _describe_inputs(model: torch.nn.Module, args: tuple[Any, ...], dynamic: Any) -> str:
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
                hi = "∞" if getattr(dim, "max", None) is None or int(dim.max) > 2**31 else dim.max
                axes.append(f"{dim.__name__}∈[{dim.min},{hi}] (example {size})")
            else:
                axes.append(str(int(size)))
        parts.append(f"{name}: {str(a.dtype).replace('torch.', '')}[{', '.join(axes)}]")
    return ", ".join(parts)


def examine(model: torch.nn.Module, example_args: Any, dynamic_shapes: Any = None, *, backend: str = "xnnpack",
            target: str | None = None, seed: int = 0, atol: float = 1e-4, rtol: float = 1e-4,
            progress: Callable[[str], None] | None = None) -> DoctorReport:
    """Run the doctor's pipeline on a model and return the :class:`DoctorReport` (never raises for a
    failing export; the report says what failed and where)."""
    # torch.cond runs through Dynamo in eager mode; on a probe shape the model cannot take, torch logs the
    # failed fake-tensor trace at ERROR level (timestamped) before raising. compare() records the error;
    # the log line is noise, so logging is paused while the pipeline runs.
    logging.disable(logging.ERROR)
    try:
        return _examine(model, example_args, dynamic_shapes, backend=backend, target=target, seed=seed, atol=atol,
                        rtol=rtol, progress=progress)
    finally:
        logging.disable(logging.NOTSET)


def _examine(model: torch.nn.Module, example_args: Any, dynamic_shapes: Any, *, backend: str, target: str | None,
             seed: int, atol: float, rtol: float, progress: Callable[[str], None] | None) -> DoctorReport:
    from . import compare, diagnose_export, probe_inputs

    say = progress or (lambda _text: None)
    if isinstance(example_args, torch.Tensor):
        example_args = (example_args,)
    example_args = tuple(example_args)
    target = target or type(model).__name__
    inputs = _describe_inputs(model, example_args, dynamic_shapes)
    say(f"diagnose_export: torch.export, lowering to {backend}, loading the .pte")
    diagnosis = diagnose_export(model, example_args, dynamic_shapes, backend=backend)
    if not diagnosis.ok:
        say(f"export failed ({diagnosis.kind})")
        return DoctorReport(target, backend, inputs, diagnosis)
    art = diagnosis.artifact
    contract = art.input_contract()
    probes = probe_inputs(example_args, dynamic_shapes, seed=seed, model=model, contract=contract)
    say(f"compare: {len(probes)} probes, eager vs the ExecuTorch runtime")
    parity = compare(model, art, probes, atol=atol, rtol=rtol)
    say("delegation and memory plan")
    return DoctorReport(target, backend, inputs, diagnosis, parity, contract, art.delegation(),
                        art.planned_memory_bytes(), art.nbytes, probes)


# ----- the command ---------------------------------------------------------------------------------
def _import_runtime_quietly() -> None:
    """Import ExecuTorch with logging switched off: torch logs a deprecation line (torchao registers an
    Enum with pytree) through a handler bound to the real stderr, which ``captured_output`` cannot catch."""
    from ._quiet import import_executorch_quietly

    logging.disable(logging.WARNING)
    try:
        import_executorch_quietly()
    finally:
        logging.disable(logging.NOTSET)


def main(argv: Sequence[str] | None = None) -> int:
    """The command: returns the exit status (0 pass, 1 fail, 2 bad arguments)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] in ("-h", "--help"):
        _parser().print_help()
        return EXIT_PASS
    start = time.perf_counter()
    quiet = "--quiet" in argv

    def say(text: str) -> None:
        if not quiet:
            print(f"[doctor {time.perf_counter() - start:5.1f}s] {text}", file=sys.stderr, flush=True)

    try:
        say("loading the model and building example inputs")
        prepared = prepare(argv)
    except UsageError as exc:
        print(f"export doctor: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    try:
        say("importing the ExecuTorch runtime")
        _import_runtime_quietly()
        report = examine(prepared.model, prepared.example_args, prepared.dynamic_shapes, backend=prepared.backend,
                         target=prepared.target, seed=prepared.seed, atol=prepared.atol, rtol=prepared.rtol,
                         progress=say)
    except Exception as exc:  # noqa: BLE001 - a crash inside the pipeline is a failed check, in one line
        if "--traceback" in argv:
            traceback.print_exc()
        print(f"export doctor: internal error while examining {prepared.target}: {_one_line(exc)} "
              "(--traceback shows where)", file=sys.stderr)
        return EXIT_FAIL
    print(report.to_text())
    if prepared.report_path:
        Path(prepared.report_path).write_text(report.to_html(document=True), encoding="utf-8")
        say(f"HTML report written to {prepared.report_path}")
    say(f"done: {report.verdict} (exit {report.exit_code})")
    return report.exit_code


if __name__ == "__main__":
    sys.exit(main())
