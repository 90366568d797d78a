"""Timing a program in the runtime, with its spread, and sentences about timings computed from the rounds.

A sentence about a timing is never written by hand: :func:`ratio_sentence` says "slower" or "faster" only
when every round agrees. The time is the runtime call alone (:meth:`PteArtifact.bare_call`: no check of ours,
no copy of the outputs), on the runtime's own thread pool (:func:`helpers.runtime_threads`).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import torch

from .artifact import PteArtifact

__all__ = ["median_latency_ms", "median_call_ms", "latency_rounds", "ratio_sentence", "Spread", "latency_spread", "compare_speed"]


def median_latency_ms(artifact: PteArtifact, args: tuple[Any, ...], method: str = "forward",
                      repeat: int = 200, warmup: int = 20) -> float:
    """Median wall time of the runtime call alone (:meth:`PteArtifact.bare_call`: no check of ours, no copy
    of the outputs), in milliseconds, on the runtime's own thread pool (``_runtime.runtime_threads()``)."""
    call, inputs = artifact.bare_call(method), list(args)
    return median_call_ms(lambda: call(inputs), repeat=repeat, warmup=warmup)


def median_call_ms(fn: Callable[[], Any], repeat: int = 200, warmup: int = 20) -> float:
    """Median wall time of ``fn()`` in milliseconds, after ``warmup`` calls (an app's loop over runtime calls, or
    one runtime call: :func:`median_latency_ms`)."""
    for _ in range(warmup):
        fn()
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - start) * 1000)
    return statistics.median(samples)


def latency_rounds(programs: dict[str, tuple[PteArtifact, tuple[Any, ...]]], rounds: int = 5, repeat: int = 100,
                   warmup: int = 10, method: str = "forward") -> dict[str, list[float]]:
    """Median runtime-call time (ms) of each program, measured ``rounds`` times, the programs interleaved
    within each round (so a slow moment of the machine hits every program, not one)."""
    out: dict[str, list[float]] = {name: [] for name in programs}
    for _ in range(rounds):
        for name, (artifact, args) in programs.items():
            out[name].append(median_latency_ms(artifact, args, method=method, repeat=repeat, warmup=warmup))
    return out


def ratio_sentence(what: str, slower: list[float], faster: list[float], *, margin: float = 0.05) -> str:
    """A sentence about ``slower / faster`` computed from paired rounds of medians: "slower" or "faster"
    only when every round agrees (by more than ``margin``); otherwise "no consistent difference"."""
    ratios = [a / b for a, b in zip(slower, faster)]
    lo, hi = min(ratios), max(ratios)
    spread = f"{lo:.2f}×" if f"{lo:.2f}" == f"{hi:.2f}" else f"{lo:.2f}× to {hi:.2f}×"
    if lo > 1 + margin:
        verdict = "slower in every round"
    elif hi < 1 - margin:
        verdict = "faster in every round"
    else:
        verdict = "no consistent difference (the rounds disagree, or differ by less than 5%)"
    return f"{what}: {spread} over {len(ratios)} rounds — {verdict}"


@dataclass(frozen=True)
class Spread:
    """Median per round of ``rounds`` rounds: the median of those medians and their range, in ms."""

    median: float
    low: float
    high: float

    def __str__(self) -> str:
        return f"{self.median:.3f} ms (rounds {self.low:.3f}–{self.high:.3f})"


def latency_spread(artifacts: Mapping[str, PteArtifact], inputs: Mapping[str, torch.Tensor], rounds: int = 5,
                   repeat: int = 20, warmup: int = 2) -> dict[str, dict[str, Spread]]:
    """``{input label: {artifact label: Spread}}`` of the runtime call alone (:func:`median_latency_ms` of
    ``repeat`` calls per round); each round times every artifact on every input once, interleaved."""
    per: dict[str, dict[str, list[float]]] = {label: {name: [] for name in artifacts} for label in inputs}
    for _ in range(rounds):
        for label, x in inputs.items():
            for name, art in artifacts.items():
                per[label][name].append(median_latency_ms(art, (x,), repeat=repeat, warmup=warmup))
    return {label: {name: Spread(statistics.median(v), min(v), max(v)) for name, v in row.items()}
            for label, row in per.items()}


def compare_speed(a_name: str, a: Spread, b_name: str, b: Spread) -> str:
    """One sentence about two timings, only as strong as the rounds allow."""
    if a.high < b.low:
        return f"{a_name} was faster in every round: {a} against {b}, {b.median / a.median:.1f}× by the medians"
    if b.high < a.low:
        return f"{b_name} was faster in every round: {b} against {a}, {a.median / b.median:.1f}× by the medians"
    return (f"the rounds overlap ({a_name} {a}, {b_name} {b}): this measurement does not separate them")
