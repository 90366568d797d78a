"""Small models shared by the lessons and the tests — each defined once, here.

Every model is tiny (it exports and lowers in a couple of seconds), deterministic (weights come
from a fixed seed without disturbing the global RNG) and built in ``eval()`` mode. The
docstring of each says which trap it sets or which fix it shows.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch
from torch import nn

__all__ = [
    "seeded", "ScaleOrShift", "ScaleOrShiftCond", "ScaleOrShiftWhere", "ConfigBranch", "BatchLoop",
    "ScalarRepeat", "ShapeBranch", "TokenPool", "TinyVision", "CondLinear", "StraightLinear", "WhileDouble",
]


@contextlib.contextmanager
def seeded(seed: int) -> Iterator[None]:
    """Run a block with a fixed torch seed, leaving the global RNG as it was."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        yield


def seeded_linear(seed: int, n_in: int, n_out: int) -> nn.Linear:
    """An ``nn.Linear(n_in, n_out)`` initialised from ``seed``, leaving the global RNG as it was."""
    with seeded(seed):
        return nn.Linear(n_in, n_out)


class _Lesson(nn.Module):
    """Base: build the layers under a seed and switch to eval mode."""

    def finish(self) -> _Lesson:
        return self.eval()


class ScaleOrShift(_Lesson):
    """``if x.sum() > 0`` picks one of two layers, ``a`` or ``b``, from the input's values."""

    def __init__(self, features: int = 4, seed: int = 0):
        super().__init__()
        with seeded(seed):
            self.a = nn.Linear(features, features)
            self.b = nn.Linear(features, features)
        self.finish()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.sum() > 0:
            return self.a(x)
        return self.b(x)


class ScaleOrShiftCond(ScaleOrShift):
    """The same decision written with ``torch.cond``: ``x.sum() > 0`` picks ``a``, otherwise ``b``."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cond(x.sum() > 0, self.a, self.b, (x,))


class ScaleOrShiftWhere(ScaleOrShift):
    """The same decision made arithmetic: both layers always run, ``torch.where`` selects."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.where(x.sum() > 0, self.a(x), self.b(x))


class ConfigBranch(_Lesson):
    """relu(proj(x)), plus a residual ``+ x`` when the plain attribute ``use_residual`` is set."""

    def __init__(self, features: int = 4, use_residual: bool = True, seed: int = 0):
        super().__init__()
        with seeded(seed):
            self.proj = nn.Linear(features, features)
        self.use_residual = use_residual
        self.finish()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.relu(self.proj(x))
        if self.use_residual:
            y = y + x
        return y


class BatchLoop(_Lesson):
    """A Python loop over the batch, ``for i in range(x.shape[0])``: row ``i`` is transformed and multiplied by
    ``i + 1``."""

    def __init__(self, features: int = 4, seed: int = 0):
        super().__init__()
        with seeded(seed):
            self.item = nn.Linear(features, features)
        self.finish()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        rows = []
        for i in range(x.shape[0]):
            rows.append(torch.tanh(self.item(x[i])) * (i + 1))
        return torch.stack(rows)


class ScalarRepeat(_Lesson):
    """A Python int passed alongside the tensor: export bakes its value in as a constant."""

    def __init__(self, features: int = 4, seed: int = 0):
        super().__init__()
        with seeded(seed):
            self.step = nn.Linear(features, features)
        self.finish()

    def forward(self, x: torch.Tensor, steps: int) -> torch.Tensor:
        for _ in range(steps):
            x = torch.tanh(self.step(x))
        return x


class ShapeBranch(_Lesson):
    """``if x.shape[1] > 1`` normalises over time only when there is more than one frame, then a linear head
    averaged over time."""

    def __init__(self, features: int = 4, seed: int = 0):
        super().__init__()
        with seeded(seed):
            self.head = nn.Linear(features, 2)
        self.finish()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.shape[1] > 1:
            x = (x - x.mean(dim=1, keepdim=True)) / x.std(dim=1, keepdim=True)
        return self.head(x).mean(dim=1)


class TokenPool(_Lesson):
    """Token ids and a mask that must have the same length: the classic shared-``Dim`` pair."""

    def __init__(self, vocab: int = 32, features: int = 8, classes: int = 3, seed: int = 0):
        super().__init__()
        with seeded(seed):
            self.embed = nn.Embedding(vocab, features)
            self.head = nn.Linear(features, classes)
        self.finish()

    def forward(self, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        h = self.embed(ids) * mask.unsqueeze(-1)
        pooled = h.sum(dim=1) / mask.sum(dim=1, keepdim=True).clamp(min=1.0)
        return self.head(pooled)


class TinyVision(_Lesson):
    """A small CNN for "camera frames": conv → relu → conv → global pool → linear."""

    def __init__(self, classes: int = 4, seed: int = 0):
        super().__init__()
        with seeded(seed):
            self.conv1 = nn.Conv2d(3, 8, 3, stride=2, padding=1)
            self.conv2 = nn.Conv2d(8, 16, 3, stride=2, padding=1)
            self.head = nn.Linear(16, classes)
        self.finish()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.relu(self.conv1(x))
        x = torch.relu(self.conv2(x))
        return self.head(x.mean(dim=(2, 3), keepdim=True).flatten(1))  # keepdim: XNNPACK takes this mean


class CondLinear(_Lesson):
    """Linear → relu, then ``torch.cond`` on the sign of the input's mean between two linear branches."""

    def __init__(self, features: int = 8, seed: int = 0):
        super().__init__()
        with seeded(seed):
            self.pre = nn.Linear(features, features)
            self.a = nn.Linear(features, features)
            self.b = nn.Linear(features, features)
        self.finish()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.relu(self.pre(x))
        return torch.cond(x.mean() > 0, self.a, self.b, (h,))


class StraightLinear(CondLinear):
    """``CondLinear`` with the decision hoisted out: always branch ``a``."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.a(torch.relu(self.pre(x)))


class WhileDouble(_Lesson):
    """``while x.sum() < limit``: a loop whose trip count depends on the data (export fails)."""

    def __init__(self, limit: float = 10.0):
        super().__init__()
        self.limit = limit
        self.finish()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        steps = 0  # the step cap only keeps eager mode from spinning forever on x <= 0
        while x.sum() < self.limit and steps < 16:
            x = x * 2
            steps += 1
        return x
