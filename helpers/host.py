"""What an app does to an input on the host, before it calls the model: steps several lessons share.

- :func:`letterbox`: fit a camera frame into the one size a static program accepts, keeping its aspect ratio
  (lessons 06, 09, the drills and the mock interview).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

__all__ = ["letterbox"]


def letterbox(frame: torch.Tensor, size: int, fill: float = 0.0) -> torch.Tensor:
    """Fit a ``1×C×H×W`` frame into ``size×size``: scale so the longer side is ``size`` (bilinear),
    keep the aspect ratio, and pad the shorter side equally on both ends with ``fill``.

    This is what an app does with the platform's image APIs before calling the model.
    """
    _, _, h, w = frame.shape
    scale = size / max(h, w)
    nh, nw = max(1, round(h * scale)), max(1, round(w * scale))
    if (nh, nw) != (h, w):
        frame = F.interpolate(frame, size=(nh, nw), mode="bilinear", align_corners=False)
    top, left = (size - nh) // 2, (size - nw) // 2
    return F.pad(frame, (left, size - nw - left, top, size - nh - top), value=fill)
