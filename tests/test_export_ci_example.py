"""Export CI: the program we ship must match the app's eager model inside its input contract, keep the
delegation we expect, accept what the device really sends, and be refused outside the contract.

Copy this file into your repository and edit the CONFIG section. It needs only ``torch``,
``executorch`` and ``pytest`` (the CONFIG below imports a model from exportlab; import yours) and
takes a few seconds.

What it checks, on the real pipeline (``torch.export`` → XNNPACK → ``.pte`` → ExecuTorch runtime bindings):

1. export, lowering and loading succeed (a failure fails the test run: read it);
2. the ``.pte`` records the contract's maximum shape for every input (``MethodMeta``), so the device's
   memory plan covers the whole range you declared (a ``Dim`` without ``max`` does not);
3. only the operators you accept run on portable kernels (``ALLOWED_PORTABLE_OPS``): a partitioner
   that starts declining an operator (a dynamic size, a new op) fails the job instead of slowing the app;
4. every input the device really sends (``DEVICE_INPUTS``, e.g. from the app's logs) is inside the
   contract and matches the reference;
5. INSIDE the contract — every ``Dim`` at min, min+1, middle, max-1 and max (inputs sharing a ``Dim``
   move together), with values of several kinds — the runtime's outputs match ``REFERENCE``: the eager
   model *as the app configures it* (flags included), which need not be the object you exported;
6. OUTSIDE the contract — every ``Dim`` at min-1 and max+1, every static axis ±1, a tie between two
   inputs broken — :func:`check_contract`, the host-side check the app must run before calling the
   model, refuses the input (ExecuTorch strips export's asserts: the device does not check a ``Dim``'s
   min, nor that tied axes are equal, nor an axis above its max that still fits the capacity). Only the
   probes above the planned capacity are also sent to the runtime, which must refuse them itself; the
   others are never run: a zero-size tensor, a broken tie or a changed static axis on a delegated
   dynamic program is undefined behaviour in the XNNPACK delegate.

Not covered as written: Python scalar inputs (export bakes their value in: list the values the app
passes and export one method per value, or make them tensors).
"""

from __future__ import annotations

import contextlib
import io

import pytest
import torch
from torch.export import Dim

# ===== CONFIG: the model you ship, how the app uses it, and the dynamic dimensions you promise =====
from helpers.models import TokenPool  # your model here

MODEL = TokenPool().eval()  # what is exported
REFERENCE = MODEL  # the eager model as the app configures it (same flags, same weights)
SEQ = Dim("seq", min=2, max=128)
EXAMPLE = (torch.randint(0, 32, (1, 16), generator=torch.Generator().manual_seed(0)), torch.ones(1, 16))
DYNAMIC_SHAPES = {"ids": {1: SEQ}, "mask": {1: SEQ}}
INPUT_NAMES = ("ids", "mask")  # forward()'s parameter names, in order
DEVICE_INPUTS = [  # what the device really sends (shapes from the app's logs)
    ("a 24-token request", (torch.randint(0, 32, (1, 24), generator=torch.Generator().manual_seed(1)),
                            torch.ones(1, 24))),
    ("a 100-token request", (torch.randint(0, 32, (1, 100), generator=torch.Generator().manual_seed(2)),
                             torch.ones(1, 100))),
]
ALLOWED_PORTABLE_OPS = {"aten_embedding_default", "aten_sum_dim_int_list"}  # XNNPACK has no rule for these
ATOL, RTOL = 1e-4, 1e-4
# ================================================================================================


def _dims() -> dict[str, tuple[Dim, list[tuple[int, int]]]]:
    """{Dim name: (Dim, [(input index, axis), ...])} — a Dim used on two inputs ties those axes."""
    found: dict[str, tuple[Dim, list[tuple[int, int]]]] = {}
    for i, name in enumerate(INPUT_NAMES):
        for axis, dim in ((DYNAMIC_SHAPES or {}).get(name) or {}).items():
            found.setdefault(dim.__name__, (dim, []))[1].append((i, axis))
    return found


def _upper(dim: Dim) -> int | None:
    """The Dim's max, or None when it has none (ExecuTorch then plans the example's size)."""
    return int(dim.max) if dim.max is not None and int(dim.max) < 2**31 else None


DIMS = _dims()
DYNAMIC_AXES = {loc for _, locs in DIMS.values() for loc in locs}
# the largest size to probe for each Dim: its max, or (a Dim without max) twice the example's size
TOP = {name: _upper(dim) or 2 * max(EXAMPLE[i].shape[axis] for i, axis in locs) for name, (dim, locs) in DIMS.items()}


def check_contract(args: tuple[torch.Tensor, ...]) -> list[str]:
    """Every way ``args`` break the contract (empty if none). Ship the same check in the app."""
    problems = []
    if len(args) != len(EXAMPLE):
        return [f"expected {len(EXAMPLE)} inputs, got {len(args)}"]
    for i, (arg, example) in enumerate(zip(args, EXAMPLE)):
        if arg.dtype != example.dtype or arg.dim() != example.dim():
            problems.append(f"{INPUT_NAMES[i]}: expected {example.dtype} rank {example.dim()}, got {arg.dtype} "
                            f"rank {arg.dim()}")
            continue
        for axis, size in enumerate(arg.shape):
            if (i, axis) not in DYNAMIC_AXES and size != example.shape[axis]:
                problems.append(f"{INPUT_NAMES[i]} axis {axis}: static {example.shape[axis]}, got {size}")
    for name, (dim, locs) in DIMS.items():
        sizes = {args[i].shape[axis] for i, axis in locs if args[i].dim() > axis}
        if len(sizes) > 1:
            problems.append(f"Dim {name}: tied axes differ {sorted(sizes)}")
        for size in sizes:
            if size < dim.min or (_upper(dim) is not None and size > _upper(dim)):
                problems.append(f"Dim {name}: {size} outside [{dim.min}, {_upper(dim)}]")
    return problems


def _make(sizes: dict[str, int], kind: str, seed: int, static_nudge: tuple[int, int, int] | None = None):
    gen = torch.Generator().manual_seed(seed)
    out = []
    for i, example in enumerate(EXAMPLE):
        shape = list(example.shape)
        for name, (_, locs) in DIMS.items():
            for j, axis in locs:
                if j == i:
                    shape[axis] = sizes[name]
        if static_nudge and static_nudge[0] == i:
            shape[static_nudge[1]] += static_nudge[2]
        if example.is_floating_point():
            base = torch.randn(shape, generator=gen)
            value = {"random": base, "zeros": torch.zeros(shape), "ones": torch.ones(shape), "large": base * 1e3,
                     "positive": base.abs() + 0.1, "negative": -(base.abs() + 0.1)}[kind]
            out.append(value.to(example.dtype))
        else:
            lo, hi = int(example.min()), int(example.max())
            out.append(torch.randint(lo, hi + 1, shape, generator=gen, dtype=example.dtype))
    return tuple(out)


def inside_probes():
    middle = {n: (d.min + TOP[n]) // 2 for n, (d, _) in DIMS.items()}
    for kind in ("random", "zeros", "ones", "large", "positive", "negative"):
        yield f"values {kind} at middle", _make(middle, kind, seed=1)
    for name, (dim, _) in DIMS.items():
        for size in sorted({dim.min, dim.min + 1, (dim.min + TOP[name]) // 2, TOP[name] - 1, TOP[name]}):
            for kind in ("random", "negative"):
                yield f"{name}={size} {kind}", _make({**middle, name: size}, kind, seed=size)


def outside_probes():
    middle = {n: (d.min + TOP[n]) // 2 for n, (d, _) in DIMS.items()}
    largest = dict(TOP)
    for name, (dim, locs) in DIMS.items():
        if dim.min >= 1:
            yield f"{name}={dim.min - 1} (below min)", _make({**middle, name: dim.min - 1}, "random", seed=3)
        if _upper(dim) is not None:  # every other Dim at its max too, so the input exceeds the planned capacity
            yield f"{name}={dim.max + 1} (above max)", _make({**largest, name: dim.max + 1}, "random", seed=4)
        if len(locs) > 1:  # break the tie: the last input sharing the Dim gets one more element
            i, axis = locs[-1]
            yield f"{name} tie broken", _make(middle, "random", seed=5, static_nudge=(i, axis, 1))
    for i, example in enumerate(EXAMPLE):
        for axis in range(example.dim()):
            if (i, axis) not in DYNAMIC_AXES:
                for delta in (1, -1):
                    if example.shape[axis] + delta >= 1:
                        yield f"{INPUT_NAMES[i]} axis {axis} {delta:+d}", _make(middle, "random", 6, (i, axis, delta))


@pytest.fixture(scope="module")
def lowered():
    """Export, lower for XNNPACK, serialize, and load the bytes with the runtime bindings (as the app does).
    Returns (the lowered edge program, the loaded runtime program)."""
    from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
    from executorch.exir import to_edge_transform_and_lower
    from executorch.runtime import Runtime

    exported = torch.export.export(MODEL, EXAMPLE, dynamic_shapes=DYNAMIC_SHAPES)
    edge = to_edge_transform_and_lower(exported, partitioner=[XnnpackPartitioner()])
    pte = edge.to_executorch().buffer
    with contextlib.redirect_stderr(io.StringIO()):
        loaded = Runtime.get().load_program(bytes(pte))
    return edge, loaded


@pytest.fixture(scope="module")
def program(lowered):
    return lowered[1]


def run_device(program, args):
    """Run like the device (no host checks). Returns outputs, or None when the runtime refuses."""
    with contextlib.redirect_stderr(io.StringIO()):  # the runtime logs its reason to stderr
        try:  # outputs live in the program's planned memory: copy them before the next call
            return [o.clone() for o in program.load_method("forward").execute(list(args))]
        except RuntimeError:
            return None


def _assert_matches_reference(program, label, args):
    with torch.no_grad():
        expected = REFERENCE(*[a.clone() for a in args])
    outputs = run_device(program, args)
    assert outputs is not None, f"{label}: the runtime refused an input inside the contract"
    expected = expected if isinstance(expected, (tuple, list)) else (expected,)
    for got, want in zip(outputs, expected):
        torch.testing.assert_close(got, want, atol=ATOL, rtol=RTOL, equal_nan=True, msg=lambda m: f"{label}: {m}")


def test_pte_plans_for_the_contract_maximum(program):
    for name, (dim, _) in DIMS.items():
        assert _upper(dim) is not None, f"Dim {name} has no max: ExecuTorch plans its axis at the example's size"
    meta = program.metadata("forward")
    for i, example in enumerate(EXAMPLE):
        expected = list(example.shape)
        for dim, locs in DIMS.values():
            for j, axis in locs:
                if j == i:
                    expected[axis] = dim.max
        assert list(meta.input_tensor_meta(i).sizes()) == expected, INPUT_NAMES[i]


def test_only_the_expected_operators_run_on_portable_kernels(lowered):
    from executorch.devtools.backend_debug import get_delegation_info

    frame = get_delegation_info(lowered[0].exported_program().graph_module).get_operator_delegation_dataframe()
    portable = {str(r["op_type"]) for _, r in frame.iterrows()
                if r["op_type"] not in {"alloc", "getitem", "Total"} and int(r["occurrences_in_non_delegated_graphs"])}
    assert portable <= ALLOWED_PORTABLE_OPS, f"left on portable kernels: {sorted(portable - ALLOWED_PORTABLE_OPS)}"


@pytest.mark.parametrize("label, args", DEVICE_INPUTS, ids=[label for label, _ in DEVICE_INPUTS])
def test_what_the_device_sends_is_inside_the_contract_and_matches(program, label, args):
    assert not check_contract(args), f"{label}: outside the contract: {check_contract(args)}"
    _assert_matches_reference(program, label, args)


INSIDE, OUTSIDE = list(inside_probes()), list(outside_probes())


@pytest.mark.parametrize("label, args", INSIDE, ids=[label for label, _ in INSIDE])
def test_parity_inside_the_contract(program, label, args):
    assert not check_contract(args), label
    _assert_matches_reference(program, label, args)


@pytest.mark.parametrize("label, args", OUTSIDE, ids=[label for label, _ in OUTSIDE])
def test_refused_outside_the_contract(program, label, args):
    assert check_contract(args), f"{label}: outside the contract but the host check let it through"
    if "above max" in label:  # beyond the planned capacity: the device itself must refuse
        assert run_device(program, args) is None, f"{label}: the runtime accepted an input above the planned capacity"
