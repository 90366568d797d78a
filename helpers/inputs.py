"""Seeded example inputs: the same tensors in every run, so reveals, grades and stored outputs repeat."""

from __future__ import annotations

import torch

__all__ = ["seeded_randn", "seeded_values"]


def seeded_randn(*shape: int, seed: int = 0) -> torch.Tensor:
    """``torch.randn(*shape)`` from its own generator seeded with ``seed`` (the global RNG is left alone)."""
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def seeded_values(shape: tuple[int, ...], kind: str, seed: int) -> torch.Tensor:
    """Seeded values of one ``kind``: ``"random"``, ``"positive"`` (all > 0), ``"negative"`` (all < 0), ``"large"``
    (random × 100) or ``"zeros"``."""
    base = seeded_randn(*shape, seed=seed)
    kinds = {"random": base, "positive": base.abs() + 0.1, "negative": -(base.abs() + 0.1), "large": base * 100.0,
             "zeros": torch.zeros(shape)}
    if kind not in kinds:
        raise ValueError(f"kind must be one of {', '.join(kinds)}, got {kind!r}")
    return kinds[kind]
