"""Lessons 06–08 (shapes on device): what a static export records, what a ``Dim`` declares,
and what dynamic shapes cost.

- 06: :func:`camera_frame`, :func:`vision_program` (``TinyVision`` exported at one resolution),
  :func:`read_signature` (the ``.pte``'s own ``MethodMeta`` through the runtime bindings),
  :class:`WideMLP` and :func:`process_memory` (what a process running a ``.pte`` really holds, measured),
  :func:`memory_plan` / :func:`plot_memory_plan` (where each tensor lives in the arena, and what wrote
  it), :class:`FrameTokens`, and the camera-frame widget (:func:`camera_explorer`, :func:`widget_demo`).
- 07: :func:`dim_modes` (``Dim.AUTO`` / ``DYNAMIC`` / ``STATIC`` / named / unbounded side by
  side), two models whose size arithmetic makes export add guards (:class:`ChunkMean`,
  :class:`HalfDiff`) with a rewrite (:class:`ChunkedMean`), and :func:`declined_reasons`.
- 08: :class:`TinySegmenter` (an upsampling model XNNPACK only takes whole when the frame size is
  static), :class:`LowResSegmenter` + :func:`upsample_on_host` (the declined operator moved to the app),
  :func:`segmenter_program`, :func:`arena_vs_max`, and latency measured with its spread
  (:func:`median_latency_ms`, :func:`latency_rounds`, :func:`ratio_sentence`, from :mod:`helpers.timing`: a
  sentence about a timing is computed from the rounds).
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn
from torch.export import Dim

from .. import models
from ..artifact import PteArtifact
from ..lowering import lower
from ..parity import ParityReport, ParityRow
from ..timing import latency_rounds, median_latency_ms, ratio_sentence

__all__ = [
    "VISION_SIZE", "CAMERA_RESOLUTIONS", "camera_frame", "vision_program", "read_signature", "memory_plan",
    "WideMLP", "process_memory",
    "plot_memory_plan", "FrameTokens", "declined_reasons",
    "MethodSignature", "inside_summary", "camera_explorer", "widget_demo", "dim_modes", "ChunkMean", "ChunkedMean", "HalfDiff", "TinySegmenter",
    "segmenter_program", "segmenters_by_max", "arena_vs_max", "median_latency_ms",
    "latency_rounds", "ratio_sentence", "LowResSegmenter", "upsample_on_host",
]

# ----- 06: one resolution, recorded ------------------------------------------------------------
VISION_SIZE = 64
#: Frames a learner can pick in the camera widget: (label, (height, width)).
CAMERA_RESOLUTIONS: list[tuple[str, tuple[int, int]]] = [
    ("64×64 (the export's example)", (64, 64)),
    ("48×64 (4:3 landscape)", (48, 64)),
    ("64×48 (4:3 portrait)", (64, 48)),
    ("36×64 (16:9 landscape)", (36, 64)),
    ("32×128 (same pixel count as 64×64)", (32, 128)),
    ("32×32 (smaller)", (32, 32)),
    ("96×96 (larger)", (96, 96)),
]


def camera_frame(height: int, width: int, seed: int = 0) -> torch.Tensor:
    """A deterministic 1×3×H×W "camera frame" with values in [0, 1] (a smooth gradient plus noise)."""
    gen = torch.Generator().manual_seed(seed * 10_007 + height * 131 + width)
    ys = torch.linspace(0, 1, height).view(1, 1, height, 1)
    xs = torch.linspace(0, 1, width).view(1, 1, 1, width)
    tint = torch.tensor([0.9, 0.5, 0.2]).view(1, 3, 1, 1)
    frame = 0.6 * tint * ys + 0.4 * (1 - tint) * xs + 0.1 * torch.rand(1, 3, height, width, generator=gen)
    return frame.clamp(0, 1)


def vision_program(size: int = VISION_SIZE) -> tuple[nn.Module, PteArtifact, torch.Tensor]:
    """``TinyVision`` exported (static shapes) at ``1×3×size×size``: (model, artifact, example frame)."""
    model = models.TinyVision()
    example = camera_frame(size, size)
    return model, lower(model, (example,)), example


def read_signature(pte: str | Path | bytes | PteArtifact) -> dict[str, Any]:
    """Load a ``.pte`` with the ExecuTorch runtime bindings and return each method's ``MethodMeta``.

    This is what the runtime itself knows about the inputs: sizes, dtype, whether the input
    buffer is memory-planned and how many bytes it holds. It is read from the file, not from
    anything Python remembered at export time.
    """
    from .._runtime import load_program

    if isinstance(pte, PteArtifact):
        with tempfile.TemporaryDirectory() as tmp:
            return read_signature(pte.save(Path(tmp) / "model.pte").read_bytes())
    data = pte if isinstance(pte, bytes) else Path(pte).read_bytes()
    program = load_program(data)  # the runtime's compiled module: what executorch.runtime.Runtime calls
    return {name: MethodSignature(program, program.method_meta(name)) for name in sorted(program.method_names)}


class MethodSignature:
    """A ``MethodMeta`` that keeps its program alive.

    The runtime's ``MethodMeta`` points into the loaded program without owning it: once the
    ``Program`` is garbage-collected, reading the meta reads freed memory (a segfault, at random).
    This wrapper holds the program and forwards everything else to the ``MethodMeta``.
    """

    def __init__(self, program: Any, meta: Any):
        self._program = program
        self._meta = meta

    def __getattr__(self, name: str) -> Any:
        return getattr(self._meta, name)

    def __repr__(self) -> str:
        return repr(self._meta)


def memory_plan(artifact: PteArtifact, method: str = "forward") -> list[dict[str, Any]]:
    """Every memory-planned tensor of ``method``, in execution order: its number (``#``, from 1, as in
    :func:`plot_memory_plan`), what produced it, its shape, bytes, arena and offset in that arena.

    Read back from the serialized program: the offsets were fixed by ``to_executorch()``, before
    the program ever ran. Two tensors with the same offset reuse the same bytes at different times.
    ``made by`` is the operator whose output the tensor is (``input`` for the method's input,
    ``delegate`` for an output of a delegated subgraph; a ``view`` shares the bytes of the tensor it
    views and has no kernel of its own).
    """
    return artifact.memory_plan(method)


def plot_memory_plan(rows: list[dict[str, Any]], title: str = "The memory plan: where each tensor lives"):
    """One horizontal bar per planned tensor (in execution order) at its offset in the arena."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 0.4 * len(rows) + 1.3))
    arena = max(r["offset"] + r["bytes"] for r in rows)
    for i, r in enumerate(rows):
        ax.barh(i, max(r["bytes"], arena * 0.004), left=r["offset"], color="#1565c0", edgecolor="white")
        label = f"{'×'.join(str(s) for s in r['shape'])} · {r['bytes']:,} B"
        if r["bytes"] > arena * 0.25:
            ax.text(r["offset"] + r["bytes"] / 2, i, label, ha="center", va="center", fontsize=7, color="white")
        else:
            ax.text(r["offset"] + max(r["bytes"], arena * 0.004) + arena * 0.01, i, label, ha="left", va="center",
                    fontsize=7, color="#333333")
    ax.set_xlim(0, arena * 1.35)
    ax.set_yticks(range(len(rows)), [f"#{r['#']} {r['made by']}" for r in rows], fontsize=7)
    ax.invert_yaxis()
    ax.set_xlabel("offset in the arena (bytes)")
    ax.set_title(title)
    fig.tight_layout()
    plt.close(fig)
    return fig


class WideMLP(nn.Module):
    """Two 1024×1024 linear layers with a ReLU between them: 8 MB of float32 weights."""

    def __init__(self, features: int = 1024, seed: int = 0):
        super().__init__()
        with models.seeded(seed):
            self.a = nn.Linear(features, features)
            self.b = nn.Linear(features, features)
        self.eval()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.b(torch.relu(self.a(x)))


_MEASURE_RSS = """
import json, sys
import torch
from helpers._runtime import load_program

def rss():
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) * 1024 for line in status if line.startswith("VmRSS"))

data = open(sys.argv[1], "rb").read()
shapes = json.loads(sys.argv[2])
start = rss()
program = load_program(data)
loaded = rss()
method = program.load_method("forward")
ready = rss()
method([torch.zeros(s) for s in shapes])
ran = rss()
print(json.dumps({"load_program": loaded - start, "load_method": ready - loaded, "first_run": ran - ready}))
"""


def process_memory(artifact: PteArtifact, input_shapes: Sequence[Sequence[int]]) -> dict[str, int]:
    """How much a fresh process grows (resident memory, bytes) while it loads ``artifact``'s ``.pte`` with the
    runtime bindings, loads ``forward``, and runs it once on zeros of ``input_shapes``.

    Measured in a new Python process (nothing of this one's caches or allocator state counts), from
    ``/proc/self/status`` (Linux). The growth is what the operating system sees: weights and arena pages
    are counted when first touched, not when reserved.
    """
    import json
    import subprocess
    import sys

    with tempfile.TemporaryDirectory() as tmp:
        path = artifact.save(Path(tmp) / "program.pte")
        done = subprocess.run([sys.executable, "-c", _MEASURE_RSS, str(path), json.dumps([list(s) for s in input_shapes])],
                              capture_output=True, text=True, timeout=300, cwd=Path(__file__).resolve().parents[2])
    if done.returncode != 0:
        raise RuntimeError(f"measuring the process failed: {done.stderr.strip().splitlines()[-1:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


class FrameTokens(nn.Module):
    """Turns a frame into pixel tokens plus a position ramp; every size is read from ``x.shape``."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, c, h, w = x.shape
        tokens = x.reshape(b, c, h * w).transpose(1, 2)  # (b, h*w, c)
        ramp = torch.linspace(0, 1, h * w).unsqueeze(-1)  # (h*w, 1), broadcast over the channels
        return tokens + ramp


def _frame_for(resolution: tuple[int, int], preprocess: str) -> tuple[torch.Tensor]:
    frame = camera_frame(*resolution)
    if preprocess == "letterbox":
        from ..host import letterbox

        frame = letterbox(frame, VISION_SIZE)
    return (frame,)


def _camera_explanation(row: ParityRow, resolution: tuple[int, int], preprocess: str) -> str:
    h, w = resolution
    if row.status == "rejected":
        return (f"The .pte was exported with a 1×3×{VISION_SIZE}×{VISION_SIZE} example, and export recorded those "
                f"sizes as facts. A {h}×{w} frame is a different shape, so the runtime refuses it: nothing resizes "
                "or recompiles on the device. Fix: letterbox the frame to "
                f"{VISION_SIZE}×{VISION_SIZE} on the host (lesson 09), or re-export with bounded Dims (lesson 07).")
    if row.status == "match" and preprocess == "letterbox" and (h, w) != (VISION_SIZE, VISION_SIZE):
        return (f"The host letterboxed the {h}×{w} frame to {VISION_SIZE}×{VISION_SIZE} (resize, keep the aspect "
                "ratio, pad): the .pte sees exactly the shape it was built for.")
    if row.status == "match":
        return "This is the one shape the export recorded: accepted, and it matches eager."
    return ""


def inside_summary(report: ParityReport) -> str:
    """The verdict on the probes inside the contract only (outside rows are refusals or garbage-in)."""
    inside = [r for r in report if r.within_contract]
    bad = [r.label for r in inside if r.status != "match"]
    if not bad:
        return f"all {len(inside)} probes inside the contract match"
    return f"{len(bad)} of {len(inside)} probes inside the contract do not match: {', '.join(bad)}"


def camera_explorer(preprocess: str = "none"):
    """The camera-frame widget: pick a resolution (and a host step) and watch the real ``.pte`` react."""
    import ipywidgets as w

    from ..widgets import ParityExplorer

    model, artifact, _ = vision_program()
    controls = {
        "resolution": w.Dropdown(options=[(label, res) for label, res in CAMERA_RESOLUTIONS],
                                 value=(VISION_SIZE, VISION_SIZE), description="camera"),
        "preprocess": w.ToggleButtons(options=[("feed as is", "none"), ("letterbox on host", "letterbox")],
                                      value=preprocess, description="host step",
                                      style={"button_width": "auto"}),
    }
    return ParityExplorer(model, artifact, _frame_for, controls, explain=_camera_explanation,
                          title=f"TinyVision exported at 1×3×{VISION_SIZE}×{VISION_SIZE}")


def widget_demo():
    """``(explorer, interactions)`` for the benchmarks and the browser tests (see ``helpers.lessons``)."""
    explorer = camera_explorer()
    interactions = [
        ({"resolution": (48, 64), "preprocess": "none"}, "rejected"),
        ({"resolution": (32, 128), "preprocess": "none"}, "rejected"),
        ({"resolution": (64, 64), "preprocess": "none"}, "match"),
        ({"resolution": (96, 96), "preprocess": "none"}, "rejected"),
        ({"resolution": (48, 64), "preprocess": "letterbox"}, "match"),
        ({"resolution": (36, 64), "preprocess": "letterbox"}, "match"),
        ({"resolution": (32, 32), "preprocess": "none"}, "rejected"),
    ]
    return explorer, interactions


def declined_reasons(artifact: PteArtifact, method: str = "forward") -> dict[str, list[str]]:
    """Per operator left on portable kernels, why: the XNNPACK partitioner's own words where it gave any
    (:meth:`DelegationReport.reasons`; kept here so the lessons print one line per operator)."""
    return artifact.delegation(method).reasons()


# ----- 07: declaring dimensions ------------------------------------------------------------------
def dim_modes(model: nn.Module, example: tuple[Any, ...], input_name: str, axis: int,
              specs: dict[str, Any]) -> list[dict[str, Any]]:
    """Export ``model`` once per ``dynamic_shapes`` spec for one axis and report what each recorded.

    Returns one row per spec: the contract export produced (or its error), the range it assumed,
    and the size the memory plan reserved for that axis (the runtime's capacity).
    """
    from ..display import error_excerpt

    rows = []
    for label, spec in specs.items():
        row: dict[str, Any] = {"spec": label}
        try:
            art = lower(model, example, dynamic_shapes={input_name: {axis: spec}})
        except Exception as exc:  # noqa: BLE001 - an export error is a result here
            lines = error_excerpt(exc, max_lines=2).split("\n")
            if "Constraints violated" in lines[0] and len(lines) > 1:  # the header: the reason is the next line
                lines[0] = f"{type(exc).__name__}: {lines[1].strip().removeprefix('- ')}"
            row.update(recorded="export error", range="—", planned="—", note=lines[0][:160])
            rows.append(row)
            continue
        spec_in = next(i for i in art.input_contract().inputs if i.name == input_name)
        ax = spec_in.axes[axis]
        if ax.size is not None:
            row.update(recorded=f"static {ax.size}", range="—", planned=ax.size, note="")
        else:
            hi = "∞" if ax.max is None else ax.max
            row.update(recorded="dynamic", range=f"[{ax.min}, {hi}]", planned=ax.planned, note="")
        row["signature"] = art.input_contract().signature()
        rows.append(row)
    return rows


class ChunkMean(nn.Module):
    """Splits each row of ``x`` (B, T) into 4 chunks with ``x.view(x.shape[0] * 4, -1)`` and averages each.

    With T dynamic, the view only works when T is a multiple of 4: export adds that guard and
    refuses a plain ``Dim('T')``, suggesting ``T = 4*_T``.
    """

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.view(x.shape[0] * 4, -1).mean(dim=1).view(x.shape[0], 4)


class ChunkedMean(nn.Module):
    """The rewrite of :class:`ChunkMean`: the host hands over ``x`` already as (B, 4, L); no size arithmetic."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.mean(dim=2)


class HalfDiff(nn.Module):
    """Indexes by a computed size: ``x[:, :T // 2] - x[:, T // 2:]`` (first half minus second half).

    The two halves only have the same length when T is even: export adds that guard and
    suggests ``T = 2*_T``.
    """

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        half = x.shape[1] // 2
        return x[:, :half] - x[:, half:]


# ----- 08: what dynamic costs ---------------------------------------------------------------------
class TinySegmenter(nn.Module):
    """conv (stride 2) → relu → conv (stride 2) → relu → bilinear upsample ×4 → 1×1 conv: a per-pixel head."""

    def __init__(self, classes: int = 2, seed: int = 0):
        super().__init__()
        with models.seeded(seed):
            self.down1 = nn.Conv2d(3, 8, 3, stride=2, padding=1)
            self.down2 = nn.Conv2d(8, 8, 3, stride=2, padding=1)
            self.classify = nn.Conv2d(8, classes, 1)
        self.eval()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.relu(self.down1(x))
        h = torch.relu(self.down2(h))
        h = F.interpolate(h, scale_factor=4.0, mode="bilinear", align_corners=False)
        return self.classify(h)


class LowResSegmenter(TinySegmenter):
    """:class:`TinySegmenter` without its upsample: the per-pixel classes at a quarter of the resolution.

    The app upsamples them (bilinear ×4, :func:`upsample_on_host`). A 1×1 convolution and a bilinear
    upsample commute (the upsample averages with weights that sum to 1), so the pipeline computes
    what ``TinySegmenter`` computes, and the operator XNNPACK declines on dynamic sizes is no
    longer in the program.
    """

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.relu(self.down1(x))
        h = torch.relu(self.down2(h))
        return self.classify(h)


def upsample_on_host(low_res: torch.Tensor) -> torch.Tensor:
    """The app's step after :class:`LowResSegmenter`: bilinear ×4, as ``TinySegmenter`` did inside."""
    return F.interpolate(low_res, scale_factor=4.0, mode="bilinear", align_corners=False)


def segmenter_program(max_side: int | None = None, size: int = VISION_SIZE,
                      min_side: int = 32) -> tuple[nn.Module, PteArtifact, torch.Tensor, Any]:
    """``TinySegmenter`` at ``size×size``: static (``max_side=None``) or with height and width dynamic
    (``Dim('height')`` and ``Dim('width')``, each ``min_side..max_side``).

    Returns (model, artifact, example, dynamic_shapes).
    """
    model = TinySegmenter()
    example = camera_frame(size, size)
    if max_side is None:
        return model, lower(model, (example,)), example, None
    dynamic = {"x": {2: Dim("height", min=min_side, max=max_side), 3: Dim("width", min=min_side, max=max_side)}}
    return model, lower(model, (example,), dynamic_shapes=dynamic), example, dynamic


def segmenters_by_max(maxes: Sequence[int]) -> dict[int, PteArtifact]:
    """The dynamic segmenter's program for each ``max`` side (each a real export + lowering, cached), built without
    a progress line per program."""
    from helpers import lowering

    with lowering.progress_lines(False):
        return {m: segmenter_program(max_side=m)[1] for m in maxes}


def arena_vs_max(maxes: Sequence[int], build: Callable[[int], PteArtifact], method: str = "forward") -> list[int]:
    """Planned arena bytes of ``build(max)`` for each ``max`` (each a real export + lowering, cached)."""
    return [build(m).planned_memory_bytes(method) for m in maxes]
