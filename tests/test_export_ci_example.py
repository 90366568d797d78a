"""Export CI: the model we ship must match eager inside its input contract and be refused outside it.

Copy this file into your repository and edit the CONFIG section. It needs only
``torch``, ``executorch`` and ``pytest`` — nothing from exportlab — and takes a few seconds.

What it checks, on the real pipeline (``torch.export`` → XNNPACK → ``.pte`` → ExecuTorch runtime bindings):

1. the ``.pte`` records the contract's maximum shape for every input (``MethodMeta``), so the
   device's memory plan covers the whole range you declared;
2. INSIDE the contract — every ``Dim`` at min, min+1, middle, max-1 and max (inputs sharing a ``Dim``
   move together), with values of several kinds — the runtime's outputs match eager PyTorch;
3. OUTSIDE the contract — every ``Dim`` at min-1 and max+1, every static axis ±1, a tie between two
   inputs broken — the input is refused: by the runtime where it checks (static sizes, capacity) and
   otherwise by :func:`check_contract`, the host-side check the app must run before calling the model
   (ExecuTorch strips export's asserts: the device does not check a ``Dim``'s min, nor that tied axes
   are equal, nor an axis above its max that still fits the planned capacity).
"""

from __future__ import annotations

import contextlib
import io

import pytest
import torch
from torch.export import Dim

# ===== CONFIG: the model you ship, one example input, and the dynamic dimensions you promise ======
from helpers.models import TokenPool  # your model here

SEQ = Dim("seq", min=2, max=128)
MODEL = TokenPool().eval()
EXAMPLE = (torch.randint(0, 32, (1, 16), generator=torch.Generator().manual_seed(0)), torch.ones(1, 16))
DYNAMIC_SHAPES = {"ids": {1: SEQ}, "mask": {1: SEQ}}
INPUT_NAMES = ("ids", "mask")  # forward()'s parameter names, in order
ATOL, RTOL = 1e-4, 1e-4
# ================================================================================================


def _dims() -> dict[str, tuple[Dim, list[tuple[int, int]]]]:
    """{Dim name: (Dim, [(input index, axis), ...])} — a Dim used on two inputs ties those axes."""
    found: dict[str, tuple[Dim, list[tuple[int, int]]]] = {}
    for i, name in enumerate(INPUT_NAMES):
        for axis, dim in (DYNAMIC_SHAPES.get(name) or {}).items():
            found.setdefault(dim.__name__, (dim, []))[1].append((i, axis))
    return found


DIMS = _dims()
DYNAMIC_AXES = {loc for _, locs in DIMS.values() for loc in locs}


def check_contract(args: tuple[torch.Tensor, ...]) -> list[str]:
    """Every way ``args`` break the contract (empty if none). Ship the same check in the app."""
    problems = []
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
            if not dim.min <= size <= dim.max:
                problems.append(f"Dim {name}: {size} outside [{dim.min}, {dim.max}]")
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
                     "positive": base.abs()}[kind]
            out.append(value.to(example.dtype))
        else:
            lo, hi = int(example.min()), int(example.max())
            out.append(torch.randint(lo, hi + 1, shape, generator=gen, dtype=example.dtype))
    return tuple(out)


def inside_probes():
    middle = {n: (d.min + d.max) // 2 for n, (d, _) in DIMS.items()}
    for kind in ("random", "zeros", "ones", "large", "positive"):
        yield f"values {kind} at middle", _make(middle, kind, seed=1)
    for name, (dim, _) in DIMS.items():
        for size in sorted({dim.min, dim.min + 1, (dim.min + dim.max) // 2, dim.max - 1, dim.max}):
            yield f"{name}={size}", _make({**middle, name: size}, "random", seed=size)


def outside_probes():
    middle = {n: (d.min + d.max) // 2 for n, (d, _) in DIMS.items()}
    largest = {n: d.max for n, (d, _) in DIMS.items()}
    for name, (dim, locs) in DIMS.items():
        if dim.min >= 1:
            yield f"{name}={dim.min - 1} (below min)", _make({**middle, name: dim.min - 1}, "random", seed=3)
        # every other Dim at its max too, so the input exceeds the planned capacity
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
def program():
    """Export, lower for XNNPACK, serialize, and load the bytes with the runtime bindings (as the app does)."""
    from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
    from executorch.exir import to_edge_transform_and_lower
    from executorch.runtime import Runtime

    exported = torch.export.export(MODEL, EXAMPLE, dynamic_shapes=DYNAMIC_SHAPES)
    pte = to_edge_transform_and_lower(exported, partitioner=[XnnpackPartitioner()]).to_executorch().buffer
    with contextlib.redirect_stderr(io.StringIO()):
        loaded = Runtime.get().load_program(bytes(pte))
    return loaded


def run_device(program, args):
    """Run like the device (no host checks). Returns outputs, or None when the runtime refuses."""
    with contextlib.redirect_stderr(io.StringIO()):  # the runtime logs its reason to stderr
        try:  # outputs live in the program's planned memory: copy them before the next call
            return [o.clone() for o in program.load_method("forward").execute(list(args))]
        except RuntimeError:
            return None


def test_pte_plans_for_the_contract_maximum(program):
    meta = program.metadata("forward")
    for i, example in enumerate(EXAMPLE):
        expected = list(example.shape)
        for dim, locs in DIMS.values():
            for j, axis in locs:
                if j == i:
                    expected[axis] = dim.max
        assert list(meta.input_tensor_meta(i).sizes()) == expected, INPUT_NAMES[i]


INSIDE, OUTSIDE = list(inside_probes()), list(outside_probes())


@pytest.mark.parametrize("label, args", INSIDE, ids=[label for label, _ in INSIDE])
def test_parity_inside_the_contract(program, label, args):
    assert not check_contract(args), label
    with torch.no_grad():
        expected = MODEL(*[a.clone() for a in args])
    outputs = run_device(program, args)
    assert outputs is not None, f"{label}: the runtime refused an input inside the contract"
    expected = expected if isinstance(expected, (tuple, list)) else (expected,)
    for got, want in zip(outputs, expected):
        torch.testing.assert_close(got, want, atol=ATOL, rtol=RTOL, msg=lambda m: f"{label}: {m}")


@pytest.mark.parametrize("label, args", OUTSIDE, ids=[label for label, _ in OUTSIDE])
def test_refused_outside_the_contract(program, label, args):
    refused_by_host = bool(check_contract(args))
    refused_by_runtime = run_device(program, args) is None
    assert refused_by_host, f"{label}: outside the contract but the host check let it through"
    if "above max" in label:  # beyond the planned capacity: the device itself must refuse
        assert refused_by_runtime, f"{label}: the runtime accepted an input above the planned capacity"
