"""Predictions of the control-flow track (lessons 00–05). Each reveal runs the real pipeline."""

from __future__ import annotations

import torch
from torch.export import Dim

from .. import models as M
from ..lowering import lower
from . import Question

__all__ = ["QUESTIONS"]


def _counted_four() -> tuple[str, str]:
    from ..lessons.control_flow import CountedMean

    counted = CountedMean()
    items3 = torch.randn(3, 4, generator=torch.Generator().manual_seed(0))
    art = lower(counted, (items3, 3), dynamic_shapes={"x": {0: Dim("items", min=3, max=8)}, "n": None})
    four = torch.randn(4, 4, generator=torch.Generator().manual_seed(4))
    (device,) = art.run_raw(four, 3)
    with torch.no_grad():
        same = bool(torch.allclose(device, counted(four, 4), atol=1e-4))
    return ("match" if same else "diverge"), (
        "4 items are inside the contract (items ∈ [3, 8]) and n=3 is the value export baked in, so the runtime "
        "runs it without complaint, and the unrolled loop averages the first 3 of the 4 items: not what eager "
        "computes with n=4.")


QUESTIONS = [
    Question("01.counted_four", "01_silent_specialization",
             "CountedMean exported with n=3 and items ∈ [3, 8]; the app sends 4 items and n=3: the device's answer "
             "compared with eager run as intended (n=4)…", ("match", "diverge", "rejected"), _counted_four),
]

_ = M  # the lesson models are imported by the reveals that need them
