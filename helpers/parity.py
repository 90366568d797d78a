"""Output parity between eager PyTorch and the ``.pte``, over a *varied* set of inputs.

One example input proves almost nothing: a silently specialized program matches eager on
exactly the inputs it was traced with. :func:`probe_inputs` builds a varied set (signs,
scales, zeros, extremes, and every dynamic axis at its min, max, middle and one step beyond
each bound, static axes nudged), and :func:`compare` runs eager and the *raw* runtime
(:meth:`PteArtifact.run_raw`: no host-side contract check) on each, classifying every row as
``match``, ``diverge``, ``rejected`` (the runtime refused it), ``refused`` (refused on the host
before the runtime, because the runtime would hand it to the delegate as undefined behaviour) or
``eager_error``, and noting whether the input was inside the export contract.
"""

from __future__ import annotations

import contextlib
import copy
import html
import logging
import math
import re
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import sympy
import torch

from .artifact import HostRefusedError, PteArtifact, RuntimeRejectedError
from .contract import InputContract, forward_parameter_names, user_dim_specs

__all__ = ["Probe", "PositionRange", "probe_inputs", "ParityRow", "ParityReport", "ParityGroup", "compare", "check_one", "STATUSES",
           "STATUS_WORDS", "flat_outputs", "difference", "Tolerance"]

STATUSES = ("match", "diverge", "rejected", "refused", "eager_error")
STATUS_WORDS = {"match": "match", "diverge": "diverge", "rejected": "rejected by the runtime",
                "refused": "refused on the host", "eager_error": "eager errors"}


@dataclass(frozen=True)
class Probe:
    """One test input: a label saying what it exercises, and the positional arguments."""

    label: str
    args: tuple[Any, ...]

    def shapes(self) -> str:
        return ", ".join(str(tuple(a.shape)) if isinstance(a, torch.Tensor) else repr(a) for a in self.args)


class PositionRange(NamedTuple):
    """The value range of an input that holds positions in order, a prompt's ``cache_position``: each call's values
    are one run of consecutive slots, ``start, start + 1, …`` along its last axis, from ``low`` to ``high`` (both
    included). A plain ``(low, high)`` draws every value on its own, which a cache that writes a call's tokens from
    its first position on cannot take: ``[31, 31, 31, 31]`` asks it for slots 31 to 34."""

    low: int
    high: int


# ----- probe generation ---------------------------------------------------------------------------
def _run_of_positions(shape: tuple[int, ...], positions: PositionRange, where: str, gen: torch.Generator) -> torch.Tensor:
    """``start, start + 1, …`` along the last axis of ``shape`` (every row the same run), inside ``positions``
    when the run fits: from ``low`` for ``where`` "zeros" or "lowest", ending at ``high`` for "extremes" or
    "highest", else from a random start. A run longer than the range starts at ``low`` and goes past ``high``."""
    n = shape[-1] if shape else 1
    low, high = positions
    last_start = max(low, high - n + 1)
    if where in ("zeros", "lowest"):
        start = low
    elif where in ("extremes", "highest"):
        start = last_start
    else:
        start = int(torch.randint(low, last_start + 1, (1,), generator=gen))
    run = start + torch.arange(n)
    return run.expand(shape).clone() if shape else run[0].clone()


def _values_like(t: torch.Tensor, shape: tuple[int, ...], kind: str, gen: torch.Generator,
                 value_range: tuple[int, int] | None = None) -> torch.Tensor:
    """A tensor of ``shape`` shaped like example ``t`` (same dtype; integers in ``value_range``, inclusive, or else in
    the example's own range)."""
    if t.dtype == torch.bool:
        if kind == "zeros":
            return torch.zeros(shape, dtype=torch.bool)
        if kind == "ones":
            return torch.ones(shape, dtype=torch.bool)
        return torch.rand(shape, generator=gen) > 0.5
    if not t.dtype.is_floating_point:
        # Integers are usually indices (token ids, positions): stay inside the range they may take.
        if isinstance(value_range, PositionRange):
            return _run_of_positions(shape, value_range, kind, gen).to(t.dtype)
        if value_range is not None:
            lo, hi = value_range
        else:
            lo = int(t.min()) if t.numel() else 0
            hi = int(t.max()) if t.numel() else 1
        if kind == "zeros":
            return torch.full(shape, lo, dtype=t.dtype)
        if kind == "extremes":
            return torch.where(torch.rand(shape, generator=gen) > 0.5, torch.tensor(hi), torch.tensor(lo)).to(t.dtype)
        return torch.randint(lo, hi + 1, shape, generator=gen, dtype=torch.int64).to(t.dtype)
    base = torch.randn(shape, generator=gen, dtype=torch.float32)
    values = {
        "random": base,
        "positive": base.abs() + 0.1,
        "negative": -(base.abs() + 0.1),
        "zeros": torch.zeros(shape),
        "ones": torch.ones(shape),
        "large": base * 1e3,
        "small": base * 1e-3,
        "extremes": torch.where(torch.rand(shape, generator=gen) > 0.5, torch.tensor(1e4), torch.tensor(-1e4)),
    }[kind]
    return values.to(t.dtype)


def _same_shape_args(example: tuple[Any, ...], shapes: list[tuple[int, ...] | None], kind: str,
                     gen: torch.Generator, ranges: Sequence[tuple[int, int] | None] = ()) -> tuple[Any, ...]:
    out = []
    for i, (arg, shape) in enumerate(zip(example, shapes)):
        if isinstance(arg, torch.Tensor) and shape is not None:
            out.append(_values_like(arg, shape, kind, gen, ranges[i] if i < len(ranges) else None))
        else:
            out.append(arg)
    return tuple(out)


def _identity(value: int) -> int:
    return value


def _root_example(fn: Any, size: int) -> int:
    """The root value that gives ``size`` through a derived Dim's ``fn`` (first match), else ``size``."""
    for value in range(size + 1):
        try:
            if int(fn(value)) == size:
                return value
        except Exception:  # noqa: BLE001 - a derived expression that rejects this value
            continue
    return size


def _axis_groups(example: tuple[Any, ...], dynamic_shapes: Any, param_names: list[str] | None
                 ) -> tuple[dict[str, dict[str, Any]], set[tuple[int, int]]]:
    """Group dynamic axes by their root Dim (shared and derived Dims vary together).

    Each group holds ``axes`` as ``(input, axis, size_of)`` where ``size_of(root_value)`` gives
    the axis size (identity for a plain Dim, the derived expression for e.g. ``8*chunk``).
    """
    specs = user_dim_specs(param_names, len(example), dynamic_shapes)
    groups: dict[str, dict[str, Any]] = {}
    dynamic_axes: set[tuple[int, int]] = set()
    for i, (arg, spec) in enumerate(zip(example, specs)):
        if not isinstance(arg, torch.Tensor):
            continue
        for axis, dim in spec.items():
            if dim is None or isinstance(dim, int):
                continue
            if axis < 0:
                axis += arg.dim()
            dynamic_axes.add((i, axis))
            size = int(arg.shape[axis])
            root = getattr(dim, "root", None)
            if root is not None:  # a derived Dim moves with its root
                fn = getattr(dim, "fn", None) or _identity
                key = getattr(root, "__name__", None) or f"input{i}.shape[{axis}]"
                g = groups.setdefault(key, {"axes": [], "min": getattr(root, "min", None),
                                            "max": getattr(root, "max", None), "example": _root_example(fn, size)})
                g["axes"].append((i, axis, fn))
                continue
            key = getattr(dim, "__name__", None) or f"input{i}.shape[{axis}]"
            g = groups.setdefault(key, {"axes": [], "example": size})
            g["min"], g["max"], g["example"] = getattr(dim, "min", None), getattr(dim, "max", None), size
            g["axes"].append((i, axis, _identity))
    return groups, dynamic_axes


def _finite(value: Any) -> int | None:
    try:
        v = int(value)
    except (TypeError, ValueError, OverflowError):
        return None
    return v if v < 2**31 else None


def probe_inputs(example_args: Any, dynamic_shapes: Any = None, *, seed: int = 0,
                 model: torch.nn.Module | None = None, contract: InputContract | None = None,
                 value_ranges: Mapping[str, tuple[int, int]] | None = None) -> list[Probe]:
    """A varied, deterministic input set around ``example_args``.

    - values at the example's shapes: the example itself, random, positive, negative, zeros,
      ones, large, small, extremes (integer inputs stay inside the example's value range);
    - every dynamic axis (axes sharing a ``Dim`` move together): min, middle, max, and
      min-1 / max+1 (outside the contract on purpose);
    - every static axis nudged by +1 and -1 (outside the contract on purpose).

    ``dynamic_shapes`` are given as to ``torch.export.export``; when it is a dict that does not
    name every argument, pass ``model=`` so its keys can be matched to ``forward()``. Pass
    ``contract=artifact.input_contract()`` to probe the ranges export actually assumed (e.g. a
    ``Dim.AUTO`` that export narrowed) instead of the declared ones.

    ``value_ranges``: ``{input name: (low, high)}``, the values an integer input takes in the app, both ends
    included (token ids ``(0, vocab - 1)``, positions ``(0, max_cache_len - 1)``); the generated values of that input
    are drawn from it instead of from the example's own range, and two more probes hold it at each end. Names as
    :func:`value_range_names` gives them. A :class:`PositionRange` range gives each probe one run of consecutive values
    instead (a prompt's positions), inside the range where the probe's length allows: from its low end, up to its
    high end, or from a random start.
    """
    if isinstance(example_args, torch.Tensor):
        example_args = (example_args,)
    example = tuple(example_args)
    gen = torch.Generator().manual_seed(seed)
    base_shapes = [tuple(a.shape) if isinstance(a, torch.Tensor) else None for a in example]
    if contract is not None:
        arg_names: list[str] | None = [spec.name for spec in contract.inputs]
    else:
        arg_names = forward_parameter_names(model) if model is not None else None
    ranges = value_ranges_by_position(example, arg_names, value_ranges or {})
    probes = [Probe("example", example)]
    for kind in ("random", "positive", "negative", "zeros", "ones", "large", "small", "extremes"):
        probes.append(Probe(f"values: {kind}", _same_shape_args(example, base_shapes, kind, gen, ranges)))
    for i, value_range in enumerate(ranges):  # each end of a given range, the other inputs random
        if value_range is None:
            continue
        who = arg_names[i] if arg_names is not None and i < len(arg_names) else f"input {i}"
        for end, value in zip(("lowest", "highest"), value_range):
            held = list(_same_shape_args(example, base_shapes, "random", gen, ranges))
            example_shape = tuple(example[i].shape)
            if isinstance(value_range, PositionRange):
                held[i] = _run_of_positions(example_shape, value_range, end, gen).to(example[i].dtype)
                label = f"values: {who} {'from' if end == 'lowest' else 'up to'} its {end}, {value}"
            else:
                held[i] = torch.full(example_shape, value, dtype=example[i].dtype)
                label = f"values: {who} at its {end}, {value}"
            probes.append(Probe(label, tuple(held)))

    if contract is not None:
        groups, dynamic_axes = _groups_from_contract(contract, example)
    else:
        names = forward_parameter_names(model) if model is not None else None
        groups, dynamic_axes = _axis_groups(example, dynamic_shapes, names)
    for name, g in groups.items():
        lo = _finite(g["min"]) if g["min"] is not None else 0
        lo = max(lo or 0, 0)
        hi = _finite(g["max"])
        if hi is None:
            hi = max(g["example"] * 2, lo + 1)
            sizes = [(lo, "min"), ((lo + hi) // 2, "middle"), (hi, "2× example (no max)")]
        else:
            sizes = [(lo, "min"), ((lo + hi) // 2, "middle"), (hi, "max"), (hi + 1, "max+1, outside")]
        if lo - 1 >= 0:
            sizes.append((lo - 1, "min-1, outside"))
        seen = set()
        for size, why in sizes:
            if size in seen:
                continue
            seen.add(size)
            shapes = _resized(base_shapes, g["axes"], size)
            if shapes is None:
                continue
            args = _same_shape_args(example, shapes, "random", gen, ranges)
            probes.append(Probe(f"{name} = {size} ({why})", args))
        plain = [a for a in g["axes"] if a[2] is _identity]
        if len(plain) >= 2:
            # Axes tied by one Dim, one step apart: the device runtime does not check the tie.
            middle = (lo + hi) // 2
            shapes = _resized(base_shapes, g["axes"], middle)
            i, axis, _ = plain[-1]
            if shapes is not None:
                shapes[i] = tuple(middle + 1 if k == axis else n for k, n in enumerate(shapes[i]))
                probes.append(Probe(f"{name} differs across tied axes: {middle} vs {middle + 1} (outside)",
                                    _same_shape_args(example, shapes, "random", gen, ranges)))

    for i, arg in enumerate(example):
        if not isinstance(arg, torch.Tensor):
            continue
        who = arg_names[i] if arg_names is not None and i < len(arg_names) else f"input {i}"
        for axis in range(arg.dim()):
            if (i, axis) in dynamic_axes:
                continue
            for delta in (+1, -1):
                size = int(arg.shape[axis]) + delta
                if size < 0:
                    continue
                shapes = list(base_shapes)
                shape = list(arg.shape)
                shape[axis] = size
                shapes[i] = tuple(shape)
                label = f"{who} axis {axis} = {size} (static {arg.shape[axis]}{delta:+d}, outside)"
                probes.append(Probe(label, _same_shape_args(example, shapes, "random", gen, ranges)))
    return probes


def value_range_names(example: tuple[Any, ...], arg_names: Sequence[str] | None) -> list[str]:
    """The inputs a value range can be given for: the integer tensors, by name (``input i`` without names)."""
    return [arg_names[i] if arg_names is not None and i < len(arg_names) else f"input {i}"
            for i, a in enumerate(example)
            if isinstance(a, torch.Tensor) and not a.dtype.is_floating_point and a.dtype != torch.bool]


def value_ranges_by_position(example: tuple[Any, ...], arg_names: Sequence[str] | None,
                             value_ranges: Mapping[str, tuple[int, int]]) -> list[tuple[int, int] | None]:
    """``value_ranges`` as one entry per input of ``example`` (None where none is given); a ``ValueError`` for a name
    that is not an integer input, or a range that is not two integers, low ≤ high."""
    integers = value_range_names(example, arg_names)
    unknown = sorted(set(value_ranges) - set(integers))
    if unknown:
        raise ValueError(f"value_ranges names {', '.join(unknown)}: not an integer input (integer inputs: "
                         f"{', '.join(integers) or 'none'})")
    for name, (low, high) in value_ranges.items():
        if not (isinstance(low, int) and isinstance(high, int)) or low > high:
            raise ValueError(f"value_ranges[{name!r}] = ({low!r}, {high!r}): expected two integers, low ≤ high")
    names = [arg_names[i] if arg_names is not None and i < len(arg_names) else f"input {i}"
             for i in range(len(example))]
    return [value_ranges.get(name) if isinstance(a, torch.Tensor) else None for name, a in zip(names, example)]


def _resized(base_shapes: list[tuple[int, ...] | None], axes: list[tuple[int, int, Any]],
             value: int) -> list[tuple[int, ...] | None] | None:
    """The example shapes with every axis of a group set from the root ``value`` (None if invalid)."""
    shapes = [list(s) if s is not None else None for s in base_shapes]
    for i, axis, size_of in axes:
        try:
            size = int(size_of(value))
        except Exception:  # noqa: BLE001
            return None
        if size < 0:
            return None
        shapes[i][axis] = size  # type: ignore[index]
    return [tuple(s) if s is not None else None for s in shapes]


def _groups_from_contract(contract: InputContract, example: tuple[Any, ...]):
    groups: dict[str, dict[str, Any]] = {}
    derived: list[tuple[int, int, Any]] = []
    dynamic_axes: set[tuple[int, int]] = set()
    for i, spec in enumerate(contract.inputs):
        for axis, ax in enumerate(spec.axes):
            if ax.size is not None:
                continue
            dynamic_axes.add((i, axis))
            if ax.dim is None:
                continue
            if ax.expr is not None:
                derived.append((i, axis, ax))
                continue
            hi = ax.max if ax.max is not None else ax.planned
            g = groups.setdefault(ax.dim, {"axes": [], "min": ax.min, "max": hi,
                                           "example": int(example[i].shape[axis])})
            g["axes"].append((i, axis, _identity))
    for i, axis, ax in derived:
        expr = sympy.sympify(ax.expr)
        symbols = sorted(expr.free_symbols, key=str)
        if len(symbols) != 1:
            continue
        root = symbols[0]

        def size_of(value: int, expr: Any = expr, root: Any = root) -> int:
            return int(expr.subs(root, value))

        if ax.dim not in groups:
            def solve(size: int | None, expr: Any = expr, root: Any = root) -> int | None:
                if size is None:
                    return None
                found = [v for v in sympy.solve(sympy.Eq(expr, size), root) if v.is_integer]
                return int(found[0]) if found else None

            hi = ax.max if ax.max is not None else ax.planned
            groups[ax.dim] = {"axes": [], "min": solve(ax.min), "max": solve(hi),
                              "example": solve(int(example[i].shape[axis])) or 1}
        groups[ax.dim]["axes"].append((i, axis, size_of))
    return groups, dynamic_axes


# ----- comparison ---------------------------------------------------------------------------------
@dataclass
class ParityRow:
    """The verdict for one input."""

    label: str
    shapes: str
    status: str
    within_contract: bool
    max_abs_diff: float | None = None
    runtime_message: str = ""
    contract_message: str = ""
    eager_message: str = ""
    eager_output: tuple[Any, ...] | None = field(default=None, repr=False, compare=False)
    pte_output: tuple[Any, ...] | None = field(default=None, repr=False, compare=False)

    @property
    def verdict(self) -> str:
        """One word-ish label: match, diverge, rejected (by the runtime), refused (on the host),
        eager error, or outside contract (…)."""
        if self.status == "eager_error":
            return "eager error"
        if not self.within_contract and self.status in ("match", "diverge"):
            return f"outside contract ({self.status})"
        return self.status

    @property
    def message(self) -> str:
        """The one message that explains this row: eager's error, the runtime's or host's refusal, or
        what differs."""
        if self.status == "eager_error":
            return self.eager_message
        return self.runtime_message

    @property
    def silently_accepted(self) -> bool:
        """The runtime ran an input outside the contract without complaint."""
        return not self.within_contract and self.status in ("match", "diverge")

    @property
    def kind(self) -> str:
        """How the probe reads in a report: its status inside the contract; outside it, ``silent`` (the
        runtime ran it anyway) or ``expected`` (refused by the runtime or on the host, or eager fails)."""
        if self.within_contract:
            return self.status
        return "silent" if self.silently_accepted else "expected"

    def describe(self) -> str:
        text = STATUS_WORDS[self.status] if self.status in ("rejected", "refused") else self.status
        if self.status == "diverge" and self.max_abs_diff is not None and math.isfinite(self.max_abs_diff):
            text += f" (max |Δ| = {format_diff(self.max_abs_diff)})"
        elif self.status == "diverge":
            text += f" ({self.runtime_message})" if self.runtime_message else ""
        if not self.within_contract:
            text += " · outside the contract" + (" (silently accepted)" if self.silently_accepted else "")
        return text


def format_diff(d: float | None) -> str:
    """A difference rounded so tiny float noise (which varies by CPU) prints identically everywhere."""
    if d is None:
        return "—"
    if math.isnan(d):
        return "nan"
    if math.isinf(d):
        return "inf"
    if d < 1e-4:
        return "<1e-4"
    return f"{d:.3g}"


def flat_outputs(out: Any) -> tuple[Any, ...]:
    """A model's outputs in the flat order :func:`compare` compares them (tuples, lists and dicts flattened)."""
    return _as_tuple(out)


def _as_tuple(out: Any) -> tuple[Any, ...]:
    if isinstance(out, (tuple, list)):
        flat: list[Any] = []
        for o in out:
            flat.extend(_as_tuple(o))
        return tuple(flat)
    if isinstance(out, dict):
        return tuple(x for v in out.values() for x in _as_tuple(v))
    return (out,)


Tolerance = float | Sequence[float]  # one for every output, or one per output (in the flat order of the outputs)


def _per_output(tolerance: Tolerance, i: int) -> float:
    return float(tolerance) if isinstance(tolerance, (int, float)) else float(tolerance[i])


def difference(eager: tuple[Any, ...], pte: tuple[Any, ...], atol: Tolerance, rtol: Tolerance
                ) -> tuple[bool, float | None, str]:
    """(same?, max abs difference, what differs) over all outputs; ``atol``/``rtol``: one value, or one per output."""
    if len(eager) != len(pte):
        return False, None, f"{len(eager)} outputs in eager, {len(pte)} from the .pte"
    for name, tolerance in (("atol", atol), ("rtol", rtol)):
        if not isinstance(tolerance, (int, float)) and len(tolerance) != len(eager):
            raise ValueError(f"{len(tolerance)} {name} values for {len(eager)} outputs: give one, or one per output")
    worst = 0.0
    for i, (e, p) in enumerate(zip(eager, pte)):
        if not isinstance(e, torch.Tensor) or not isinstance(p, torch.Tensor):
            if e != p:
                return False, None, f"output {i}: {e!r} vs {p!r}"
            continue
        if tuple(e.shape) != tuple(p.shape):
            return False, None, f"output {i} shape {tuple(e.shape)} in eager, {tuple(p.shape)} from the .pte"
        if e.dtype != p.dtype and not (e.is_floating_point() and p.is_floating_point()):
            return False, None, f"output {i} dtype {e.dtype} vs {p.dtype}"
        e64, p64 = e.detach().double(), p.detach().double()
        if e.numel() == 0:
            continue
        e_nan, p_nan = torch.isnan(e64), torch.isnan(p64)
        if bool((e_nan != p_nan).any()):
            return False, math.nan, f"output {i}: NaN on one side only ({int(p_nan.sum())} NaN from the .pte, " \
                                    f"{int(e_nan.sum())} in eager)"
        same_inf = torch.isinf(e64) & (e64 == p64)
        ignore = e_nan | same_inf
        diff = torch.where(ignore, torch.zeros_like(e64), (e64 - p64).abs())
        worst = max(worst, float(torch.nan_to_num(diff, nan=math.inf).max()))
        # Float32 rounding grows with the magnitudes involved: scale the absolute tolerance by the
        # output's largest finite value (a ±1e4 input must not read as a divergence at 1e-3).
        finite = e64[torch.isfinite(e64)]
        scale = max(1.0, float(finite.abs().max())) if finite.numel() else 1.0
        close = torch.isclose(e64, p64, atol=_per_output(atol, i) * scale, rtol=_per_output(rtol, i)) | ignore
        if not bool(close.all()):
            return False, worst, f"output {i} values differ"
    return True, worst, ""


@contextlib.contextmanager
def _logging_paused():
    previous = logging.root.manager.disable
    logging.disable(logging.CRITICAL)
    try:
        yield
    finally:
        logging.disable(previous)


def check_one(model: torch.nn.Module, artifact: PteArtifact, args: tuple[Any, ...], *, method: str = "forward",
              label: str = "", atol: Tolerance = 1e-4, rtol: Tolerance = 1e-4) -> ParityRow:
    """Run eager and the raw runtime on one input and classify the result."""
    if isinstance(args, torch.Tensor):
        args = (args,)
    args = tuple(args)
    shapes = Probe(label, args).shapes()
    problems = artifact.input_contract(method).violations(args)
    within = not problems
    contract_message = "; ".join(p.describe() for p in problems)
    try:
        # Eager torch.cond traces its branches and logs failed traces at ERROR (timestamps, PIDs):
        # the exception we keep says the same thing in one line.
        with torch.no_grad(), warnings.catch_warnings(), _logging_paused():
            warnings.simplefilter("ignore")
            eager = _as_tuple(model(*[a.clone() if isinstance(a, torch.Tensor) else a for a in args]))
    except Exception as exc:  # noqa: BLE001 - any eager failure is a finding, not a crash
        eager_message = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
        try:
            artifact.run_raw(*args, method=method)
            runtime_message = ""
        except RuntimeRejectedError as rej:
            runtime_message = rej.reason
        return ParityRow(label, shapes, "eager_error", within, None, runtime_message, contract_message, eager_message)
    try:
        pte = artifact.run_raw(*[a.clone() if isinstance(a, torch.Tensor) else a for a in args], method=method)
    except HostRefusedError as rej:
        return ParityRow(label, shapes, "refused", within, None, rej.reason, contract_message, eager_output=eager)
    except RuntimeRejectedError as rej:
        return ParityRow(label, shapes, "rejected", within, None, rej.reason, contract_message, eager_output=eager)
    same, worst, what = difference(eager, pte, atol, rtol)
    return ParityRow(label, shapes, "match" if same else "diverge", within, worst, "" if same else what,
                     contract_message, eager_output=eager, pte_output=pte)


@dataclass
class ParityReport:
    """Rows of :class:`ParityRow`; ``ok`` only when every row matches."""

    method: str
    rows: list[ParityRow] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return bool(self.rows) and all(r.status == "match" for r in self.rows)

    @property
    def ok_within_contract(self) -> bool:
        """Every input inside the contract matches (what an export CI job should require)."""
        inside = [r for r in self.rows if r.within_contract]
        return bool(inside) and all(r.status == "match" for r in inside)

    def counts(self) -> dict[str, int]:
        return {s: sum(r.status == s for r in self.rows) for s in STATUSES}

    def silently_accepted(self) -> list[ParityRow]:
        return [r for r in self.rows if r.silently_accepted]

    def summary(self) -> str:
        c = self.counts()
        silent = len(self.silently_accepted())
        parts = [f"{c['match']} match", f"{c['diverge']} diverge", f"{c['rejected']} rejected by the runtime"]
        if c["refused"]:
            parts.append(f"{c['refused']} refused on the host")
        parts.append(f"{c['eager_error']} eager errors")
        text = f"{len(self.rows)} inputs: " + ", ".join(parts)
        if silent:
            text += (f"; {silent} outside the contract {'was' if silent == 1 else 'were'} run by the runtime "
                     "without complaint")
        return text

    def groups(self) -> list[ParityGroup]:
        """Rows with the same status, the same side of the contract and the same reason, together
        (reasons compared with their sizes blanked, so one runtime message per kind of refusal)."""
        found: dict[tuple[str, bool, str], ParityGroup] = {}
        for r in self.rows:
            key = (r.status, r.within_contract, _reason_kind(r))
            if key not in found:
                found[key] = ParityGroup(r.status, r.within_contract, key[2], [])
            found[key].rows.append(r)
        order = {s: i for i, s in enumerate(STATUSES)}
        return sorted(found.values(), key=lambda g: (not g.within_contract, order[g.status]))

    def __repr__(self) -> str:
        return f"<ParityReport '{self.method}': {self.summary()}>"

    def __iter__(self):
        return iter(self.rows)

    def __len__(self) -> int:
        return len(self.rows)

    def __getitem__(self, i: int) -> ParityRow:
        return self.rows[i]

    def to_dataframe(self):  # -> pandas.DataFrame
        import pandas as pd

        return pd.DataFrame([{
            "input": r.label, "shapes": r.shapes, "status": r.status, "within_contract": r.within_contract,
            "max_abs_diff": r.max_abs_diff, "runtime_message": r.runtime_message,
            "contract_message": r.contract_message, "eager_message": r.eager_message} for r in self.rows])

    def __str__(self) -> str:
        """The report, one line per group of identical outcomes (``table()`` has every row)."""
        lines = [f"parity of '{self.method}': {self.summary()}"]
        for g in self.groups():
            lines.append(f"  {g.title()} ({len(g.rows)}): {g.labels()}")
            if g.reason:
                lines.append(f"      {g.reason}")
        return "\n".join(lines)

    def table(self) -> str:
        """Every row on its own line (the details behind :meth:`__str__`)."""
        lines = [f"parity of '{self.method}': {self.summary()}"]
        for r in self.rows:
            detail = ""
            if r.status == "diverge":
                detail = (f"  max|Δ|={format_diff(r.max_abs_diff)}" if r.max_abs_diff is not None
                          else f"  {r.runtime_message}")
            lines.append(f"  {r.status:<11} {'in ' if r.within_contract else 'OUT'}  {r.label:<40} {r.shapes}{detail}")
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        colours = {"match": "#d9f2d9", "diverge": "#f8d0d0", "rejected": "#fde9c4", "refused": "#e8dcf2",
                   "eager_error": "#e0e0e0"}
        groups = []
        for g in self.groups():
            groups.append(
                f"<tr style='background:{colours[g.status]}'><td><b>{html.escape(STATUS_WORDS[g.status])}</b></td>"
                f"<td>{'inside' if g.within_contract else '<b>outside</b>'}</td><td style='text-align:right'>"
                f"{len(g.rows)}</td><td style='font-size:85%'>{html.escape(g.labels())}</td>"
                f"<td style='font-size:85%'>{html.escape(g.reason)}</td></tr>")
        rows = []
        for r in self.rows:
            note = r.message
            if not r.within_contract:
                note = (note + " — " if note else "") + f"outside contract: {r.contract_message}"
            rows.append(
                f"<tr style='background:{colours[r.status]}'><td>{html.escape(r.label)}</td>"
                f"<td><code>{html.escape(r.shapes)}</code></td><td><b>{r.status}</b></td>"
                f"<td>{'yes' if r.within_contract else '<b>no</b>'}</td>"
                f"<td>{format_diff(r.max_abs_diff) if r.status in ('match', 'diverge') else '—'}</td>"
                f"<td style='font-size:85%'>{html.escape(note)}</td></tr>")
        verdict = "✅ parity" if self.ok else ("⚠️ parity inside the contract only" if self.ok_within_contract
                                              else "❌ no parity")
        return (f"<div><b>{verdict}</b> — {html.escape(self.summary())}<table>"
                "<tr><th>outcome</th><th>contract</th><th>#</th><th>inputs</th><th>reason</th></tr>"
                + "".join(groups) + "</table><details><summary>every input</summary><table>"
                "<tr><th>input</th><th>shapes</th><th>status</th><th>in contract</th><th>max |Δ|</th>"
                "<th>eager / runtime / contract message</th></tr>" + "".join(rows) + "</table></details></div>")


# Shapes in a message ("(1, 3, 48, 64)", "[2, 8]", "16x5") differ from row to row for one kind of reason.
_SIZES = re.compile(r"\((?:\d+, )+\d+,?\)|\((?:\d+),\)|\[(?:\d+, )*\d+\]|\b\d+x\d+\b")


def _reason_kind(row: ParityRow) -> str:
    """A row's reason with its shapes blanked ("Expected shape …, but received …"): one line per kind."""
    if row.status == "match":
        return ""
    if row.status == "diverge":
        text = row.runtime_message or "values differ"
    else:
        text = row.message
    text = text.split(" [")[0]  # the runtime's error code in brackets adds nothing per row
    return _SIZES.sub("…", text)


@dataclass
class ParityGroup:
    """Rows of a report with the same outcome and the same kind of reason."""

    status: str
    within_contract: bool
    reason: str
    rows: list[ParityRow]

    def title(self) -> str:
        side = "inside the contract" if self.within_contract else "outside the contract"
        return f"{STATUS_WORDS[self.status]} · {side}"

    def labels(self) -> str:
        parts = []
        for r in self.rows:
            extra = f" max|Δ|={format_diff(r.max_abs_diff)}" if r.status == "diverge" else ""
            parts.append(f"{r.label}{extra}")
        return "; ".join(parts)


def compare(model: torch.nn.Module, artifact: PteArtifact, inputs: Any, *, method: str = "forward",
            atol: Tolerance = 1e-4, rtol: Tolerance = 1e-4, fresh_state: bool = False) -> ParityReport:
    """Run eager and the raw ``.pte`` on every input; one :class:`ParityRow` each. ``atol``/``rtol``: one value
    for every output, or a sequence with one per output (outputs flattened in order).

    ``inputs`` is a list of :class:`Probe`, of argument tuples, or of single tensors.
    Only the model's own outputs are compared (a program that mutates an input has extra
    runtime outputs; they are skipped by the graph signature).

    ``fresh_state``: for a model with state kept between calls (buffers the program writes, such as a KV cache),
    each input runs on a copy of ``model`` as it is now and on the program loaded again, so that no input sees
    what an earlier one wrote, on either side.
    """
    report = ParityReport(method)
    for i, item in enumerate(inputs):
        if isinstance(item, Probe):
            label, args = item.label, item.args
        else:
            label, args = f"input {i}", item
        eager, program = (copy.deepcopy(model), artifact.reloaded()) if fresh_state else (model, artifact)
        report.rows.append(check_one(eager, program, args, method=method, label=label, atol=atol, rtol=rtol))
    return report
