"""Lesson 09 (normalize on the host, or bucket): letterboxing frames, and sequence buckets.

- :func:`letterbox` (from :mod:`helpers.host`): resize a camera frame keeping its aspect ratio, then pad it to the one size
  the static vision export accepts (the host does this; the graph stays static).
- Buckets for ``TokenPool`` (ids + mask): :func:`bucket_model`, :func:`bucket_program` (one
  ``.pte`` whose methods are ``seq_128``, ``seq_256``, …), :func:`separate_programs` (one file per
  bucket), :func:`dispatch` (pick the smallest bucket that fits, pad, mask, run),
  :func:`padding_waste`, :func:`request_lengths`, :func:`tradeoff`, :func:`equal_count_buckets`,
  :func:`plot_lengths` (the length histogram with bucket edges) and :func:`latency_rounds` (mean latency
  per request for bucket sets and a dynamic program, measured in rounds).
- :class:`BucketExplorer` and :func:`widget_demo`: a sequence-length slider showing the chosen
  bucket, the padding waste and the verdict of the real ``.pte`` against eager on the unpadded input.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from .. import models
from .._quiet import captured_output
from ..artifact import PteArtifact
from ..host import letterbox
from ..lowering import lower, lower_methods
from ..parity import ParityRow, check_one
from ..timing import median_latency_ms
from ..widgets import ParityExplorer, render_row

__all__ = [
    "letterbox", "plot_letterbox", "BUCKETS", "VOCAB", "bucket_model", "tokens", "method_name", "bucket_program",
    "separate_programs", "choose_bucket", "pad_to", "Dispatch", "dispatch", "OnOriginalLength", "padding_waste",
    "request_lengths", "tradeoff", "equal_count_buckets", "plot_lengths", "latency_rounds", "BucketExplorer", "bucket_explorer", "widget_demo", "describe_dispatch",
]


# ----- frames: normalize on the host ------------------------------------------------------------
def plot_letterbox(frames: dict[str, torch.Tensor], title: str = "What the model sees"):
    """Frames side by side as images (``1×3×H×W`` in [0, 1]), each at its own pixel size."""
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(frames), figsize=(2.3 * len(frames), 2.5))
    for ax, (label, frame) in zip(list(axes), frames.items()):
        ax.imshow(frame[0].permute(1, 2, 0).clamp(0, 1).numpy(), interpolation="nearest")
        ax.set_title(f"{label}\n{frame.shape[2]}×{frame.shape[3]}", fontsize=8)
        ax.set_xticks([])
        ax.set_yticks([])
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    plt.close(fig)
    return fig


# ----- sequences: buckets -------------------------------------------------------------------------
BUCKETS: tuple[int, ...] = (128, 256, 512)
VOCAB = 1000


def bucket_model() -> models.TokenPool:
    """The sequence model of the lesson: ``TokenPool`` with a 1000-token vocabulary (its weights are
    most of the ``.pte``'s bytes, which is what makes separate files per bucket expensive)."""
    return models.TokenPool(vocab=VOCAB, features=32, classes=3)


def tokens(length: int, seed: int = 0) -> torch.Tensor:
    """A deterministic ``1×length`` request of token ids."""
    gen = torch.Generator().manual_seed(seed * 7919 + length)
    return torch.randint(1, VOCAB, (1, length), generator=gen)


def method_name(bucket: int) -> str:
    return f"seq_{bucket}"


def _bucket_example(bucket: int) -> tuple[torch.Tensor, torch.Tensor]:
    return torch.zeros(1, bucket, dtype=torch.long), torch.ones(1, bucket)


def bucket_program(buckets: Sequence[int] = BUCKETS, model: nn.Module | None = None) -> PteArtifact:
    """One ``.pte`` with a static method per bucket (``seq_128``, ``seq_256``, …), sharing the weights."""
    model = model or bucket_model()
    return lower_methods({method_name(b): (model, _bucket_example(b)) for b in sorted(buckets)})


def separate_programs(buckets: Sequence[int] = BUCKETS, model: nn.Module | None = None) -> dict[int, PteArtifact]:
    """One ``.pte`` per bucket (each with its own copy of the weights)."""
    model = model or bucket_model()
    return {b: lower(model, _bucket_example(b)) for b in sorted(buckets)}


def choose_bucket(length: int, buckets: Sequence[int] = BUCKETS) -> int | None:
    """The smallest bucket that holds ``length`` tokens (``None`` when it is longer than every bucket)."""
    fitting = [b for b in sorted(buckets) if b >= length]
    return fitting[0] if fitting else None


def pad_to(ids: torch.Tensor, bucket: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Pad ``ids`` (1×L) with token 0 up to ``bucket`` and build the mask (1 for real tokens, 0 for padding)."""
    length = ids.shape[1]
    if length > bucket:
        raise ValueError(f"{length} tokens do not fit the {bucket} bucket")
    mask = torch.zeros(1, bucket)
    mask[:, :length] = 1.0
    return F.pad(ids, (0, bucket - length), value=0), mask


@dataclass
class Dispatch:
    """What the app did with one request: the bucket, the padded inputs and the output."""

    length: int
    bucket: int
    method: str
    output: torch.Tensor

    @property
    def waste(self) -> float:
        """Share of the bucket spent on padding."""
        return (self.bucket - self.length) / self.bucket


def dispatch(ids: torch.Tensor, program: PteArtifact | dict[int, PteArtifact],
             buckets: Sequence[int] = BUCKETS) -> Dispatch:
    """Run one request the way the app would: choose the bucket, pad + mask, run that bucket's method
    (or that bucket's file). Raises ``ValueError`` for a request longer than the largest bucket."""
    length = int(ids.shape[1])
    bucket = choose_bucket(length, buckets)
    if bucket is None:
        raise ValueError(f"a request of {length} tokens is longer than the largest bucket ({max(buckets)}): "
                         "truncate it, split it into chunks, or ship a larger bucket")
    padded, mask = pad_to(ids, bucket)
    if isinstance(program, dict):
        (out,) = program[bucket].run(padded, mask)
    else:
        (out,) = program.run(padded, mask, method=method_name(bucket))
    return Dispatch(length, bucket, method_name(bucket), out)


class OnOriginalLength(nn.Module):
    """Eager reference for a padded request: runs ``model`` on the first ``length`` tokens only, with
    an all-ones mask, i.e. on the request as the user sent it (padding must not change the answer)."""

    def __init__(self, model: nn.Module, length: int):
        super().__init__()
        self.model = model
        self.length = length

    def forward(self, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        ids = ids[:, : self.length]
        return self.model(ids, torch.ones(1, ids.shape[1]))


def padding_waste(lengths: Sequence[int], buckets: Sequence[int]) -> float:
    """Share of all processed positions that are padding, over ``lengths`` dispatched to ``buckets``
    (requests longer than the largest bucket are skipped)."""
    real = padded = 0
    for n in lengths:
        b = choose_bucket(n, buckets)
        if b is None:
            continue
        real += n
        padded += b
    return 1 - real / padded if padded else 0.0


def request_lengths(n: int = 400, seed: int = 0, longest: int = 512) -> list[int]:
    """A deterministic sample of request lengths: mostly short, a long tail (log-normal around 100)."""
    gen = torch.Generator().manual_seed(seed)
    raw = torch.exp(torch.randn(n, generator=gen) * 0.8 + math.log(100.0))
    return [int(v) for v in raw.round().clamp(1, longest).tolist()]


def tradeoff(bucket_sets: Sequence[Sequence[int]], lengths: Sequence[int],
             latency_ms: dict[int, float] | None = None) -> list[dict[str, Any]]:
    """One row per bucket set: padding waste, the one-``.pte`` size, the separate-files size, the planned
    arena an app holds with every bucket's method loaded (each loaded method gets its own planned buffers: the
    sum), the arena when methods share one (ExecuTorch's C++ ``Module`` with ``share_memory_arenas=true``:
    the largest), and (given per-bucket latencies) the mean latency per request."""
    rows = []
    for buckets in bucket_sets:
        buckets = tuple(sorted(buckets))
        with captured_output():  # one progress line per program would drown the table
            program = bucket_program(buckets)
            files = separate_programs(buckets)
        row: dict[str, Any] = {
            "buckets": "/".join(str(b) for b in buckets), "n_buckets": len(buckets),
            "padding_waste": padding_waste(lengths, buckets),
            "one_pte_bytes": program.nbytes, "separate_files_bytes": sum(a.nbytes for a in files.values()),
            "arena_all_loaded_bytes": sum(program.planned_memory_bytes(method_name(b)) for b in buckets),
            "arena_shared_bytes": max(program.planned_memory_bytes(method_name(b)) for b in buckets),
        }
        if latency_ms is not None:
            hits = [b for b in (choose_bucket(n, buckets) for n in lengths) if b is not None]
            row["mean_latency_ms"] = sum(latency_ms[b] for b in hits) / len(hits)
        rows.append(row)
    return rows


def equal_count_buckets(lengths: Sequence[int], n: int, longest: int | None = None) -> tuple[int, ...]:
    """``n`` buckets that each serve about the same number of requests: the inner edges at the quantiles
    of ``lengths`` (rounded up), the last at ``longest`` (default: the longest request)."""
    import statistics

    top = longest or max(lengths)
    inner = [math.ceil(q) for q in statistics.quantiles(lengths, n=n)] if n > 1 else []
    return tuple(sorted({*inner, top}))


def plot_lengths(lengths: Sequence[int], bucket_sets: dict[str, Sequence[int]],
                 title: str = "Request lengths and bucket edges"):
    """A histogram of ``lengths`` with each bucket set's edges drawn as vertical lines (one colour per set)."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7.0, 3.2))
    ax.hist(lengths, bins=range(0, max(lengths) + 17, 16), color="#90a4ae", edgecolor="white")
    colours = ["#c62828", "#1565c0", "#2e7d32", "#6a1b9a"]
    for k, (label, buckets) in enumerate(bucket_sets.items()):
        colour = colours[k % len(colours)]
        for i, b in enumerate(sorted(buckets)):
            ax.axvline(b, color=colour, linestyle=("-", "--", ":")[k % 3], linewidth=1.4,
                       label=label if i == 0 else None, ymax=0.95 - 0.08 * k)
    ax.set_xlabel("request length (tokens); a bucket serves the lengths up to its edge")
    ax.set_ylabel("requests")
    ax.set_title(title)
    ax.legend(fontsize=8, frameon=False, loc="upper right")
    fig.tight_layout()
    plt.close(fig)
    return fig


def latency_rounds(bucket_sets: Sequence[Sequence[int]], lengths: Sequence[int], dynamic: PteArtifact, *,
                   rounds: int = 5, repeat: int = 50, sample_every: int = 8) -> dict[str, list[float]]:
    """Mean runtime latency per request (ms), measured ``rounds`` times, for each bucket set and for the
    ``dynamic`` program.

    A bucket set's cost per request is the median time of its bucket's method (each bucket size timed
    once per round, on one ``.pte`` holding every size) averaged over ``lengths``. The dynamic program
    runs a sample of the requests (every ``sample_every``-th) at their own length.
    """
    sizes = sorted({b for buckets in bucket_sets for b in buckets})
    with captured_output():
        program = bucket_program(sizes)
    sample = list(lengths)[::sample_every]
    out: dict[str, list[float]] = {"/".join(map(str, sorted(b))): [] for b in bucket_sets}
    out["dynamic"] = []
    for _ in range(rounds):
        per_bucket = {b: median_latency_ms(program, pad_to(tokens(b), b), method=method_name(b), repeat=repeat,
                                           warmup=10) for b in sizes}
        for buckets in bucket_sets:
            hits = [b for b in (choose_bucket(n, buckets) for n in lengths) if b is not None]
            out["/".join(map(str, sorted(buckets)))].append(sum(per_bucket[b] for b in hits) / len(hits))
        out["dynamic"].append(sum(median_latency_ms(dynamic, (tokens(k), torch.ones(1, k)), repeat=max(5, repeat // 5),
                                                    warmup=2) for k in sample) / len(sample))
    return out


# ----- the widget ---------------------------------------------------------------------------------
class BucketExplorer(ParityExplorer):
    """A length slider (and a bucket set) → the chosen bucket, the padding waste, and eager (on the
    unpadded request) vs the real ``.pte`` method of that bucket."""

    def __init__(self, program: PteArtifact, model: nn.Module, controls: dict[str, Any]):
        self.program = program
        super().__init__(model, program, self._args, controls, method=method_name(max(BUCKETS)),
                         title="Bucketed TokenPool: one .pte, methods " + ", ".join(program.methods))

    @staticmethod
    def _args(length: int, buckets: tuple[int, ...]) -> tuple[torch.Tensor, ...]:
        ids = tokens(length)
        bucket = choose_bucket(length, buckets)
        if bucket is None:  # too long: hand it to the largest bucket as is (what a careless app would do)
            return ids, torch.ones(1, length)
        return pad_to(ids, bucket)

    def refresh(self) -> ParityRow:
        values = self.values()
        length, buckets = int(values["length"]), tuple(values["buckets"])
        bucket = choose_bucket(length, buckets)
        method = method_name(bucket if bucket is not None else max(buckets))
        reference = OnOriginalLength(self.model, length)
        self.row = check_one(reference, self.program, self._args(length, buckets), method=method)
        if bucket is None:
            why = (f"{length} tokens are longer than the largest bucket ({max(buckets)}): the static method refuses "
                   "the shape. The app must truncate, chunk, or refuse the request before calling the model.")
        else:
            waste = (bucket - length) / bucket
            why = (f"bucket {bucket} (method {method}): {length} real tokens + {bucket - length} padding → "
                   f"{waste:.0%} of the work is padding. The mask zeroes the padding, so the answer equals eager "
                   "on the unpadded request.")
        self.show(f"<div class='exportlab-bucket' data-bucket='{bucket or ''}'>{render_row(self.row, why)}</div>")
        return self.row

    @property
    def bucket(self) -> int | None:
        values = self.values()
        return choose_bucket(int(values["length"]), tuple(values["buckets"]))


def bucket_explorer(program: PteArtifact | None = None) -> BucketExplorer:
    """The sequence-length widget over the bucketed ``.pte`` (built once, before any interaction)."""
    import ipywidgets as w

    program = program or bucket_program()
    controls = {
        "length": w.IntSlider(value=100, min=1, max=600, description="tokens", continuous_update=False),
        "buckets": w.ToggleButtons(options=[("128 / 256 / 512", BUCKETS), ("512 only", (512,))], value=BUCKETS,
                                   description="buckets", style={"button_width": "auto"}),
    }
    return BucketExplorer(program, bucket_model(), controls)


def widget_demo():
    """``(explorer, interactions)`` for the benchmarks and the browser tests (see ``helpers.lessons``)."""
    explorer = bucket_explorer()
    interactions = [
        ({"length": 1, "buckets": BUCKETS}, "match"),
        ({"length": 128, "buckets": BUCKETS}, "match"),
        ({"length": 129, "buckets": BUCKETS}, "match"),
        ({"length": 300, "buckets": BUCKETS}, "match"),
        ({"length": 512, "buckets": BUCKETS}, "match"),
        ({"length": 513, "buckets": BUCKETS}, "rejected"),
        ({"length": 40, "buckets": (512,)}, "match"),
    ]
    return explorer, interactions


def describe_dispatch(d: Dispatch) -> str:
    """One line about a dispatched request (for a notebook)."""
    return f"{d.length:>3} tokens → {d.method:<8} ({d.waste:.0%} padding)"
