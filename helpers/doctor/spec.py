"""``--spec MODULE:FUNCTION``: a model and its inputs exactly as ``torch.export.export`` takes them.

The function returns ``{"model": nn.Module, "args": tuple, "kwargs": dict, "dynamic_shapes": ..., "strict": bool}``
(``kwargs``, ``dynamic_shapes`` and ``strict`` optional; ``strict=True`` exports with Dynamo, as
``torch.export.export(..., strict=True)``, for models that need it such as ``transformers``' static-cache wrapper): keyword and nested inputs (tuples, lists, dicts, classes registered with pytree),
derived ``Dim``s (``4 * chunk``), ``Dim.AUTO`` / ``Dim.STATIC`` / ``Dim.DYNAMIC``, shared ``Dim``s (a
``ShapesCollection`` is turned into that structure the way ``torch.export`` does it). :func:`load_spec` checks it and turns it into a :class:`FlatModel`: the model behind a
``forward`` that takes the input's tensors one by one, in the order ``torch.export`` flattens ``(args, kwargs)``,
which is also the order of the ``.pte``'s inputs. The doctor's pipeline (export, lowering, the input contract,
the probes, the comparison with eager) works on flat tensors; the flat model calls the user's model with the
structure rebuilt, so eager runs the model as the user calls it, and the exported graph is the one
``torch.export.export(model, args, kwargs, dynamic_shapes=...)`` records (``tests/test_doctor_spec.py`` compares
them). Non-tensor leaves (ints, floats, bools, strings, None) are constants, as ``torch.export`` treats them.
Outputs are returned as the flat tuple of their tensors, in pytree order (as the ``.pte`` returns them).

``{"methods": {name: spec, ...}}`` is a program of several methods (buckets, a hoisted decision), each method a
spec as above: :func:`flatten_program` makes each flat. A model that writes state it keeps between calls (a KV
cache) is compared from its initial state on every probe (see :func:`helpers.doctor.examine`). The program spec's
``"share_mutable_buffers": True`` builds the program with ExecuTorch's ``MemoryPlanningPass(share_mutable_buffers=
True)``, as an app whose prefill and decode methods share one KV cache must.

Everything wrong with a spec is a :class:`SpecError`: one line, which the command line prints before exiting
with status 2 (this module imports nothing of the doctor).
"""

from __future__ import annotations

import keyword
import re
from dataclasses import dataclass
from typing import Any, NamedTuple

import torch
from torch.utils import _pytree as pytree

__all__ = ["SpecError", "FlatModel", "FlatSpec", "ProgramSpec", "flatten_spec", "flatten_program", "SPEC_KEYS",
           "PROGRAM_KEYS"]

SPEC_KEYS = ("model", "args", "kwargs", "dynamic_shapes", "strict")


class SpecError(ValueError):
    """Something wrong with what a spec function returned: the message is one line for the user."""


class FlatModel(torch.nn.Module):
    """``forward(*tensors)`` → ``model(*args, **kwargs)`` with the spec's structure rebuilt around the tensors.

    A subclass made by :func:`flatten_spec` gives ``forward`` one named parameter per tensor (``x``,
    ``state_0``, ``mask``...), so export, the input contract and the report name the inputs as the spec does.
    """

    def __init__(self, model: torch.nn.Module, treespec: pytree.TreeSpec, leaves: list[Any], tensor_at: list[int]):
        super().__init__()
        self.model = model
        self._treespec = treespec
        self._constants = [None if i in set(tensor_at) else leaf for i, leaf in enumerate(leaves)]
        self._tensor_at = tensor_at

    def flatten_inputs(self, args: Any, kwargs: dict[str, Any] | None = None) -> tuple[torch.Tensor, ...]:
        """Other inputs of the spec's structure (``--inputs``) as this model's flat tensors. Raises
        :class:`SpecError` when the structure or a constant (a non-tensor leaf) differs from the spec's."""
        if isinstance(args, torch.Tensor):
            args = (args,)
        args = tuple(args) if isinstance(args, list) else args
        leaves, treespec = pytree.tree_flatten((args, kwargs or {}))
        if treespec != self._treespec:
            raise SpecError(f"its structure {treespec} differs from the spec's {self._treespec}")
        for i, (leaf, constant) in enumerate(zip(leaves, self._constants)):
            if i in self._tensor_at:
                if not isinstance(leaf, torch.Tensor):
                    raise SpecError(f"leaf {i} is a {type(leaf).__name__} where the spec has a tensor")
            elif isinstance(leaf, torch.Tensor) or leaf != constant:
                raise SpecError(f"leaf {i} is {leaf!r} where the spec has the constant {constant!r} (export bakes "
                                "constants in)")
        return tuple(leaves[i] for i in self._tensor_at)

    def call(self, tensors: tuple[torch.Tensor, ...]) -> tuple[Any, ...]:
        leaves = list(self._constants)
        for i, t in zip(self._tensor_at, tensors):
            leaves[i] = t
        args, kwargs = pytree.tree_unflatten(leaves, self._treespec)
        out = self.model(*args, **kwargs)
        return tuple(leaf for leaf in pytree.tree_leaves(out) if isinstance(leaf, torch.Tensor))


@dataclass
class FlatSpec:
    """A spec made flat: the model to examine, its example tensors, and ``dynamic_shapes`` keyed by their names."""

    model: FlatModel
    example_args: tuple[torch.Tensor, ...]
    dynamic_shapes: dict[str, Any] | None
    names: list[str]
    strict: bool = False  # export with strict=True


def _name(path: tuple[Any, ...]) -> str:
    """``('state', 0)`` → ``state_0``: a parameter name for one leaf (a Python identifier)."""
    parts = []
    for key in path:
        for attr in ("key", "idx", "name"):
            if hasattr(key, attr):
                parts.append(str(getattr(key, attr)))
                break
        else:
            parts.append(str(key))
    name = re.sub(r"\W+", "_", "_".join(parts)).strip("_") or "input"
    if name[0].isdigit() or keyword.iskeyword(name):
        name = f"input_{name}"
    return name


def in_eval_mode(model: torch.nn.Module) -> torch.nn.Module:
    """``model.eval()``, except for a module ``torch.export`` returned (``ExportedProgram.module()``, e.g. from a
    ``.pt2`` loaded with ``torch.export.load``): its mode was fixed when it was exported, and torch 2.13 refuses to
    switch it ("Calling eval() is not supported yet."), so it is taken as it is."""
    try:
        return model.eval()
    except NotImplementedError:
        return model


def flatten_spec(spec: Any, *, where: str = "the spec") -> FlatSpec:
    """Check a spec dict and make it flat (see the module's docstring). Raises :class:`SpecError`."""
    if not isinstance(spec, dict):
        raise SpecError(f"{where} returned a {type(spec).__name__}; expected a dict with keys "
                        f"{', '.join(SPEC_KEYS)} (kwargs and dynamic_shapes optional)")
    unknown = sorted(set(spec) - set(SPEC_KEYS))
    if unknown:
        raise SpecError(f"{where}: unknown key(s) {', '.join(map(repr, unknown))}; a spec has "
                        f"{', '.join(SPEC_KEYS)}")
    for key in ("model", "args"):
        if key not in spec:
            raise SpecError(f"{where}: no {key!r}; a spec has {', '.join(SPEC_KEYS)} (kwargs and dynamic_shapes "
                            "optional)")
    model = spec["model"]
    if not isinstance(model, torch.nn.Module):
        raise SpecError(f"{where}: 'model' is a {type(model).__name__}, not a torch.nn.Module")
    args = spec["args"]
    if isinstance(args, torch.Tensor):
        args = (args,)
    if isinstance(args, list):
        args = tuple(args)
    if not isinstance(args, tuple):
        raise SpecError(f"{where}: 'args' is a {type(args).__name__}; expected a tuple of forward()'s positional "
                        "inputs, as torch.export.export takes them")
    kwargs = spec.get("kwargs") or {}
    if not isinstance(kwargs, dict) or not all(isinstance(k, str) for k in kwargs):
        raise SpecError(f"{where}: 'kwargs' must be a dict of forward()'s keyword inputs by name")
    strict = spec.get("strict", False)
    if not isinstance(strict, bool):
        raise SpecError(f"{where}: 'strict' is {strict!r}; expected True or False (torch.export.export's strict)")
    model = in_eval_mode(model)
    dynamic = spec.get("dynamic_shapes")
    if dynamic is not None and callable(getattr(dynamic, "dynamic_shapes", None)):
        dynamic = dynamic.dynamic_shapes(model, args, kwargs)  # ShapesCollection / AdditionalInputs, as export does

    from torch.export.dynamic_shapes import _check_dynamic_shapes, _combine_args, _tree_map_with_path

    try:
        combined = _combine_args(model, args, kwargs)
    except TypeError as exc:
        raise SpecError(f"{where}: args and kwargs do not fit forward(): {exc}") from None
    leaves, treespec = pytree.tree_flatten((args, kwargs))
    tensor_at = [i for i, leaf in enumerate(leaves) if isinstance(leaf, torch.Tensor)]
    if not tensor_at:
        raise SpecError(f"{where}: the inputs hold no tensor")
    if len({id(leaves[i]) for i in tensor_at}) != len(tensor_at):
        raise SpecError(f"{where}: one tensor object appears twice in the inputs; give each input its own tensor")

    # Name each tensor by its path in forward()'s arguments; find its dynamic-shape spec with torch's own
    # matching of inputs to dynamic_shapes (its errors say where the two structures differ).
    path_names: dict[int, str] = {}
    shapes: dict[int, Any] = {}

    def name_leaf(path: tuple[Any, ...], leaf: Any) -> None:
        if isinstance(leaf, torch.Tensor):
            path_names[id(leaf)] = _name(path)

    def shape_of_leaf(_path: tuple[Any, ...], leaf: Any, shape: Any) -> None:
        if isinstance(leaf, torch.Tensor):
            shapes[id(leaf)] = shape

    _tree_map_with_path(name_leaf, combined)
    if dynamic is not None:
        tree = type(dynamic)(combined.values()) if isinstance(dynamic, (tuple, list)) else combined
        try:
            _check_dynamic_shapes(dict(combined), dynamic)  # what torch.export checks first, with its messages
            _tree_map_with_path(shape_of_leaf, tree, dynamic, tree_name="inputs")
        except Exception as exc:  # noqa: BLE001 - torch's message says where the structures differ
            message = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            raise SpecError(f"{where}: dynamic_shapes does not match the inputs: {message}") from None

    names: list[str] = []
    dynamic_by_name: dict[str, Any] = {}
    for i in tensor_at:
        name, shape = path_names.get(id(leaves[i]), f"input_{len(names)}"), shapes.get(id(leaves[i]))
        base, n = name, 1
        while name in names:
            n += 1
            name = f"{base}_{n}"
        names.append(name)
        if shape is not None:
            dynamic_by_name[name] = shape

    params = ", ".join(names)
    source = f"def forward(self, {params}):\n    return self.call(({params},))\n"
    namespace: dict[str, Any] = {}
    exec(source, namespace)  # noqa: S102 - names are identifiers made by _name()
    cls = type(f"Flat{type(model).__name__}", (FlatModel,), {"forward": namespace["forward"]})
    flat = cls(model, treespec, leaves, tensor_at)
    example = tuple(leaves[i] for i in tensor_at)
    in_eval_mode(flat)  # the wrapper and, where it allows it, the model it wraps
    return FlatSpec(flat, example, dynamic_by_name or None, names, strict)


PROGRAM_KEYS = ("methods", "share_mutable_buffers")


class ProgramSpec(NamedTuple):
    """A spec made flat: one :class:`FlatSpec` per method (``{"forward": ...}`` for a plain spec), whether the spec
    was a program of methods (``several``, even for one), and the program's memory-planning option."""

    methods: dict[str, FlatSpec]
    several: bool
    share_mutable_buffers: bool = False


def flatten_program(spec: Any, *, where: str = "the spec") -> ProgramSpec:
    """``{"methods": {name: spec}, "share_mutable_buffers": bool}`` gives one :class:`FlatSpec` per method; a plain
    spec gives ``{"forward": ...}``. Raises :class:`SpecError`."""
    if not (isinstance(spec, dict) and "methods" in spec):
        return ProgramSpec({"forward": flatten_spec(spec, where=where)}, False)
    extra = sorted(set(spec) - set(PROGRAM_KEYS))
    if extra:
        raise SpecError(f"{where}: a program spec has only {' and '.join(map(repr, PROGRAM_KEYS))}; found also "
                        f"{', '.join(map(repr, extra))}")
    share = spec.get("share_mutable_buffers", False)
    if not isinstance(share, bool):
        raise SpecError(f"{where}: 'share_mutable_buffers' is {share!r}; expected True or False")
    methods = spec["methods"]
    if not isinstance(methods, dict) or not methods:
        raise SpecError(f"{where}: 'methods' must be a non-empty dict {{method name: spec}}")
    for name in methods:
        if not isinstance(name, str) or not name.isidentifier():
            raise SpecError(f"{where}: method name {name!r} is not a Python identifier")
    return ProgramSpec({name: flatten_spec(method, where=f"{where} method {name!r}")
                        for name, method in methods.items()}, True, share)
