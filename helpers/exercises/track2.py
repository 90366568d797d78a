"""Exercises of the shapes track (lessons 06–10).

Each exercise names its reference (the intended behaviour: eager PyTorch, or the truth read from a real
``.pte``), the starter (a cell of the lesson, read from its source), the solution (below, shown only on
request) and its grade: the real pipeline, probes on both sides of every bound, and the lesson's own
criterion (what the file records, the host contract refusing what it must, arena bytes, padding waste,
bugs caught by a CI probe set).
"""

from __future__ import annotations

import contextlib
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import torch
from torch import nn
from torch.export import Dim

from .. import models as M
from ..contract import InputContractError
from ..display import error_excerpt
from ..lowering import lower
from ..parity import Probe
from .grading import Exercise, Verdict, lowered, parity

__all__ = ["EXERCISES"]


def _base_context() -> dict[str, Any]:
    return {"torch": torch, "nn": nn, "Dim": Dim}


def _gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _values(shape: tuple[int, ...], kind: str, seed: int) -> torch.Tensor:
    base = torch.randn(shape, generator=_gen(seed))
    return {"random": base, "positive": base.abs() + 0.1, "negative": -(base.abs() + 0.1),
            "large": base * 100.0}[kind]


def _callable(answer: Any, what: str) -> Verdict:
    if callable(answer) and not isinstance(answer, nn.Module):
        return Verdict(f"{what} is a function", True)
    return Verdict(f"{what} is a function", False, f"the answer is a {type(answer).__name__}",
                   f"assign the function itself: `answer = {what}` (no parentheses)")


def _dynamic_shapes(answer: Any, example_names: tuple[str, ...]) -> Verdict:
    criterion = "a dynamic_shapes dict"
    if not isinstance(answer, dict):
        return Verdict(criterion, False, f"the answer is a {type(answer).__name__}",
                       "assign a dict like {'x': {1: Dim(...)}}: forward()'s argument name → {axis: Dim}")
    unknown = sorted(set(answer) - set(example_names))
    if unknown:
        return Verdict(criterion, False, f"it names {unknown}, but forward() takes {list(example_names)}",
                       "key the dict by forward()'s argument names")
    return Verdict(criterion, True)


def _refused_on_host(art: Any, args: tuple[Any, ...]) -> tuple[bool, str]:
    """Does ``art.run`` (the host contract check) refuse ``args`` before the runtime? (and its words)."""
    try:
        art.input_contract().check(args)
    except InputContractError as exc:
        return True, exc.violations[0].describe()
    return False, ""


def _host_run(art: Any) -> Callable[[Probe], tuple[Any, ...]]:
    """What the app does: check the contract on the host (``art.run``), then run the runtime."""
    return lambda probe: art.run(*probe.args)


# ----- 06 · read the input signature from the .pte ------------------------------------------------------
def _signature_files(folder: Path) -> dict[str, tuple[Path, list[tuple[int, ...]]]]:
    """Three real programs, saved as .pte files, with the input shapes their MethodMeta records."""
    from ..lessons import shapes

    vision = M.TinyVision()
    static = lower(vision, (shapes.camera_frame(64, 64),))
    tokens = M.TokenPool()
    ids = torch.randint(0, 32, (1, 12), generator=_gen(6))
    pair = lower(tokens, (ids, torch.ones(1, 12)))
    hw = {"x": {2: Dim("height", min=32, max=96), 3: Dim("width", min=32, max=128)}}
    dynamic = lower(vision, (shapes.camera_frame(64, 64),), dynamic_shapes=hw)
    files = {}
    for name, art in (("tiny_vision_64x64.pte", static), ("token_pool_two_inputs.pte", pair),
                      ("tiny_vision_dynamic_hw.pte", dynamic)):
        files[name] = (art.save(folder / name), [tuple(s) for s in art.runtime_input_shapes()])
    return files


@contextlib.contextmanager
def _programs_kept_alive() -> Iterator[None]:
    """Keep every program the learner's function loads alive until the check ends.

    A ``MethodMeta`` points into its program without owning it: ``load_program(path).metadata(...)``
    read after the program was garbage-collected reads freed memory. The lesson says to keep the
    program; the check must not crash the kernel when a first attempt does not.
    """
    from executorch.runtime import Runtime

    kept: list[Any] = []
    original = Runtime.load_program

    def load_and_keep(self, *args, **kwargs):
        program = original(self, *args, **kwargs)
        kept.append(program)
        return program

    Runtime.load_program = load_and_keep
    try:
        yield
    finally:
        Runtime.load_program = original
        _KEPT.extend(kept)  # MethodMeta objects the learner still holds may point into them


_KEPT: list[Any] = []


def _as_shapes(value: Any) -> list[tuple[int, ...]] | None:
    try:
        return [tuple(int(s) for s in shape) for shape in value]
    except TypeError:
        return None


def _grade_read_signature(answer: Any) -> list[Verdict]:
    verdicts = [_callable(answer, "input_shapes")]
    if not verdicts[0].passed:
        return verdicts
    criterion = "returns every input's shape, as the .pte records it, for every file"
    with tempfile.TemporaryDirectory() as tmp, _programs_kept_alive():
        files = _signature_files(Path(tmp))
        for name, (path, truth) in files.items():
            try:
                got = answer(str(path))
            except Exception as exc:  # noqa: BLE001 - the learner's code may fail in any way
                verdicts.append(Verdict(criterion, False, f"on {name}: your function raised {error_excerpt(exc, 2)}",
                                        "load the file with Runtime.get().load_program(path) and keep that program "
                                        "in a variable while you read program.metadata('forward')"))
                return verdicts
            shapes = _as_shapes(got)
            if shapes != truth:
                verdicts.append(Verdict(criterion, False, f"on {name}: your function returned {got!r}; the file records "
                                        f"{truth}", _signature_hint(shapes, truth)))
                return verdicts
    verdicts.append(Verdict(criterion, True, "3 files: one static input, two inputs, a dynamic input (its max shape)"))
    return verdicts


def _signature_hint(got: list[tuple[int, ...]] | None, truth: list[tuple[int, ...]]) -> str:
    if got is None:
        return "return a list with one tuple of ints per input, e.g. [(1, 16), (1, 16)]"
    if len(got) < len(truth):
        return "this file has more than one input: MethodMeta says how many (num_inputs()); read each TensorInfo"
    return ("read the sizes from the file you are given (MethodMeta → input_tensor_meta(i).sizes()), not from "
            "the lesson's program: each file records its own contract")


_READ_SIGNATURE_SOLUTION = '''
from executorch.runtime import Runtime


def input_shapes(pte_path):
    program = Runtime.get().load_program(pte_path)  # keep it: the MethodMeta points into it
    meta = program.metadata("forward")
    return [tuple(meta.input_tensor_meta(i).sizes()) for i in range(meta.num_inputs())]


answer = input_shapes
'''



# ----- 07 · bound the frames axis of ShapeBranch ---------------------------------------------------------
_CLIP = (1, 8, 4)  # the example clip: 8 frames of 4 features


def _clip(frames: int, kind: str = "random", seed: int = 0) -> torch.Tensor:
    return _values((1, frames, 4), kind, 100 + 7 * frames + seed)


def _grade_bound_dim(answer: Any) -> list[Verdict]:
    verdicts = [_dynamic_shapes(answer, ("x",))]
    if not verdicts[0].passed:
        return verdicts
    reference = M.ShapeBranch()
    art, verdict = lowered(reference, (_clip(8),), answer, hint=(
        "dynamic_shapes maps forward()'s argument to {axis: Dim(name, min=..., max=...)}; the example has 8 frames, "
        "so the range must contain 8"))
    verdicts.append(verdict)
    if art is None:
        return verdicts
    probes = [Probe(f"a clip of {n} frames ({kind} values)", (_clip(n, kind),))
              for n in (2, 3, 8, 15, 16) for kind in ("random", "positive", "large")]
    verdicts.append(parity(reference, art, probes, run=_host_run(art),
                           criterion="clips of 2–16 frames pass the host check, run and match eager", hint=(
                               "every length from 2 to 16 must be inside the contract, and the memory plan must "
                               "hold the longest clip: what does ExecuTorch plan for an axis without a max?")))
    if not verdicts[-1].passed:
        return verdicts
    one = _clip(1)
    refused, words = _refused_on_host(art, (one,))
    if not refused:
        (device,) = art.run_raw(one)
        with torch.no_grad():
            eager = reference(one)
        verdicts.append(Verdict(
            "a one-frame clip is outside the contract (refused on the host)", False,
            f"a one-frame clip is inside your contract: the host check lets it through, the .pte returns "
            f"{_fmt(device)}, eager {_fmt(eager)}",
            "export traced forward() assuming at least 2 frames (0/1 specialization), so only the normalising branch "
            "is in the graph; declare the range the graph really supports"))
        return verdicts
    verdicts.append(Verdict("a one-frame clip is outside the contract (refused on the host)", True,
                            f"run() refuses it: {words.split('. Fix')[0]}"))
    axis = art.input_contract().inputs[0].axes[1]
    needed = lower(reference, (_clip(8),), dynamic_shapes={"x": {1: Dim("frames", min=2, max=16)}})
    if axis.planned is None or axis.planned > 16:
        verdicts.append(Verdict(
            "the memory plan holds 16 frames, not more", False,
            f"your program plans {axis.planned} frames: an arena of {art.planned_memory_bytes():,} bytes, where 16 frames "
            f"need {needed.planned_memory_bytes():,}",
            "the arena is planned for the Dim's max and held on every call: make the max the longest clip the app sends"))
        return verdicts
    verdicts.append(Verdict("the memory plan holds 16 frames, not more", True,
                            f"arena {art.planned_memory_bytes():,} bytes for at most {axis.planned} frames"))
    return verdicts


def _fmt(t: torch.Tensor) -> str:
    from ..display import fmt

    return fmt(t)


_BOUND_DIM_SOLUTION = '''
# forward() only normalises when x.shape[1] > 1: export traced it with >= 2 frames, so that is the real minimum.
# The max is the longest clip the app sends: the arena is planned for it.
answer = {"x": {1: Dim("frames", min=2, max=16)}}
'''


# ----- 07 · a derived Dim for ChunkMean -------------------------------------------------------------------
def _rows(length: int, kind: str = "random") -> torch.Tensor:
    return _values((2, length), kind, 300 + length)


def _grade_derived_dim(answer: Any) -> list[Verdict]:
    from ..lessons.shapes import ChunkMean

    verdicts = [_dynamic_shapes(answer, ("x",))]
    if not verdicts[0].passed:
        return verdicts
    reference = ChunkMean()
    art, verdict = lowered(reference, (_rows(32),), answer, hint=(
        "read what torch suggests: a root Dim, and T derived from it"))
    verdicts.append(verdict)
    if art is None:
        return verdicts
    probes = [Probe(f"T={t} ({kind} values)", (_rows(t, kind),)) for t in (8, 12, 16, 36, 60, 64)
              for kind in ("random", "large")]
    verdicts.append(parity(reference, art, probes, run=_host_run(art),
                           criterion="every T = 8, 12, …, 64 passes the host check, runs and matches eager", hint=(
                               "the root Dim is the length of one chunk (T / 4): its max sets the longest T the program accepts")))
    if not verdicts[-1].passed:
        return verdicts
    refused, words = _refused_on_host(art, (_rows(30),))
    if not refused:
        verdicts.append(Verdict("T=30 is refused on the host", False,
                                "T=30 (not a multiple of 4) passes your host check and reaches the runtime",
                                "make T a multiple of 4 (the number of chunks) in the contract, so the host check refuses 30"))
        return verdicts
    verdicts.append(Verdict("T=30 is refused on the host", True, words.split(". Fix")[0]))
    static = lower(reference, (_rows(32),))
    mine, theirs = art.delegation(), static.delegation()
    left = "; ".join(f"{op}: {', '.join(why)}" for op, why in _reasons(art).items()) or "nothing"
    verdicts.append(Verdict(
        "delegation re-checked: as much of the graph on XNNPACK as the static export",
        mine.delegated_nodes >= theirs.delegated_nodes,
        f"{mine.delegated_nodes} of {mine.delegated_nodes + mine.portable_nodes} nodes delegated (static export: "
        f"{theirs.delegated_nodes} of {theirs.delegated_nodes + theirs.portable_nodes}); on portable kernels: {left}",
        "a dynamic size can make the partitioner decline operators: compare art.delegation() with the static export"))
    return verdicts


def _reasons(art: Any) -> dict[str, list[str]]:
    from ..lessons.shapes import declined_reasons

    return declined_reasons(art)


_DERIVED_DIM_SOLUTION = '''
# The view splits each row into 4 chunks of T / 4 values: declare the chunk length and derive T from it (what torch
# suggests).
chunk = Dim("chunk", min=2, max=16)  # T from 8 to 64
answer = {"x": {1: 4 * chunk}}
'''


# ----- 08 · a dynamic segmenter within an arena budget ---------------------------------------------------
ARENA_BUDGET = 400 * 1024  # bytes the app can give this model's memory plan
FLEET = ((48, 64), (64, 64), (96, 96))  # the frames the fleet's cameras deliver


def _grade_arena_budget(answer: Any) -> list[Verdict]:
    from ..lessons import shapes

    verdicts = [_dynamic_shapes(answer, ("x",))]
    if not verdicts[0].passed:
        return verdicts
    reference = shapes.TinySegmenter()
    art, verdict = lowered(reference, (shapes.camera_frame(64, 64),), answer, hint=(
        "height is axis 2 and width axis 3 of x (1, 3, H, W); the 64×64 example must be inside every range"))
    verdicts.append(verdict)
    if art is None:
        return verdicts
    probes = [Probe(f"the fleet's {h}×{w} frame" + ("" if seed == 0 else f" (seed {seed})"),
                    (shapes.camera_frame(h, w, seed=seed),)) for h, w in FLEET for seed in (0, 1)]
    verdicts.append(parity(reference, art, probes, run=_host_run(art),
                           criterion="every frame of the fleet passes the host check, runs and matches eager", hint=(
                               "each camera size must be inside the contract: the largest frame sets the max")))
    if not verdicts[-1].passed:
        return verdicts
    arena = art.planned_memory_bytes()
    verdicts.append(Verdict(
        f"the memory plan fits the budget of {ARENA_BUDGET:,} bytes", arena <= ARENA_BUDGET,
        f"the arena is {arena:,} bytes" + ("" if arena <= ARENA_BUDGET else f", {arena - ARENA_BUDGET:,} over"),
        "the arena is planned for the largest frame the contract allows (it grows with height × width): give each "
        "Dim the largest size the fleet really sends"))
    return verdicts


_ARENA_BUDGET_SOLUTION = '''
# The arena is planned for the max of each Dim: make it the largest frame the fleet sends (96×96), not more.
height = Dim("height", min=32, max=96)
width = Dim("width", min=32, max=96)
answer = {"x": {2: height, 3: width}}
'''


# ----- 09 · choose the buckets from the length distribution ----------------------------------------------
MAX_BUCKETS = 4  # each bucket is one more method of the .pte: the team's budget
WASTE_TARGET = 0.28  # at most this share of processed positions may be padding


def _bucket_sizes(answer: Any) -> tuple[tuple[int, ...] | None, Verdict]:
    criterion = "a list of bucket sizes (whole numbers of tokens)"
    if isinstance(answer, (str, bytes)):
        return None, Verdict(criterion, False, f"the answer is the string {answer!r}",
                             "assign a list of ints, e.g. [128, 512]")
    try:
        sizes = tuple(sorted({int(b) for b in answer}))
    except (TypeError, ValueError):
        return None, Verdict(criterion, False, f"the answer is {answer!r}", "assign a list of ints, e.g. [128, 512]")
    if not sizes or sizes[0] < 1 or any(isinstance(b, float) and not float(b).is_integer() for b in answer):
        return None, Verdict(criterion, False, f"the answer is {answer!r}", "bucket sizes are positive token counts")
    return sizes, Verdict(criterion, True, "/".join(map(str, sizes)))


def _grade_pick_buckets(answer: Any) -> list[Verdict]:
    from ..lessons import bucketing as B

    buckets, verdict = _bucket_sizes(answer)
    verdicts = [verdict]
    if buckets is None:
        return verdicts
    if len(buckets) > MAX_BUCKETS:
        verdicts.append(Verdict(f"at most {MAX_BUCKETS} buckets", False, f"you have {len(buckets)}",
                                "every bucket is a method to export, test and ship: make the few you have count"))
        return verdicts
    verdicts.append(Verdict(f"at most {MAX_BUCKETS} buckets", True, f"{len(buckets)}"))
    lengths = B.request_lengths()
    unserved = sorted(n for n in lengths if n > buckets[-1])
    if unserved:
        verdicts.append(Verdict(
            "every request is served", False,
            f"{len(unserved)} of {len(lengths)} requests ({unserved[0]} to {unserved[-1]} tokens) are longer than your "
            f"largest bucket ({buckets[-1]}): the app would have to refuse or truncate them",
            "the largest bucket must hold the longest request the product accepts"))
        return verdicts
    verdicts.append(Verdict("every request is served", True, f"the longest request has {max(lengths)} tokens"))
    waste = B.padding_waste(lengths, buckets)
    verdicts.append(Verdict(
        f"padding waste at most {WASTE_TARGET:.0%}", waste <= WASTE_TARGET,
        f"{waste:.1%} of all processed positions are padding",
        "an edge just above a crowd of lengths saves the most padding; look at where request_lengths() is dense "
        "(the histogram) and try candidates with padding_waste(lengths, buckets) before you build anything"))
    if waste > WASTE_TARGET:
        return verdicts
    reference = B.bucket_model()
    files = B.separate_programs(buckets, reference)
    edges = sorted({1} | {b + d for b in buckets for d in (-1, 0, 1) if 1 <= b + d <= buckets[-1]})
    probes = [Probe(f"a {n}-token request", (B.tokens(n), torch.ones(1, n))) for n in edges]
    verdicts.append(parity(
        reference, files[buckets[-1]], probes, run=lambda p: B.dispatch(p.args[0], files, buckets).output,
        criterion="every bucket's edges (n−1, n, n+1) match eager on the unpadded request", hint=(
            "the app pads with token 0 and a mask of 0s: the model must give the same answer as on the request alone")))
    return verdicts


_PICK_BUCKETS_SOLUTION = '''
from itertools import combinations

# Try every set of 3 inner edges on multiples of 32, plus 512 for the longest requests; keep the least padding.
lengths = bucketing.request_lengths()
candidates = range(32, 512, 32)
answer = min(([*inner, 512] for inner in combinations(candidates, 3)),
             key=lambda buckets: bucketing.padding_waste(lengths, buckets))
'''


# ----- 10 · a probe set for the export CI job -------------------------------------------------------------
MAX_PROBES = 400


class _PositiveBranchOnly(M.ScaleOrShift):
    """ScaleOrShift with its sign test resolved at export: only the positive branch (a straight program)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.a(x)


def _probe_scenarios() -> list[dict[str, Any]]:
    """Programs the probe set runs against: four broken ones (each with an in-contract bug) and two correct ones.

    ``dims`` is what the app promises (axis → (min, max)), which is what the learner's probes get."""
    clip = torch.randn(1, 8, 4, generator=_gen(41))
    pair = torch.randn(2, 4, generator=_gen(42))
    positive = pair.abs() + 0.1  # the team's sample input happened to be positive
    return [
        {"name": "one_frame", "broken": True, "example": clip, "dims": {1: (1, 16)}, "reference": M.ShapeBranch(),
         "what": "ShapeBranch exported with Dim('frames', min=1, max=16)",
         "art": lambda: lower(M.ShapeBranch(), (clip,), dynamic_shapes={"x": {1: Dim("frames", min=1, max=16)}}),
         "hint": "the bug hides at one size: probe every Dim at its min and max (and next to them)"},
        {"name": "no_max", "broken": True, "example": clip, "dims": {1: (2, 16)}, "reference": M.ShapeBranch(),
         "what": "ShapeBranch promised 2..16 frames, exported with Dim('frames', min=2) (no max)",
         "art": lambda: lower(M.ShapeBranch(), (clip,), dynamic_shapes={"x": {1: Dim("frames", min=2)}}),
         "hint": "a promised size the program cannot take shows only at the top of the range: probe each Dim's max"},
        {"name": "flag", "broken": True, "example": pair, "dims": {}, "reference": M.ConfigBranch(use_residual=False),
         "what": "ConfigBranch exported with use_residual=True; the app runs it with use_residual=False",
         "art": lambda: lower(M.ConfigBranch(use_residual=True), (pair,)),
         "hint": "compare on inputs with real values; an all-zero input hides a missing `+ x`"},
        {"name": "sign", "broken": True, "example": positive, "dims": {}, "reference": M.ScaleOrShift(),
         "what": "ScaleOrShift's positive branch baked into a straight program; eager branches on the sign",
         "art": lambda: lower(_PositiveBranchOnly(), (positive,)),
         "hint": "a branch on the values shows only with inputs on both sides of it: vary the values' signs"},
        {"name": "frames, correct", "broken": False, "example": clip, "dims": {1: (2, 16)},
         "reference": M.ShapeBranch(), "what": "ShapeBranch exported with Dim('frames', min=2, max=16)",
         "art": lambda: lower(M.ShapeBranch(), (clip,), dynamic_shapes={"x": {1: Dim("frames", min=2, max=16)}}),
         "hint": "only probes inside the contract are compared; outside it, refusing is the host check's job"},
        {"name": "sign, correct", "broken": False, "example": positive, "dims": {}, "reference": M.ScaleOrShift(),
         "what": "ScaleOrShiftWhere (torch.where, both branches) against eager ScaleOrShift",
         "art": lambda: lower(M.ScaleOrShiftWhere(), (positive,)),
         "hint": "only probes inside the contract are compared"},
    ]


def _inside(probe: torch.Tensor, example: torch.Tensor, dims: dict[int, tuple[int, int]]) -> bool:
    if not isinstance(probe, torch.Tensor) or probe.dtype != example.dtype or probe.dim() != example.dim():
        return False
    for axis, (size, fixed) in enumerate(zip(probe.shape, example.shape)):
        lo, hi = dims.get(axis, (fixed, fixed))
        if not lo <= size <= hi:
            return False
    return True


def _grade_probe_set(answer: Any) -> list[Verdict]:
    from ..parity import check_one

    verdicts = [_callable(answer, "probes")]
    if not verdicts[0].passed:
        return verdicts
    for scenario in _probe_scenarios():
        example, dims = scenario["example"], scenario["dims"]
        try:
            made = answer(example.clone(), dict(dims))
            made = list(made)
        except Exception as exc:  # noqa: BLE001 - the learner's code may fail in any way
            verdicts.append(Verdict("probes(example, dims) returns a list of tensors", False,
                                    f"for {scenario['what']}: it raised {error_excerpt(exc, 2)}",
                                    "return a list of tensors shaped like the example (dynamic axes within dims)"))
            return verdicts
        if not all(isinstance(t, torch.Tensor) for t in made) or len(made) > MAX_PROBES:
            verdicts.append(Verdict("probes(example, dims) returns a list of tensors", False,
                                    f"for {scenario['what']}: {len(made)} items, not all tensors or more than "
                                    f"{MAX_PROBES}", f"return at most {MAX_PROBES} tensors"))
            return verdicts
        inside = [t for t in made if _inside(t, example, dims)]
        art = scenario["art"]()
        rows = [check_one(scenario["reference"], art, (t,), label=f"probe {i}") for i, t in enumerate(inside)]
        bad = [(t, r) for t, r in zip(inside, rows) if r.status != "match"]
        label = f"catches the bug in '{scenario['name']}'" if scenario["broken"] else \
            f"no false alarm on '{scenario['name']}'"
        if scenario["broken"] and not bad:
            verdicts.append(Verdict(label, False, f"{scenario['what']}: your {len(inside)} probes inside the contract "
                                    f"({len(made) - len(inside)} outside, not compared) all match",
                                    scenario["hint"]))
            return verdicts
        if not scenario["broken"] and bad:
            t, r = bad[0]
            verdicts.append(Verdict(label, False, f"{scenario['what']}: a probe of shape {tuple(t.shape)} inside the "
                                    f"contract was {_outcome(r)}", scenario["hint"]))
            return verdicts
        if scenario["broken"]:
            t, r = bad[0]
            detail = f"a probe of shape {tuple(t.shape)}: {_outcome(r)}"
        else:
            detail = f"{len(inside)} probes inside the contract match"
        verdicts.append(Verdict(label, True, detail))
    return verdicts


def _outcome(row: Any) -> str:
    """What happened to one probe, without the artifact's view of its contract (the app's promise decides)."""
    text = row.describe().split(" · ")[0]
    return text if row.status in ("match", "diverge") else f"{text}: {row.message.split('. Error')[0]}"


_PROBE_SET_SOLUTION = '''
def probes(example, dims):
    """Every dynamic axis at its min, min+1, middle, max-1 and max; values of both signs, zeros and large ones."""
    g = torch.Generator().manual_seed(0)
    shapes = [tuple(example.shape)]
    for axis, (lo, hi) in dims.items():
        for size in sorted({lo, lo + 1, (lo + hi) // 2, hi - 1, hi}):
            shape = list(example.shape)
            shape[axis] = size
            shapes.append(tuple(shape))
    out = []
    for shape in shapes:
        base = torch.randn(shape, generator=g)
        out += [base, base.abs() + 0.1, -(base.abs() + 0.1), torch.zeros(shape), base * 100]
    return out


answer = probes
'''

EXERCISES = [
    Exercise(
        id="06.read_signature", lesson="06_static_shapes",
        title="read every input's shape from a .pte file, with the runtime bindings",
        goal=("Write input_shapes(pte_path) -> list[tuple[int, ...]]: the shape of every input of the forward "
              "method, read from the .pte file itself through executorch.runtime (MethodMeta), not from what "
              "Python remembered at export time. It is checked on three real files."),
        grade=_grade_read_signature, solution_code=_READ_SIGNATURE_SOLUTION,
        context=_base_context, kind="function"),
    Exercise(
        id="07.bound_dim", lesson="07_dynamic_dims",
        title="give ShapeBranch the frame range it really supports",
        goal=("Write the dynamic_shapes for ShapeBranch (example: 8 frames) so that clips of 2 to 16 frames pass the "
              "host check, run and match eager, a one-frame clip is outside the contract (refused on the host by "
              "run, not silently run), and the memory plan holds 16 frames, not more."),
        grade=_grade_bound_dim, solution_code=_BOUND_DIM_SOLUTION,
        context=lambda: {**_base_context(), "ShapeBranch": M.ShapeBranch}, kind="dynamic_shapes"),
    Exercise(
        id="07.derived_dim", lesson="07_dynamic_dims",
        title="answer ChunkMean's guard with a derived Dim",
        goal=("ChunkMean views each row of x (B, T) as 4 chunks. Write the dynamic_shapes so that every T that is a "
              "multiple of 4 from 8 to 64 exports, passes the host check, runs and matches eager, T=30 is refused on "
              "the host, and the delegation report is no worse than the static export's."),
        grade=_grade_derived_dim, solution_code=_DERIVED_DIM_SOLUTION,
        context=lambda: {**_base_context(), "ChunkMean": _chunk_mean()}, kind="dynamic_shapes"),
    Exercise(
        id="08.arena_budget", lesson="08_cost_of_dynamic",
        title="a dynamic segmenter for the whole fleet, within the arena budget",
        goal=(f"Write the dynamic_shapes for TinySegmenter (example: a 64×64 frame) so that the fleet's frames "
              f"({', '.join(f'{h}×{w}' for h, w in FLEET)}) pass the host check, run and match eager, and the memory "
              f"plan's arena is at most {ARENA_BUDGET:,} bytes."),
        grade=_grade_arena_budget, solution_code=_ARENA_BUDGET_SOLUTION,
        context=lambda: {**_base_context(), "TinySegmenter": _segmenter_class()}, kind="dynamic_shapes"),
    Exercise(
        id="09.pick_buckets", lesson="09_normalize_or_bucket",
        title="bucket sizes for the product's request lengths",
        goal=(f"Choose at most {MAX_BUCKETS} bucket sizes (a list of ints) for the requests of request_lengths(): every "
              f"request must be served, at most {WASTE_TARGET:.0%} of all processed positions may be padding, and each "
              "bucket's edges must match eager on the unpadded request."),
        grade=_grade_pick_buckets, solution_code=_PICK_BUCKETS_SOLUTION,
        context=lambda: {**_base_context(), **_bucket_context()}, kind="buckets"),
    Exercise(
        id="10.probe_set", lesson="10_diagnosis_drills",
        title="a probe set that catches every bug in the export CI job",
        goal=("Write probes(example, dims) -> list[Tensor]: the inputs an export CI job feeds to the .pte and to "
              "eager PyTorch. `example` is the single input tensor the model was exported with; `dims` maps each "
              "dynamic axis to the (min, max) the app promises. The check runs your probes (those inside the "
              "contract) on four broken programs, each wrong on some inputs inside its contract, and on two "
              "correct ones: every bug must be caught, and no correct program may raise a false alarm."),
        grade=_grade_probe_set, solution_code=_PROBE_SET_SOLUTION, context=_base_context, kind="function"),
]



def _chunk_mean() -> type:
    from ..lessons.shapes import ChunkMean

    return ChunkMean


def _segmenter_class() -> type:
    from ..lessons.shapes import TinySegmenter

    return TinySegmenter


def _bucket_context() -> dict[str, Any]:
    from ..lessons import bucketing

    return {"bucketing": bucketing}
