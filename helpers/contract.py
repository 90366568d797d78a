"""The input contract of an exported method, and the host-side check that enforces it.

``torch.export`` records, for every input, a dtype, a rank and per axis either a constant
size or a symbol with a range. ExecuTorch strips export's runtime assertions, so on the
device only two things are checked: the rank, and that the input fits the memory planned
for it (element capacity). A size below a ``Dim``'s ``min``, two axes that share a ``Dim``
but differ, or a different value for a baked-in Python scalar are *not* all caught by the
runtime. :class:`InputContract` keeps the full contract (with the user's ``Dim`` names,
never torch's internal ``s77``) and :meth:`InputContract.check` refuses every input outside
it with an :class:`InputContractError` that names the input, the axis, the expectation and
the fix.
"""

from __future__ import annotations

import html
import inspect
import re
from dataclasses import asdict, dataclass, field
from typing import Any

import sympy
import torch

__all__ = ["AxisSpec", "InputSpec", "InputContract", "InputContractError", "Violation"]


@dataclass(frozen=True)
class AxisSpec:
    """One axis of one input.

    ``size`` is set for a static axis. A dynamic axis has ``dim`` (the user's ``Dim`` name,
    or ``<input>.shape[<axis>]`` for an axis that ``Dim.AUTO``/``Dim.DYNAMIC`` made dynamic),
    ``min``/``max`` (the range export *assumed*, which may be narrower than what was declared),
    ``declared_min``/``declared_max`` (what the user wrote), and ``planned`` (the size the
    memory plan reserved: the max, or the example size when no max was given).
    ``expr`` is set for a derived axis such as ``2*seq``.
    """

    size: int | None = None
    dim: str | None = None
    min: int | None = None
    max: int | None = None
    declared_min: int | None = None
    declared_max: int | None = None
    planned: int | None = None
    expr: str | None = None
    auto: bool = False

    @property
    def is_dynamic(self) -> bool:
        return self.size is None

    def describe(self) -> str:
        if self.size is not None:
            return str(self.size)
        label = self.expr or self.dim or "?"
        hi = "∞" if self.max is None else str(self.max)
        return f"{label}∈[{self.min},{hi}]"


@dataclass(frozen=True)
class InputSpec:
    """One user input: a tensor (dtype + axes) or a Python scalar baked in as a constant."""

    name: str
    kind: str  # "tensor" or "constant"
    dtype: str | None = None
    axes: tuple[AxisSpec, ...] = ()
    value: Any = None

    def describe(self) -> str:
        if self.kind == "constant":
            return f"{self.name}={self.value!r} (constant)"
        return f"{self.name}: {self.dtype}[{', '.join(a.describe() for a in self.axes)}]"


@dataclass(frozen=True)
class Violation:
    """One way an input breaks the contract."""

    input: str
    axis: int | None
    problem: str
    expected: str
    actual: str
    fix: str
    dim: str | None = None

    @property
    def kind(self) -> str:
        """tie · static · below_min · above_max · derived · dtype · rank · type · count · constant."""
        for prefix, kind in (("must equal", "tie"), ("static size", "static"), ("below", "below_min"),
                             ("above", "above_max"), ("must be of the form", "derived"), ("derived", "derived"),
                             ("wrong dtype", "dtype"), ("wrong rank", "rank"), ("not a tensor", "type"),
                             ("wrong number", "count")):
            if self.problem.startswith(prefix):
                return kind
        return "constant"

    def describe(self) -> str:
        where = self.input if self.axis is None else f"{self.input} axis {self.axis}"
        dim = f" (Dim '{self.dim}')" if self.dim else ""
        return f"{where}{dim}: {self.problem}; expected {self.expected}, got {self.actual}. Fix: {self.fix}"


class InputContractError(ValueError):
    """An input lies outside what the exported program was built for.

    ``violations`` lists every problem found; the message names the input, the axis, the
    expected and actual values, the ``Dim`` by its user-facing name, and the fix.
    """

    def __init__(self, method: str, violations: list[Violation], contract: InputContract):
        self.method = method
        self.violations = list(violations)
        self.contract = contract
        lines = [f"input outside the export contract of method '{method}' — {contract.signature()}"]
        lines += [f"  • {v.describe()}" for v in self.violations]
        super().__init__("\n".join(lines))


def _dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).replace("torch.", "")


@dataclass
class InputContract:
    """Everything a caller must respect for one method of a ``.pte``."""

    method: str
    inputs: tuple[InputSpec, ...]
    ties: dict[str, list[tuple[str, int]]] = field(default_factory=dict)

    # ----- description -------------------------------------------------------------------
    def signature(self) -> str:
        """A one-line signature such as ``forward(x: float32[batch∈[1,8], 4])``."""
        return f"{self.method}({', '.join(i.describe() for i in self.inputs)})"

    def dims(self) -> dict[str, AxisSpec]:
        """The dynamic dimensions by name (first axis carrying each)."""
        out: dict[str, AxisSpec] = {}
        for spec in self.inputs:
            for ax in spec.axes:
                if ax.dim and ax.dim not in out and ax.expr is None:
                    out[ax.dim] = ax
        return out

    def max_shapes(self) -> list[tuple[int, ...] | None]:
        """The largest shape each tensor input may take (what the memory plan reserved)."""
        shapes: list[tuple[int, ...] | None] = []
        for spec in self.inputs:
            if spec.kind != "tensor":
                shapes.append(None)
                continue
            shapes.append(tuple(a.size if a.size is not None else (a.planned or 0) for a in spec.axes))
        return shapes

    def _repr_html_(self) -> str:
        rows = []
        for spec in self.inputs:
            if spec.kind == "constant":
                rows.append(f"<tr><td><code>{html.escape(spec.name)}</code></td><td colspan=2>Python constant "
                            f"<code>{html.escape(repr(spec.value))}</code> (baked in; any other value is refused)</td></tr>")
                continue
            axes = []
            for i, ax in enumerate(spec.axes):
                if ax.size is not None:
                    axes.append(f"{i}: {ax.size}")
                else:
                    hi = "∞" if ax.max is None else ax.max
                    note = f" (planned {ax.planned})" if ax.planned is not None else ""
                    axes.append(f"{i}: <b>{html.escape(ax.expr or ax.dim or '?')}</b> ∈ [{ax.min}, {hi}]{note}")
            rows.append(f"<tr><td><code>{html.escape(spec.name)}</code></td><td>{spec.dtype}</td>"
                        f"<td>{'<br>'.join(axes)}</td></tr>")
        ties = "".join(
            f"<li>Dim <b>{html.escape(name)}</b> ties {', '.join(f'{i}[{a}]' for i, a in axes)}: they must be equal</li>"
            for name, axes in self.ties.items() if len(axes) > 1)
        return (f"<div><b>input contract of <code>{html.escape(self.method)}</code></b>"
                "<table><tr><th>input</th><th>dtype</th><th>axes</th></tr>" + "".join(rows) + "</table>"
                + (f"<ul>{ties}</ul>" if ties else "") + "</div>")

    def __str__(self) -> str:
        return self.signature()

    def __repr__(self) -> str:
        return f"<InputContract {self.signature()}>"

    # ----- serialisation ----------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        return {"method": self.method,
                "inputs": [{**asdict(i), "axes": [asdict(a) for a in i.axes]} for i in self.inputs],
                "ties": {k: [list(t) for t in v] for k, v in self.ties.items()}}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> InputContract:
        inputs = tuple(InputSpec(**{**i, "axes": tuple(AxisSpec(**a) for a in i["axes"])}) for i in data["inputs"])
        return cls(method=data["method"], inputs=inputs,
                   ties={k: [tuple(t) for t in v] for k, v in data["ties"].items()})

    # ----- the check ----------------------------------------------------------------------
    def violations(self, args: tuple[Any, ...]) -> list[Violation]:
        """Every way ``args`` breaks this contract (empty when they respect it)."""
        names = ", ".join(i.name for i in self.inputs)
        if len(args) != len(self.inputs):
            return [Violation("(arguments)", None, "wrong number of inputs", f"{len(self.inputs)} ({names})",
                              str(len(args)), f"call {self.method} with exactly: {names}")]
        found: list[Violation] = []
        bound: dict[str, tuple[int, str, int]] = {}  # dim -> (value, input, axis)
        derived: list[tuple[InputSpec, int, AxisSpec, int]] = []
        for spec, arg in zip(self.inputs, args):
            if spec.kind == "constant":
                found += _check_constant(spec, arg)
                continue
            if not isinstance(arg, torch.Tensor):
                found.append(Violation(spec.name, None, "not a tensor", f"a torch.Tensor {spec.describe()}",
                                       type(arg).__name__, f"pass a tensor, e.g. torch.as_tensor(value, dtype=torch.{spec.dtype})"))
                continue
            actual_dtype = _dtype_name(arg.dtype)
            if actual_dtype != spec.dtype:
                found.append(Violation(spec.name, None, "wrong dtype", spec.dtype or "?", actual_dtype,
                                       f"convert on the host: {spec.name}.to(torch.{spec.dtype})"))
            if arg.dim() != len(spec.axes):
                found.append(Violation(spec.name, None, "wrong rank", f"rank {len(spec.axes)} {spec.describe()}",
                                       f"rank {arg.dim()} shape {tuple(arg.shape)}",
                                       _rank_fix(spec, arg)))
                continue
            for axis, (ax, size) in enumerate(zip(spec.axes, arg.shape)):
                size = int(size)
                if ax.size is not None:
                    if size != ax.size:
                        found.append(_static_violation(spec, axis, ax, size))
                    continue
                if ax.expr is not None:
                    derived.append((spec, axis, ax, size))
                    continue
                assert ax.dim is not None
                if ax.dim in bound:
                    value, other, other_axis = bound[ax.dim]
                    if value != size:
                        found.append(Violation(
                            spec.name, axis, f"must equal {other} axis {other_axis} (both are Dim '{ax.dim}')",
                            str(value), str(size),
                            f"make them the same length on the host (pad or trim), e.g. pad {spec.name} to {value}",
                            dim=ax.dim))
                    continue  # the range was checked where the Dim was first seen
                bound.setdefault(ax.dim, (size, spec.name, axis))
                found += _range_violations(spec, axis, ax, size)
        for spec, axis, ax, size in derived:
            found += _derived_violations(spec, axis, ax, size, {k: v[0] for k, v in bound.items()})
        return found

    def check(self, args: tuple[Any, ...]) -> None:
        """Raise :class:`InputContractError` if ``args`` break the contract."""
        problems = self.violations(args)
        if problems:
            raise InputContractError(self.method, problems, self)


# ----- checks, one per kind of axis -----------------------------------------------------------
def _check_constant(spec: InputSpec, arg: Any) -> list[Violation]:
    if isinstance(arg, torch.Tensor) or type(arg) is not type(spec.value) or arg != spec.value:
        return [Violation(spec.name, None, "a Python scalar is a constant in the exported program",
                          repr(spec.value), repr(arg) if not isinstance(arg, torch.Tensor) else "a tensor",
                          f"pass {spec.value!r}; to vary it, make it a tensor input (or export one method per value)")]
    return []


def _rank_fix(spec: InputSpec, arg: torch.Tensor) -> str:
    want = len(spec.axes)
    if arg.dim() + 1 == want:
        return f"add the missing axis on the host, e.g. {spec.name}.unsqueeze(0) for a batch of one"
    if arg.dim() == want + 1 and arg.shape[0] == 1:
        return f"drop the extra axis on the host, e.g. {spec.name}.squeeze(0)"
    return f"reshape {spec.name} on the host to rank {want} ({spec.describe()})"


def _static_violation(spec: InputSpec, axis: int, ax: AxisSpec, size: int) -> Violation:
    fix = (f"resize or pad on the host to {ax.size}, or re-export with this axis declared dynamic: "
           f"dynamic_shapes={{'{spec.name}': {{{axis}: Dim('name', min=..., max=...)}}}}")
    return Violation(spec.name, axis, "static size (export baked the example's size in)", str(ax.size), str(size), fix)


def _range_violations(spec: InputSpec, axis: int, ax: AxisSpec, size: int) -> list[Violation]:
    lo = ax.min if ax.min is not None else 0
    if size < lo:
        narrowed = (ax.declared_min is not None and ax.declared_min < lo)
        why = (f"export narrowed it from the declared min {ax.declared_min} because forward() depends on it; "
               if narrowed else "")
        return [Violation(spec.name, axis, "below the Dim's minimum (the device runtime does NOT check this)",
                          f"≥ {lo}", str(size),
                          f"{why}handle it on the host before the device (padding to {lo} is a fix only where "
                          "forward() gives the same answer on the padded input), or re-export with a smaller min if "
                          "forward() allows it",
                          dim=ax.dim)]
    limit, what = (ax.max, "max") if ax.max is not None else (ax.planned, "planned capacity")
    if limit is not None and size > limit:
        if ax.max is None:
            fix = (f"Dim '{ax.dim}' has no max, so ExecuTorch planned memory for the example size {ax.planned}; "
                   f"re-export with an explicit max ≥ {size}")
        else:
            fix = (f"re-export with a larger max (the memory plan grows with it), or cut/pad the input to a "
                   f"bucket of at most {limit}")
        return [Violation(spec.name, axis, f"above the Dim's {what}", f"≤ {limit}", str(size), fix, dim=ax.dim)]
    if ax.planned is not None and size > ax.planned:
        return [Violation(spec.name, axis, "above the memory plan's capacity", f"≤ {ax.planned}", str(size),
                          "re-export with a max that covers this size", dim=ax.dim)]
    return []


def _identifier(name: str) -> str:
    return re.sub(r"\W", "_", name)


def _derived_violations(spec: InputSpec, axis: int, ax: AxisSpec, size: int, values: dict[str, int]) -> list[Violation]:
    if ax.min is not None and size < ax.min:
        return [Violation(spec.name, axis, f"below the minimum of {ax.expr} (the device runtime does NOT check this)",
                          f"≥ {ax.min}", str(size), f"pad {spec.name} axis {axis} to a size of the form {ax.expr}",
                          dim=ax.dim)]
    limit = ax.max if ax.max is not None else ax.planned
    if limit is not None and size > limit:
        return [Violation(spec.name, axis, f"above the maximum of {ax.expr}", f"≤ {limit}", str(size),
                          "re-export with a larger max for the root Dim, or cut the input", dim=ax.dim)]
    values = {_identifier(k): v for k, v in values.items()}
    expr = sympy.sympify(ax.expr)
    free = sorted(expr.free_symbols, key=str)
    subs = {s: values[str(s)] for s in free if str(s) in values}
    unknown = [s for s in free if str(s) not in values]
    if len(unknown) == 1:
        solutions = [v for v in sympy.solve(sympy.Eq(expr.subs(subs), size), unknown[0]) if v.is_integer]
        if solutions:
            return []
        return [Violation(spec.name, axis, f"must be of the form {ax.expr}", ax.expr or "?", str(size),
                          f"pad {spec.name} axis {axis} to the next size of the form {ax.expr}", dim=ax.dim)]
    if unknown:
        return []
    expected = int(expr.subs(subs))
    if expected != size:
        return [Violation(spec.name, axis, f"derived size {ax.expr}", str(expected), str(size),
                          f"make axis {axis} of {spec.name} equal {ax.expr} = {expected}", dim=ax.dim)]
    return []


# ----- building a contract from an ExportedProgram ----------------------------------------------
def forward_parameters(model: torch.nn.Module) -> list[inspect.Parameter]:
    """The positional parameters of ``model.forward``, in order: the one place the library reads them (a dict
    ``dynamic_shapes`` is keyed by their names; the doctor maps ``--example`` flags onto them). Empty when
    ``forward`` has no Python signature."""
    try:
        params = inspect.signature(model.forward).parameters.values()
    except (TypeError, ValueError):
        return []
    return [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]


def forward_parameter_names(model: torch.nn.Module) -> list[str]:
    """The positional parameter names of ``model.forward`` (how a dict ``dynamic_shapes`` is keyed)."""
    return [p.name for p in forward_parameters(model)]


def user_dim_specs(param_names: list[str] | None, n_args: int, dynamic_shapes: Any) -> list[dict[int, Any]]:
    """Normalise ``dynamic_shapes`` (a dict by argument name, or positional) to one {axis: spec} per arg.

    ``param_names`` are the forward() parameter names; without them a dict is read in its own
    order, which is only unambiguous when it names every argument.
    """
    if dynamic_shapes is None:
        return [{} for _ in range(n_args)]
    if isinstance(dynamic_shapes, dict):
        if param_names is None:
            if len(dynamic_shapes) != n_args:
                raise ValueError("dynamic_shapes is a dict that does not name every input; pass model= (or "
                                 "contract=) so its keys can be matched to forward()'s arguments")
            param_names = list(dynamic_shapes)
        unknown = set(dynamic_shapes) - set(param_names)
        if unknown:
            raise ValueError(f"dynamic_shapes names {sorted(unknown)}, which are not arguments of forward() "
                             f"({', '.join(param_names)})")
        per_arg = [dynamic_shapes.get(param_names[i]) if i < len(param_names) else None for i in range(n_args)]
    else:
        per_arg = list(dynamic_shapes) + [None] * (n_args - len(dynamic_shapes))
    out: list[dict[int, Any]] = []
    for spec in per_arg:
        if spec is None:
            out.append({})
        elif isinstance(spec, dict):
            out.append(dict(spec))
        else:
            out.append({i: d for i, d in enumerate(spec) if d is not None})
    return out


def _bound(value: Any) -> int | None:
    """An int bound, or None for "no bound" (torch's ``int_oo``, sympy's ``oo``, or huge values)."""
    if value is None or "oo" in str(value):
        return None
    try:
        result = int(value)
    except Exception:  # noqa: BLE001 - any symbolic infinity-like value means "unbounded"
        return None
    return result if abs(result) < 2**62 else None


def _dim_name_and_decl(spec: Any) -> tuple[str | None, int | None, int | None]:
    """The user-facing name and declared bounds of one ``dynamic_shapes`` entry."""
    from torch.export.dynamic_shapes import _DimHint

    if isinstance(spec, _DimHint):
        return None, spec.min, spec.max
    name = getattr(spec, "__name__", None)
    return name, _bound(getattr(spec, "min", None)), _bound(getattr(spec, "max", None))


def contract_from_export(method: str, model: torch.nn.Module, example_args: tuple[Any, ...], dynamic_shapes: Any,
                         exported: torch.export.ExportedProgram,
                         planned_sizes: list[tuple[int, ...] | None]) -> InputContract:
    """Build the contract of one method from its ``ExportedProgram``.

    ``planned_sizes`` are the per-input shapes the ``.pte`` reserves (``MethodMeta``), which is
    what bounds an axis that export left unbounded.
    """
    from torch.export.graph_signature import InputKind

    # Constants (Python scalars) appear in user_inputs by *value*; input_specs keeps their names.
    user_inputs = [spec.arg.name for spec in exported.graph_signature.input_specs if spec.kind == InputKind.USER_INPUT]
    placeholders = {n.name: n for n in exported.graph.nodes if n.op == "placeholder"}
    user_specs = user_dim_specs(forward_parameter_names(model), len(example_args), dynamic_shapes)
    ranges = {str(sym): vr for sym, vr in exported.range_constraints.items()}

    # First pass: find a user-facing name for every symbol.
    names: dict[str, tuple[str, bool, int | None, int | None]] = {}
    for idx, name in enumerate(user_inputs):
        val = placeholders[name].meta.get("val") if name in placeholders else None
        if not isinstance(val, torch.Tensor):
            continue
        for axis, size in enumerate(val.shape):
            if not isinstance(size, torch.SymInt):
                continue
            expr = size.node.expr
            user = user_specs[idx].get(axis) if idx < len(user_specs) else None
            if not isinstance(expr, sympy.Symbol):
                # A derived Dim (e.g. 8*chunk): its root may appear on no axis of its own.
                root = getattr(user, "root", None)
                if root is not None and len(expr.free_symbols) == 1:
                    key = str(next(iter(expr.free_symbols)))
                    if key not in names:
                        rname, rmin, rmax = _dim_name_and_decl(root)
                        names[key] = (rname or f"{name}.shape[{axis}]", rname is None, rmin, rmax)
                continue
            dim_name, dmin, dmax = _dim_name_and_decl(user)
            key = str(expr)
            if key not in names or (names[key][1] and dim_name):
                if dim_name:
                    names[key] = (dim_name, False, dmin, dmax)
                else:
                    names[key] = (f"{name}.shape[{axis}]", True, dmin, dmax)

    inputs: list[InputSpec] = []
    ties: dict[str, list[tuple[str, int]]] = {}
    for idx, name in enumerate(user_inputs):
        val = placeholders[name].meta.get("val") if name in placeholders else None
        if not isinstance(val, torch.Tensor):
            inputs.append(InputSpec(name=name, kind="constant", value=val))
            continue
        planned = planned_sizes[idx] if idx < len(planned_sizes) else None
        axes: list[AxisSpec] = []
        for axis, size in enumerate(val.shape):
            cap = int(planned[axis]) if planned is not None and axis < len(planned) else None
            if not isinstance(size, torch.SymInt):
                axes.append(AxisSpec(size=int(size)))
                continue
            expr = size.node.expr
            if expr.is_number:
                axes.append(AxisSpec(size=int(expr)))
                continue
            if isinstance(expr, sympy.Symbol):
                label, auto, dmin, dmax = names.get(str(expr), (f"{name}.shape[{axis}]", True, None, None))
                vr = ranges.get(str(expr))
                lo = _bound(vr.lower) if vr is not None else None
                hi = _bound(vr.upper) if vr is not None else None
                axes.append(AxisSpec(dim=label, min=lo, max=hi, declared_min=dmin, declared_max=dmax,
                                     planned=cap, auto=auto))
                ties.setdefault(label, []).append((name, axis))
                continue
            # A derived size such as 2*s0: rewrite it with the user's names.
            renamed = expr.subs({s: sympy.Symbol(_identifier(names[str(s)][0]))
                                 for s in expr.free_symbols if str(s) in names})
            symbols = sorted(expr.free_symbols, key=str)
            root = names.get(str(symbols[0]), ("?",))[0] if symbols else None
            lo = hi = None
            if len(symbols) == 1 and str(symbols[0]) in ranges:
                vr = ranges[str(symbols[0])]
                r_lo, r_hi = _bound(vr.lower), _bound(vr.upper)
                lo = int(expr.subs(symbols[0], r_lo)) if r_lo is not None else None
                hi = int(expr.subs(symbols[0], r_hi)) if r_hi is not None else None
            axes.append(AxisSpec(dim=root, expr=str(renamed), planned=cap, min=lo, max=hi))
            if root:
                ties.setdefault(root, []).append((name, axis))
        inputs.append(InputSpec(name=name, kind="tensor", dtype=_dtype_name(val.dtype), axes=tuple(axes)))
    return InputContract(method=method, inputs=tuple(inputs), ties=ties)
