"""Shared test setup: a cache inside the repo (shared with the notebooks in one `make test` run),
no progress lines, and a few lowered artifacts reused across test modules."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
os.environ.setdefault("EXPORTLAB_CACHE_DIR", str(ROOT / ".cache" / "exportlab"))

import torch  # noqa: E402
from torch.export import Dim  # noqa: E402

import helpers  # noqa: E402
from helpers import models as M  # noqa: E402

helpers.set_progress(False)


@pytest.fixture(scope="session")
def token_pool():
    """TokenPool exported with ids and mask sharing Dim('seq', 2..64)."""
    model = M.TokenPool()
    seq = Dim("seq", min=2, max=64)
    ids = torch.randint(0, 32, (1, 16), generator=torch.Generator().manual_seed(0))
    mask = torch.ones(1, 16)
    dynamic = {"ids": {1: seq}, "mask": {1: seq}}
    art = helpers.lower(model, (ids, mask), dynamic_shapes=dynamic)
    return model, art, (ids, mask), dynamic


@pytest.fixture(scope="session")
def static_config():
    """ConfigBranch(use_residual=True) exported at batch 2."""
    model = M.ConfigBranch(use_residual=True)
    x = torch.randn(2, 4, generator=torch.Generator().manual_seed(0))
    return model, helpers.lower(model, (x,)), (x,)
