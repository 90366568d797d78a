"""The command line of ``export-doctor`` (``python -m helpers.doctor`` in this checkout): arguments, loading the
model, exit statuses.

:func:`prepare` turns command-line arguments into a model, seeded example inputs and dynamic
shapes (a :class:`Prepared`); :func:`main` runs :func:`helpers.doctor.examine` on them, prints the
report and writes the files asked for (``--report``, ``--json``, ``--junit``, ``--bundle``).
Every bad argument is a :class:`UsageError`: one line on stderr and exit status 2, never a traceback.
:func:`main` is also where the process opts in to :func:`helpers.silence_library_noise`: the library itself
changes no process-wide logging or warning setting.
"""

from __future__ import annotations

import argparse
import ast
import importlib
import importlib.util
import inspect
import math
import os
import re
import sys
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from .._quiet import silence_library_noise
from ..contract import forward_parameters
from ..display import error_line
from ..parity import PositionRange, flat_outputs, value_range_names
from . import github, render
from .examine import call_keeping_state, examine, examine_methods
from .report import EXIT_ERROR, EXIT_PASS, EXIT_USAGE, DoctorReport, ModelRun, program_verdict, runs_verdict
from .spec import FlatSpec, ProgramSpec, SpecError, flatten_program, in_eval_mode

__all__ = ["UsageError", "ExampleSpec", "DimSpec", "Prepared", "parse_example", "parse_dim", "parse_kwarg",
           "parse_operators", "parse_tolerance", "load_model", "load_spec", "load_inputs", "make_examples", "forward_inputs", "build_dynamic_shapes", "integer_highs",
           "prepare", "main", "DEFAULT_INT_HIGH", "DTYPES"]

DEFAULT_INT_HIGH = 10

DTYPES: dict[str, torch.dtype] = {
    "float32": torch.float32, "float": torch.float32, "float16": torch.float16, "half": torch.float16,
    "bfloat16": torch.bfloat16, "float64": torch.float64, "double": torch.float64,
    "int64": torch.int64, "long": torch.int64, "int32": torch.int32, "int": torch.int32, "int16": torch.int16,
    "int8": torch.int8, "uint8": torch.uint8, "bool": torch.bool,
}

DESCRIPTION = ("export doctor: torch.export → lowering → the ExecuTorch runtime → parity with eager on varied "
               "inputs, delegation and memory plan, as one command for an export CI job.")

EPILOG = """\
exit status:
  0  pass: export, lowering and loading succeed, every probe inside the input contract matches eager,
     and every requested check holds (--min-delegated, --max-arena-bytes, --allow-portable,
     --max-subgraphs, --max-pte-bytes, --max-portable-time, --strict, --bundle)
  1  fail: the model does not export / lower / load, a probe inside the contract did not match,
     or a requested check failed
  2  bad arguments (one line on stderr)
  3  internal error of export doctor itself (not a finding about the model); rerun with --traceback
"""


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


def parse_tolerance(flag: str, text: str) -> float | tuple[float, ...]:
    """``1e-4`` (every output) or ``1e-4,1e-2`` (one per output, in their flat order)."""
    parts = [p.strip() for p in text.split(",")]
    try:
        values = [float(p) for p in parts]
    except ValueError:
        raise UsageError(f"{flag} {text!r}: expected a number, or one number per output separated by commas") from None
    if not all(math.isfinite(v) and v >= 0 for v in values):
        raise UsageError(f"{flag} {text!r}: tolerances are finite and not negative")
    return values[0] if len(values) == 1 else tuple(values)


def _check_tolerance_count(flag: str, tolerance: float | tuple[float, ...], outputs: int, where: str) -> None:
    if isinstance(tolerance, tuple) and len(tolerance) != outputs:
        raise UsageError(f"{flag}: {len(tolerance)} values, but {where} returns {outputs} output tensor(s): give one "
                         "value, or one per output")


def parse_value_range(text: str, flag: str = "--value-range") -> tuple[str, tuple[int, int]]:
    """``cache_position=0:31`` → ``("cache_position", (0, 31))``: the values an integer input takes, both included
    (``flag="--positions"``: a :class:`~helpers.parity.PositionRange`, each probe's values one consecutive run)."""
    example = "token_ids=0:255" if flag == "--value-range" else "cache_position=0:31"
    match = re.fullmatch(r"\s*([^=\s]+)\s*=\s*(-?\d+)\s*:\s*(-?\d+)\s*", text)
    if match is None:
        raise UsageError(f"{flag} {text!r}: expected NAME=LOW:HIGH, e.g. {example}")
    low, high = int(match.group(2)), int(match.group(3))
    if low > high:
        raise UsageError(f"{flag} {text!r}: LOW ({low}) is above HIGH ({high})")
    return match.group(1), (PositionRange(low, high) if flag == "--positions" else (low, high))


def parse_ranges(value_ranges: list[str], positions: list[str]) -> dict[str, tuple[int, int]]:
    """``--value-range`` and ``--positions`` as one ``{input: range}`` (an input named twice: a ``UsageError``)."""
    ranges: dict[str, tuple[int, int]] = {}
    for flag, texts in (("--value-range", value_ranges), ("--positions", positions)):
        for text in texts:
            name, value_range = parse_value_range(text, flag)
            if name in ranges:
                raise UsageError(f"{flag} {text!r}: {name!r} already has a range ({_range_flag(ranges[name])} "
                                 f"{name}={ranges[name][0]}:{ranges[name][1]}): give one per input")
            ranges[name] = value_range
    return ranges


def _range_flag(value_range: tuple[int, int]) -> str:
    return "--positions" if isinstance(value_range, PositionRange) else "--value-range"


def _check_value_ranges(ranges: dict[str, tuple[int, int]], inputs: dict[str, list[str]]) -> None:
    """Every name of ``--value-range`` and ``--positions`` must be an integer input (``inputs``: per method, its
    integer inputs)."""
    known = {name for names in inputs.values() for name in names}
    for name, value_range in ranges.items():
        if name not in known:
            have = ", ".join(sorted(known)) or "none"
            raise UsageError(f"{_range_flag(value_range)} {name}=…: no integer input is named {name!r} (integer "
                             f"inputs: {have})")


def parse_operators(text: str) -> tuple[str, ...]:
    """``aten_mean_dim,aten.sum.dim_IntList`` → the delegation report's names (``aten_sum_dim_int_list``: ``.``
    becomes ``_``, CamelCase snake_case); an empty text: no operator."""
    names = [part.strip() for part in text.split(",") if part.strip()]
    out = []
    for name in names:
        op = re.sub(r"(?<=[a-z0-9])([A-Z])", r"_\1", name.replace(".", "_")).lower()
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", op):
            raise UsageError(f"--allow-portable {text!r}: {name!r} is not an operator name such as aten_mean_dim")
        out.append(op)
    return tuple(out)


def parse_kwarg(text: str) -> tuple[str, Any]:
    """``KEY=VALUE`` with VALUE a Python literal (``False``, ``8``, ``'relu'``) or else a plain string."""
    key, sep, value = text.partition("=")
    if not sep or not key.isidentifier():
        raise UsageError(f"--arg {text!r}: expected KEY=VALUE, e.g. --arg use_residual=False")
    try:
        return key, ast.literal_eval(value)
    except (ValueError, SyntaxError):
        return key, value


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
        missing = f"no module named {exc.name!r}" if exc.name else error_line(exc)
        raise UsageError(f"cannot import {where!r}: {missing}") from None
    except Exception as exc:  # noqa: BLE001 - any failure while importing user code is a bad argument
        frames = [f for f in traceback.extract_tb(exc.__traceback__) if Path(f.filename).name.endswith(".py")]
        at = f" ({Path(frames[-1].filename).name}:{frames[-1].lineno})" if frames else ""
        if isinstance(exc, SyntaxError):
            at = f" ({Path(exc.filename or where).name}:{exc.lineno})"
        raise UsageError(f"cannot import {where!r}: {error_line(exc)}{at}") from None
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


def _resolve(target: str, what: str = "FACTORY") -> Any:
    """Import ``MODULE_OR_FILE:NAME`` and return the object it names (``NAME`` may be dotted)."""
    where, sep, attr = target.rpartition(":")
    if not sep or not where or not attr:
        example = "my_model.py:build" if what == "FACTORY" else "my_model.py:export_spec"
        raise UsageError(f"{target!r}: expected MODULE_OR_FILE:{what}, e.g. my_package.models:build_model or "
                         f"{example}")
    module = _import_target(where)
    found: Any = module
    for part in attr.split("."):
        if not hasattr(found, part):
            hint = ", ".join(_candidates(module)[:8])
            raise UsageError(f"{where!r} has no attribute {attr!r}" + (f"; candidates: {hint}" if hint else ""))
        found = getattr(found, part)
    return found


def load_model(target: str, kwargs: dict[str, Any] | None = None) -> torch.nn.Module:
    """Import ``MODULE_OR_FILE:FACTORY`` and build the model (in ``eval()`` mode)."""
    factory = _resolve(target)
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
                             f"failed: {error_line(exc)}") from None
        if not isinstance(model, torch.nn.Module):
            raise UsageError(f"{target} returned a {type(model).__name__}, not a torch.nn.Module")
    return in_eval_mode(model)


# ----- building inputs and dynamic shapes -----------------------------------------------------------
def _smallest_vocabulary(model: torch.nn.Module) -> int:
    """The smallest ``nn.Embedding`` vocabulary in the model (ids stay valid), else :data:`DEFAULT_INT_HIGH`."""
    sizes = [m.num_embeddings for m in model.modules() if isinstance(m, torch.nn.Embedding)]
    return min(sizes) if sizes else DEFAULT_INT_HIGH


def _consuming_vocabularies(model: torch.nn.Module, examples: tuple[torch.Tensor, ...]) -> dict[int, int]:
    """``{input index: vocabulary}`` for the integer inputs that an ``nn.Embedding`` reads directly.

    One eager run with a hook on every embedding: an embedding whose input is the example itself
    (the same storage, e.g. after ``view``) or an exact copy of it (``.long()``) consumes that input.
    Position and token-type embeddings read ids the model builds itself, so they never match.
    """
    found: dict[int, int] = {}
    candidates = {i: t for i, t in enumerate(examples)
                  if isinstance(t, torch.Tensor) and not t.dtype.is_floating_point and t.dtype != torch.bool}
    if not candidates:
        return found

    def hook(module: torch.nn.Module, args: tuple[Any, ...]) -> None:
        inp = args[0] if args else None
        if not isinstance(inp, torch.Tensor) or not isinstance(module, torch.nn.Embedding):
            return
        for i, ex in candidates.items():
            same = inp.untyped_storage().data_ptr() == ex.untyped_storage().data_ptr()
            if not same and inp.numel() == ex.numel() and not inp.dtype.is_floating_point:
                same = torch.equal(inp.reshape(-1).long(), ex.reshape(-1).long())
            if same:
                found[i] = min(found.get(i, module.num_embeddings), module.num_embeddings)

    handles = [m.register_forward_pre_hook(hook) for m in model.modules() if isinstance(m, torch.nn.Embedding)]
    if not handles:
        return found
    try:
        with torch.no_grad():
            model(*[e.clone() if isinstance(e, torch.Tensor) else e for e in examples])
    except Exception:  # noqa: BLE001 - the eager check in prepare() reports a model that cannot run
        return {}
    finally:
        for h in handles:
            h.remove()
    return found


def integer_highs(model: torch.nn.Module, names: list[str], specs: Sequence[ExampleSpec], *,
                  int_high: int | None = None, seed: int = 0) -> list[int | None]:
    """The exclusive upper bound of each integer input's values (None for other inputs).

    In order of precedence: the ``--example``'s own HIGH; ``--int-high``; the vocabulary of the
    ``nn.Embedding`` that reads this input (found by running the model once); 2 (values 0 and 1)
    for an input named like a mask; else the smallest ``nn.Embedding`` vocabulary, else 10.
    """
    fallback = int_high or _smallest_vocabulary(model)
    integer = [not s.dtype.is_floating_point and s.dtype != torch.bool for s in specs]
    consumed: dict[int, int] = {}
    if int_high is None and any(i and s.high is None for i, s in zip(integer, specs)):
        consumed = _consuming_vocabularies(model, make_examples(specs, int_high=fallback, seed=seed))
    out: list[int | None] = []
    for i, (spec, is_int) in enumerate(zip(specs, integer)):
        name = names[i] if i < len(names) else ""
        if not is_int:
            out.append(None)
        elif spec.high is not None:
            out.append(spec.high)
        elif int_high is not None:
            out.append(int_high)
        elif i in consumed:
            out.append(consumed[i])
        elif "mask" in name.lower():
            out.append(2)
        else:
            out.append(fallback)
    return out


def make_examples(specs: Sequence[ExampleSpec], *, int_high: int | Sequence[int | None], seed: int = 0
                  ) -> tuple[torch.Tensor, ...]:
    """Seeded example tensors. Integer inputs take values in [0, high) and contain both 0 and high-1,
    so the probes (which stay inside the example's value range) cover the whole range. ``int_high`` is
    one bound for every integer input or one per input."""
    gen = torch.Generator().manual_seed(seed)
    highs = [int_high] * len(specs) if isinstance(int_high, int) else list(int_high)
    out = []
    for spec, default_high in zip(specs, highs):
        if spec.dtype == torch.bool:
            t = torch.rand(spec.shape, generator=gen) > 0.5
        elif spec.dtype.is_floating_point:
            t = torch.randn(spec.shape, generator=gen).to(spec.dtype)
        else:
            high = spec.high or default_high or DEFAULT_INT_HIGH
            t = torch.randint(0, high, spec.shape, generator=gen, dtype=torch.int64)
            if t.numel() >= 2:
                flat = t.view(-1)
                flat[0], flat[-1] = 0, high - 1
            t = t.to(spec.dtype)
        out.append(t)
    return tuple(out)


def forward_inputs(model: torch.nn.Module) -> tuple[list[str], int]:
    """forward()'s positional parameter names and how many of them are required."""
    params = forward_parameters(model)
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


def load_spec(target: str) -> ProgramSpec:
    """Import ``MODULE_OR_FILE:FUNCTION``, call it, check what it returns and make it flat
    (:mod:`helpers.doctor.spec`): a :class:`~helpers.doctor.spec.ProgramSpec` (its methods, whether there are
    several, the program's ``share_mutable_buffers``). Anything wrong is a :class:`UsageError`."""
    function = _resolve(target, "FUNCTION")
    if not callable(function) or isinstance(function, torch.nn.Module) or inspect.isclass(function):
        raise UsageError(f"--spec {target}: a {type(function).__name__}, not a function returning a spec dict")
    try:
        spec = function()
    except Exception as exc:  # noqa: BLE001 - the user's spec function failing is a bad argument
        frames = [f for f in traceback.extract_tb(exc.__traceback__) if Path(f.filename).name.endswith(".py")]
        at = f" ({Path(frames[-1].filename).name}:{frames[-1].lineno})" if frames else ""
        raise UsageError(f"--spec {target}: calling it failed: {error_line(exc)}{at}") from None
    try:
        return flatten_program(spec, where=f"--spec {target}")
    except SpecError as exc:
        raise UsageError(str(exc)) from None


def _load_input_file(path: str) -> Any:
    if not Path(path).is_file():
        raise UsageError(f"--inputs {path!r}: no such file")
    try:
        return torch.load(path, weights_only=True)
    except Exception as exc:  # noqa: BLE001 - an unreadable file is a bad argument
        raise UsageError(f"--inputs {path!r}: torch.load (weights_only) cannot read it: {error_line(exc)}") from None


def _items(path: str, obj: Any, where: str = "") -> list[Any]:
    if not isinstance(obj, (list, tuple)) or not obj:
        raise UsageError(f"--inputs {path!r}{where}: expected a non-empty list of inputs, got a {type(obj).__name__}")
    return list(obj)


def _positional_inputs(path: str, obj: Any, count: int) -> list[tuple[torch.Tensor, ...]]:
    """``--inputs`` without ``--spec``: a list of forward()'s positional inputs (tuples, or tensors for one input)."""
    out = []
    for i, item in enumerate(_items(path, obj)):
        args = (item,) if isinstance(item, torch.Tensor) else tuple(item) if isinstance(item, (list, tuple)) else None
        if args is None or len(args) != count or not all(isinstance(a, torch.Tensor) for a in args):
            raise UsageError(f"--inputs {path!r}: item {i} is not {count} tensor(s), forward()'s inputs as "
                             "--example gives them")
        out.append(args)
    return out


def load_inputs(path: str, flats: dict[str, FlatSpec], several: bool) -> dict[str, list[tuple[torch.Tensor, ...]]]:
    """``--inputs FILE.pt`` with ``--spec``: each item is ``args`` or ``{"args": ..., "kwargs": ...}`` of the spec's
    structure (for several methods, ``{method: [items]}``), made flat like the spec's own example."""
    obj = _load_input_file(path)
    if several:
        if not isinstance(obj, dict):
            raise UsageError(f"--inputs {path!r}: the spec has several methods, so the file holds a dict "
                             f"{{method: [inputs]}} (methods: {', '.join(flats)})")
        unknown = sorted(set(obj) - set(flats))
        if unknown:
            raise UsageError(f"--inputs {path!r}: no method {', '.join(map(repr, unknown))} in the spec "
                             f"(methods: {', '.join(flats)})")
        per_method = obj
    else:
        per_method = {"forward": obj}
    out: dict[str, list[tuple[torch.Tensor, ...]]] = {}
    for method, items in per_method.items():
        where = f" method {method!r}" if several else ""
        flat = flats[method].model
        out[method] = []
        for i, item in enumerate(_items(path, items, where)):
            args, kwargs = (item.get("args", ()), item.get("kwargs")) if isinstance(item, dict) else (item, None)
            try:
                out[method].append(flat.flatten_inputs(args, kwargs))
            except SpecError as exc:
                raise UsageError(f"--inputs {path!r}{where}: item {i}: {exc}") from None
    return out


@dataclass
class Prepared:
    """A model, its example inputs and dynamic shapes, and the command's options, ready for :func:`examine`."""

    target: str
    model: torch.nn.Module
    example_args: tuple[Any, ...]
    dynamic_shapes: dict[str, Any] | None
    backend: str = "xnnpack"
    seed: int = 0
    atol: float | tuple[float, ...] = 1e-4
    rtol: float | tuple[float, ...] = 1e-4
    report_path: str | None = None
    quiet: bool = False
    json_path: str | None = None
    junit_path: str | None = None
    github: bool = False
    strict: bool = False
    min_delegated: float | None = None
    max_arena_bytes: int | None = None
    allow_portable: tuple[str, ...] | None = None
    max_subgraphs: int | None = None
    max_pte_bytes: int | None = None
    max_portable_time: float | None = None
    pte_path: str | None = None
    pte_bytes: bytes | None = None
    bundle_path: str | None = None
    draft_export: bool = False
    traceback: bool = False
    methods: dict[str, FlatSpec] | None = None  # --spec with {"methods": ...}: every method of the program
    strict_export: bool = False  # --spec with "strict": True (one method)
    share_mutable_buffers: bool = False  # --spec of a program with "share_mutable_buffers": True
    extra_inputs: dict[str, list[tuple[torch.Tensor, ...]]] = field(default_factory=dict)  # --inputs, per method
    value_ranges: dict[str, tuple[int, int]] = field(default_factory=dict)  # --value-range, --positions (PositionRange)

    def examine_options(self) -> dict[str, Any]:
        """The keyword arguments of :func:`examine` these options stand for."""
        return {"backend": self.backend, "target": self.target, "seed": self.seed, "atol": self.atol,
                "rtol": self.rtol, "strict": self.strict, "min_delegated": self.min_delegated,
                "max_arena_bytes": self.max_arena_bytes, "pte": self.pte_bytes, "pte_path": self.pte_path,
                "bundle": self.bundle_path, "draft_export": self.draft_export, "allow_portable": self.allow_portable,
                "max_subgraphs": self.max_subgraphs, "max_pte_bytes": self.max_pte_bytes,
                "extra_inputs": self.extra_inputs.get("forward", []), "max_portable_time": self.max_portable_time,
                "strict_export": self.strict_export, "value_ranges": self.value_ranges}


def command_name() -> str:
    """How this process was started: ``export-doctor`` (the installed command) or ``python -m <package>.doctor``."""
    if Path(sys.argv[0]).name == "export-doctor":
        return "export-doctor"
    return f"python -m {__package__}"


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        raise UsageError(message)


def _parser() -> argparse.ArgumentParser:
    p = _Parser(prog=command_name(), description=DESCRIPTION,
                formatter_class=argparse.RawDescriptionHelpFormatter, epilog=EPILOG)
    p.add_argument("target", metavar="MODULE_OR_FILE:FACTORY", nargs="?",
                   help="e.g. my_package.models:build_model or path/to/model.py:build (a class, a function returning "
                        "an nn.Module, or a module instance); or give --spec instead")
    p.add_argument("--spec", metavar="MODULE_OR_FILE:FUNCTION",
                   help="instead of FACTORY and --example/--dim/--arg: a function returning {'model': nn.Module, "
                        "'args': tuple, 'kwargs': dict, 'dynamic_shapes': ...} as torch.export.export takes them "
                        "(keyword and nested inputs, derived Dims, Dim.AUTO, shared Dims)")
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
                   help="integer example values are drawn from [0, N); default: the vocabulary of the nn.Embedding "
                        "that reads the input, 2 for an input named like a mask, else the smallest nn.Embedding "
                        f"vocabulary, else {DEFAULT_INT_HIGH}")
    p.add_argument("--value-range", action="append", default=[], metavar="NAME=LOW:HIGH",
                   help="the values an integer input takes in the app, both included (token ids 0:VOCAB-1, a decode "
                        "step's position 0:MAX_CACHE_LEN-1; a prompt's positions: --positions): the probes draw that "
                        "input's values from it instead of from the example's own values")
    p.add_argument("--positions", action="append", default=[], metavar="NAME=LOW:HIGH",
                   help="an integer input that holds positions in order, a prompt's cache_position: each probe's "
                        "values are one run of consecutive slots (start, start+1, ...) from LOW to HIGH, both included "
                        "(0:MAX_CACHE_LEN-1), instead of values drawn one by one")
    p.add_argument("--seed", type=int, default=0, help="seed for example and probe values (default 0)")
    p.add_argument("--atol", default="1e-4", metavar="X[,X...]",
                   help="absolute tolerance (scaled by each output's largest value): one for every output, or one "
                        "per output in their flat order (default 1e-4)")
    p.add_argument("--rtol", default="1e-4", metavar="X[,X...]",
                   help="relative tolerance: one, or one per output (default 1e-4)")
    p.add_argument("--strict", action="store_true",
                   help="also fail on probes outside the contract that the runtime runs silently, and on a Dim "
                        "without a max")
    p.add_argument("--min-delegated", type=float, default=None, metavar="PCT",
                   help="fail when less than PCT%% of the graph's nodes are delegated (names each declined "
                        "operator with the partitioner's reason)")
    p.add_argument("--max-arena-bytes", type=int, default=None, metavar="N",
                   help="fail when the memory plan's arena is larger than N bytes")
    p.add_argument("--allow-portable", metavar="OP,OP", default=None,
                   help="the operators that may run on portable kernels (names as the delegation report prints them, "
                        "aten_mean_dim; aten.mean.dim works too); any other one fails, with the partitioner's reason; "
                        "an empty list: every operator must be delegated")
    p.add_argument("--max-subgraphs", type=int, default=None, metavar="N",
                   help="fail when the program has more than N delegated subgraphs (each one a call into the delegate)")
    p.add_argument("--max-pte-bytes", type=int, default=None, metavar="N",
                   help="fail when the .pte is larger than N bytes")
    p.add_argument("--max-portable-time", type=float, default=None, metavar="PCT",
                   help="measure the example's run time in the runtime (ExecuTorch's ETDump profile, median of 7 runs) "
                        "and fail when the operators on portable kernels take more than PCT%% of it")
    p.add_argument("--inputs", metavar="FILE.pt",
                   help="your own inputs, compared with eager after the generated probes and reported apart: "
                        "torch.save of a list, each item forward()'s positional inputs (a tuple, or a tensor for one "
                        "input); with --spec each item is args or {'args': ..., 'kwargs': ...} of the spec's structure, "
                        "and for several methods a dict {method: [items]}")
    p.add_argument("--pte", metavar="FILE.pte",
                   help="examine this shipped .pte against the eager model instead of lowering it here")
    p.add_argument("--bundle", metavar="FILE.bpte",
                   help="write an ExecuTorch BundledProgram: the .pte plus the in-contract probes and eager's "
                        "outputs, for verification on a device")
    p.add_argument("--draft-export", action="store_true",
                   help="also run torch.export.draft_export and list every issue it finds")
    p.add_argument("--report", metavar="out.html", help="also write the report as a standalone HTML file")
    p.add_argument("--json", metavar="FILE", help="also write the report as JSON (see schema_version)")
    p.add_argument("--junit", metavar="FILE", help="also write JUnit XML: one testcase per probe and per check")
    p.add_argument("--github", action="store_true",
                   help="in a GitHub Actions job: also print annotations (::error with the model, method and probe; "
                        "on the offending line when export fails there) and append a Markdown summary to "
                        "$GITHUB_STEP_SUMMARY (verdict, gates, failing probes)")
    p.add_argument("--config", nargs="?", const="pyproject.toml", metavar="PYPROJECT",
                   help="check every model of [tool.export-doctor] in this file (default pyproject.toml): a table per "
                        "model with the options above as keys; --json/--junit/--report/--github then cover them all "
                        "(one JUnit suite per model)")
    p.add_argument("--only", metavar="NAME,NAME", help="with --config: only these models, in this order")
    p.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    p.add_argument("--traceback", action="store_true", help="show the traceback of an internal error")
    return p


def _output_path(flag: str, value: str | None) -> str | None:
    if value is not None and not Path(value).resolve().parent.is_dir():
        raise UsageError(f"{flag} {value!r}: the folder does not exist")
    return value


def prepare(argv: Sequence[str]) -> Prepared:
    """Parse command-line arguments and build model, example inputs and dynamic shapes.

    Raises :class:`UsageError` (one line) for anything wrong with the arguments, including example
    shapes that eager PyTorch itself rejects.
    """
    ns = _parser().parse_args(list(argv))
    if ns.spec is not None:
        given = [flag for flag, used in (("a MODULE:FACTORY", ns.target), ("--example", ns.example), ("--dim", ns.dim),
                                         ("--arg", ns.arg), ("--int-high", ns.int_high is not None)) if used]
        if given:
            raise UsageError(f"--spec gives the model, its inputs and their dynamic shapes: drop {', '.join(given)}")
    elif ns.target is None:
        raise UsageError("give the model: MODULE_OR_FILE:FACTORY with --example (and --dim), or --spec "
                         "MODULE_OR_FILE:FUNCTION")
    examples_spec = [parse_example(e) for e in ns.example]
    dims = [parse_dim(d) for d in ns.dim]
    kwargs = dict(parse_kwarg(a) for a in ns.arg)
    if ns.int_high is not None and ns.int_high < 1:
        raise UsageError("--int-high must be a positive integer")
    if ns.min_delegated is not None and not 0 <= ns.min_delegated <= 100:
        raise UsageError(f"--min-delegated {ns.min_delegated:g}: a percentage from 0 to 100")
    if ns.max_arena_bytes is not None and ns.max_arena_bytes < 0:
        raise UsageError("--max-arena-bytes must be a non-negative number of bytes")
    if ns.max_subgraphs is not None and ns.max_subgraphs < 0:
        raise UsageError("--max-subgraphs must be a non-negative number")
    if ns.max_pte_bytes is not None and ns.max_pte_bytes < 1:
        raise UsageError("--max-pte-bytes must be a positive number of bytes")
    if ns.max_portable_time is not None and not 0 <= ns.max_portable_time <= 100:
        raise UsageError(f"--max-portable-time {ns.max_portable_time:g}: a percentage from 0 to 100")
    allow_portable = None if ns.allow_portable is None else parse_operators(ns.allow_portable)
    value_ranges = parse_ranges(ns.value_range, ns.positions)
    atol, rtol = parse_tolerance("--atol", ns.atol), parse_tolerance("--rtol", ns.rtol)
    if ns.bundle is not None and (isinstance(atol, tuple) or isinstance(rtol, tuple)):
        raise UsageError("--bundle takes one --atol and one --rtol (a bundled test case has one tolerance)")
    for flag, value in (("--report", ns.report), ("--json", ns.json), ("--junit", ns.junit), ("--bundle", ns.bundle)):
        _output_path(flag, value)
    pte_bytes = None
    if ns.pte is not None:
        path = Path(ns.pte)
        if not path.is_file():
            raise UsageError(f"--pte {ns.pte!r}: no such file")
        pte_bytes = path.read_bytes()
        if len(pte_bytes) < 8 or pte_bytes[4:6] != b"ET":
            raise UsageError(f"--pte {ns.pte!r}: not an ExecuTorch program (no 'ET' file identifier)")
    options = {"json_path": ns.json, "junit_path": ns.junit, "github": ns.github, "strict": ns.strict, "min_delegated": ns.min_delegated,
               "max_arena_bytes": ns.max_arena_bytes, "pte_path": ns.pte, "pte_bytes": pte_bytes,
               "bundle_path": ns.bundle, "draft_export": ns.draft_export, "traceback": ns.traceback,
               "allow_portable": allow_portable, "max_subgraphs": ns.max_subgraphs, "max_pte_bytes": ns.max_pte_bytes,
               "max_portable_time": ns.max_portable_time, "value_ranges": value_ranges}
    if ns.spec is not None:
        flats, several, share = load_spec(ns.spec)
        if several:
            given = [flag for flag, used in (("--pte", ns.pte), ("--bundle", ns.bundle),
                                             ("--draft-export", ns.draft_export),
                                             ("--max-portable-time", ns.max_portable_time is not None)) if used]
            if given:
                raise UsageError(f"--spec {ns.spec} has several methods; {', '.join(given)} examine(s) one method "
                                 "(forward): give a spec of that one method")
        for name, flat in flats.items():
            method = f" method {name!r}:" if several else ""
            try:
                with torch.no_grad():
                    outputs = call_keeping_state(flat.model, [e.clone() for e in flat.example_args])
            except Exception as exc:  # noqa: BLE001 - inputs the model cannot take are an argument problem
                raise UsageError(f"--spec {ns.spec}:{method} the model does not run on the spec's inputs in eager "
                                 f"PyTorch: {error_line(exc)}") from None
            for flag, tolerance in (("--atol", atol), ("--rtol", rtol)):
                _check_tolerance_count(flag, tolerance, len(outputs), f"--spec {ns.spec}{method.rstrip(':')}")
        _check_value_ranges(value_ranges, {name: value_range_names(flat.example_args, flat.names)
                                           for name, flat in flats.items()})
        first = next(iter(flats.values()))
        extra = load_inputs(ns.inputs, flats, several) if ns.inputs else {}
        return Prepared(ns.spec, first.model, first.example_args, first.dynamic_shapes, ns.backend, ns.seed, atol,
                        rtol, ns.report, ns.quiet, **options, methods=flats if several else None,
                        extra_inputs=extra, strict_export=first.strict, share_mutable_buffers=share)
    model = load_model(ns.target, kwargs)
    names, required = forward_inputs(model)
    if not examples_spec:
        raise UsageError(f"give one --example per input of forward({', '.join(names)}), e.g. --example 1x3x64x64")
    if not required <= len(examples_spec) <= len(names):
        want = f"{required}" if required == len(names) else f"{required} to {len(names)}"
        raise UsageError(f"forward({', '.join(names)}) takes {want} input(s), but {len(examples_spec)} --example "
                         "were given")
    highs = integer_highs(model, names, examples_spec, int_high=ns.int_high, seed=ns.seed)
    examples = make_examples(examples_spec, int_high=highs, seed=ns.seed)
    dynamic = build_dynamic_shapes(names, examples, dims)
    _check_value_ranges(value_ranges, {"forward": value_range_names(tuple(examples), names)})
    try:
        with torch.no_grad():
            outputs = call_keeping_state(model, [e.clone() for e in examples])
    except Exception as exc:  # noqa: BLE001 - a shape the model cannot take is an argument problem
        shapes = ", ".join(f"{n}={tuple(e.shape)}" for n, e in zip(names, examples))
        raise UsageError(f"the example inputs do not fit {ns.target} in eager PyTorch ({shapes}): "
                         f"{error_line(exc)}") from None
    for flag, tolerance in (("--atol", atol), ("--rtol", rtol)):
        _check_tolerance_count(flag, tolerance, len(flat_outputs(outputs)), ns.target)
    extra = {"forward": _positional_inputs(ns.inputs, _load_input_file(ns.inputs), len(examples))} if ns.inputs else {}
    return Prepared(ns.target, model, examples, dynamic, ns.backend, ns.seed, atol, rtol, ns.report, ns.quiet,
                    **options, extra_inputs=extra)


# ----- the command ---------------------------------------------------------------------------------
def internal_error_line(target: str, stage: str | None, exc: BaseException) -> str:
    """The one stderr line for an internal error (exit status 3)."""
    where = f" during stage '{stage}'" if stage else ""
    return (f"export doctor: internal error of export doctor itself{where}, not a finding about {target}: "
            f"{error_line(exc)} (rerun with --traceback to see where)")


def _write(path: str, text: str, say: Callable[[str], None], what: str) -> None:
    Path(path).write_text(text, encoding="utf-8")
    say(f"{what} written to {path}")


def _append_summary(markdown: str, say: Callable[[str], None]) -> None:
    """Append to the file GitHub names in $GITHUB_STEP_SUMMARY (other steps write theirs to the same file)."""
    summary = os.environ.get("GITHUB_STEP_SUMMARY")
    if not summary:
        say("--github: $GITHUB_STEP_SUMMARY is not set (not a GitHub Actions step), so no job summary was written")
        return
    with open(summary, "a", encoding="utf-8") as f:
        f.write(markdown + "\n")
    say(f"job summary appended to {summary}")


def _github(reports: list[DoctorReport], target: str, say: Callable[[str], None]) -> None:
    """--github: the annotations on stdout (where the runner reads workflow commands), the summary appended."""
    print("\n".join(github.workflow_commands(reports, target)), flush=True)
    _append_summary(github.step_summary(reports, target), say)


def main(argv: Sequence[str] | None = None) -> int:
    """The command: returns the exit status (0 pass, 1 fail, 2 bad arguments, 3 internal error)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] in ("-h", "--help"):
        _parser().print_help()
        return EXIT_PASS
    # A command-line tool owns its process: quiet torch's and ExecuTorch's warnings and timestamped log lines
    # (importing helpers changes nothing global; examine() called from someone else's program keeps theirs).
    silence_library_noise()
    start = time.perf_counter()
    quiet = "--quiet" in argv

    def say(text: str) -> None:
        if not quiet:
            print(f"[doctor {time.perf_counter() - start:5.1f}s] {text}", file=sys.stderr, flush=True)

    try:
        say("loading the model and building example inputs")
        ns = _parser().parse_args(argv)
        if ns.config is not None:
            return _config_run(ns, say)
        if ns.only is not None:
            raise UsageError("--only picks models of --config: give --config too")
        prepared = prepare(argv)
    except UsageError as exc:
        print(f"export doctor: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except Exception as exc:  # noqa: BLE001 - user code's failures are UsageErrors already: this one is ours
        if "--traceback" in argv:
            traceback.print_exc()
        print(internal_error_line(argv[0] if argv else "the model", "preparing the inputs", exc), file=sys.stderr)
        return EXIT_ERROR
    try:
        reports = _examine(prepared, say)
    except Exception as exc:  # noqa: BLE001 - examine() keeps its own failures; this is a last resort
        if prepared.traceback:
            traceback.print_exc()
        print(internal_error_line(prepared.target, None, exc), file=sys.stderr)
        return EXIT_ERROR
    return _finish(reports, prepared, say)


def _examine(prepared: Prepared, say: Callable[[str], None]) -> list[DoctorReport]:
    """The report of one model, or one per method of a program (``--spec`` with several methods)."""
    options = prepared.examine_options()
    if prepared.methods is None:
        return [examine(prepared.model, prepared.example_args, prepared.dynamic_shapes, progress=say, **options)]
    return examine_methods(
        {name: (f.model, f.example_args, f.dynamic_shapes) for name, f in prepared.methods.items()},
        progress=say, extra_inputs=prepared.extra_inputs,
        strict_export={name: f.strict for name, f in prepared.methods.items()},
        share_mutable_buffers=prepared.share_mutable_buffers,
        **{k: options[k] for k in ("backend", "target", "seed", "atol", "rtol", "strict", "min_delegated",
                                   "max_arena_bytes", "allow_portable", "max_subgraphs", "max_pte_bytes",
                                   "value_ranges")})


def _option_flags(parser: argparse.ArgumentParser) -> dict[str, bool]:
    """The command's options, without dashes, and whether each one takes no value (``--strict``)."""
    return {opt[2:]: action.nargs == 0 for action in parser._actions for opt in action.option_strings
            if opt.startswith("--") and opt != "--help"}


def _config_run(ns: argparse.Namespace, say: Callable[[str], None]) -> int:
    """--config: every model of ``[tool.export-doctor]``, each prepared (all of them checked before any runs) and
    examined; one text report each, and one file of each kind asked for on the command line."""
    from .config import RUN_WIDE, ConfigError, read_config

    parser = _parser()
    given = [f"--{flag}" for flag in _option_flags(parser) if flag not in (*RUN_WIDE, "only")
             and getattr(ns, flag.replace("-", "_")) != parser.get_default(flag.replace("-", "_"))]
    if ns.target is not None or given:
        raise UsageError(f"with --config the models and their options are in {ns.config}: drop "
                         f"{', '.join(([ns.target] if ns.target else []) + given)} (or set them in its tables)")
    for flag, value in (("--report", ns.report), ("--json", ns.json), ("--junit", ns.junit)):
        _output_path(flag, value)
    only = [n.strip() for n in (ns.only or "").split(",") if n.strip()]
    try:
        entries = read_config(ns.config, _option_flags(parser), only)
    except ConfigError as exc:
        raise UsageError(str(exc)) from None
    prepared: list[tuple[str, Prepared]] = []
    for entry in entries:
        say(f"model {entry.name}: loading it and building example inputs")
        try:
            prepared.append((entry.name, prepare(list(entry.argv))))
        except UsageError as exc:
            raise UsageError(f"{ns.config} [tool.export-doctor.models.{entry.name}]: {exc}") from None
    runs: list[ModelRun] = []
    for name, model in prepared:
        say(f"model {name}: {model.target}")
        try:
            runs.append(ModelRun(name, model.target, _examine(model, say), model.methods is not None))
        except Exception as exc:  # noqa: BLE001 - examine() keeps its own failures; this is a last resort
            if ns.traceback:
                traceback.print_exc()
            print(internal_error_line(f"{name} ({model.target})", None, exc), file=sys.stderr)
            runs.append(ModelRun(name, model.target, error=exc))
    return _finish_runs(runs, ns, say)


def _finish_runs(runs: list[ModelRun], ns: argparse.Namespace, say: Callable[[str], None]) -> int:
    config = str(ns.config)
    print(render.runs_to_text(runs, config))
    try:
        for path, make, what in ((ns.report, lambda: render.runs_to_html(runs, config), "HTML report"),
                                 (ns.json, lambda: render.runs_to_json(runs, config), "JSON report"),
                                 (ns.junit, lambda: render.runs_to_junit(runs), "JUnit XML")):
            if path:
                _write(path, make(), say, what)
        if ns.github:
            print("\n".join(github.runs_workflow_commands(runs, config)), flush=True)
            _append_summary(github.runs_step_summary(runs, config), say)
    except Exception as exc:  # noqa: BLE001 - failing to write a report is the tool's failure, not the model's
        if ns.traceback:
            traceback.print_exc()
        print(internal_error_line(config, "writing the reports", exc), file=sys.stderr)
        return EXIT_ERROR
    for run in runs:
        for report in run.reports:
            if report.internal_error is not None:
                if ns.traceback:
                    traceback.print_exception(report.internal_error)
                print(internal_error_line(f"{run.name} ({report.target})", report.internal_stage,
                                          report.internal_error), file=sys.stderr)
    verdict, code = runs_verdict(runs)
    say(f"done: {verdict} (exit {code})")
    return code


def _finish(reports: list[DoctorReport], prepared: Prepared, say: Callable[[str], None]) -> int:
    """Print the report, write the files asked for, return the exit status: one report, or one per method of a
    program (``prepared.methods``), each format then the program's."""
    target = prepared.target
    if prepared.methods is None:
        report = reports[0]
        text, html, data, junit = (render.to_text(report), lambda: render.to_html(report, document=True),
                                   lambda: render.to_json(report), lambda: render.to_junit(report))
    else:
        text, html, data, junit = (render.program_to_text(reports, target),
                                   lambda: render.program_to_html(reports, target),
                                   lambda: render.program_to_json(reports, target),
                                   lambda: render.program_to_junit(reports))
    print(text)
    try:
        for path, make, what in ((prepared.report_path, html, "HTML report"), (prepared.json_path, data, "JSON report"),
                                 (prepared.junit_path, junit, "JUnit XML")):
            if path:
                _write(path, make(), say, what)
        if prepared.github:
            _github(reports, target, say)
    except Exception as exc:  # noqa: BLE001 - failing to write a report is the tool's failure, not the model's
        if prepared.traceback:
            traceback.print_exc()
        print(internal_error_line(target, "writing the reports", exc), file=sys.stderr)
        return EXIT_ERROR
    failed = next((r for r in reports if r.internal_error is not None), None)
    if failed is not None and failed.internal_error is not None:
        if prepared.traceback:
            traceback.print_exception(failed.internal_error)
        print(internal_error_line(target, failed.internal_stage, failed.internal_error), file=sys.stderr)
    verdict, code = program_verdict(reports)
    say(f"done: {verdict} (exit {code})")
    return code

