"""Timing a program in the runtime, with its spread, and sentences about timings computed from the rounds.

A sentence about a timing is never written by hand: :func:`ratio_sentence` says "slower" or "faster" only
when every round agrees. The time is the runtime call alone (:meth:`PteArtifact.bare_call`: no check of ours,
no copy of the outputs), on the runtime's own thread pool (:func:`helpers.runtime_threads`).
"""

from __future__ import annotations

import statistics
import time
from typing import Any

from .artifact import PteArtifact

__all__ = ["median_latency_ms", "latency_rounds", "ratio_sentence"]


def median_latency_ms(artifact: PteArtifact, args: tuple[Any, ...], method: str = "forward",
                      repeat: int = 200, warmup: int = 20) -> float:
    """Median wall time of the runtime call alone (:meth:`PteArtifact.bare_call`: no check of ours, no copy
    of the outputs), in milliseconds, on the runtime's own thread pool (``_runtime.runtime_threads()``)."""
    call, inputs = artifact.bare_call(method), list(args)
    for _ in range(warmup):
        call(inputs)
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        call(inputs)
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
