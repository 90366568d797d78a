"""Interview cards of the control-flow track (lessons 00–05)."""

from __future__ import annotations

from . import Card

__all__ = ["CARDS"]

CARDS = [
    Card(
        id="01.why_disagree", lesson="01_silent_specialization", topic="silent specialization", kind="conceptual",
        question="Why does the exported model disagree with eager PyTorch on the phone?",
        answer=("torch.export runs forward() once with symbolic inputs and records one graph. Any Python decision "
                "that is a plain value at that moment (a static shape, a config attribute, a constant or a scalar "
                "input) is decided then and only the taken branch is recorded, so the .pte runs, fast, and is "
                "wrong for inputs the example did not cover; loops over such values are unrolled. I catch it with "
                "an export CI job that diffs the .pte against eager on varied inputs covering both sides of every "
                "branch and every bound, and fix it with torch.cond, torch.where, vectorising, or hoisting the "
                "decision into the app."),
        points=("export traces once: Python decisions on shapes, flags or scalars are taken at export time",
                "only the taken branch exists in the graph; the program runs and is silently wrong",
                "parity against eager on varied inputs (both sides, every bound) in the export CI job",
                "fixes: torch.cond / torch.where / vectorise / hoist into the app")),
]
