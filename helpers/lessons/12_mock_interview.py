"""Lesson 12 · mock interview. Its live tasks: lesson patterns in models with other names.

Three reports an on-device team really files, each graded like a lesson exercise (the real pipeline,
against the original model's eager outputs):

- ``12.wont_export`` — "this model won't export": a speech-frame normaliser with a debug assertion
  and a loudness branch;
- ``12.phone_disagrees`` — "the .pte disagrees with eager on the phone": a classifier whose tests run
  batches of 8 while the phone sends one sample at a time;
- ``12.camera_rejected`` — "the runtime rejects our camera frames": a static 96×96 classifier fed
  the cameras' native resolutions.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn
from torch.export import Dim

from helpers.exercises.grading import (
    Exercise,
    Verdict,
    as_model,
    lowered,
    parity,
)
from helpers.lowering import lower
from helpers.models import seeded
from helpers.parity import Probe

LESSON = "12_mock_interview"


# ----- 12.wont_export ----------------------------------------------------------------------------
class FrameNormalizer(nn.Module):
    """A speech front-end: encode a frame of 16 features, tame loud frames, decode.

    The assertion guards against NaN from a broken microphone driver. When the encoding's largest
    magnitude, over every frame of the batch, is above 1, the whole batch is scaled down so that this
    peak is exactly 1.
    """

    def __init__(self, seed: int = 3):
        super().__init__()
        with seeded(seed):
            self.enc = nn.Linear(16, 16)
            self.dec = nn.Linear(16, 8)
        self.eval()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        assert not torch.isnan(x).any(), "NaN from the microphone"
        h = self.enc(x)
        peak = h.abs().max()
        if peak > 1.0:
            h = h / peak
        return self.dec(h)


def _frames(scale: float, seed: int, batch: int = 4) -> torch.Tensor:
    return torch.randn(batch, 16, generator=torch.Generator().manual_seed(seed)) * scale


NORMALIZER_PROBES = [Probe(f"{name} frames (seed {s})", (_frames(scale, s),))
                     for name, scale in (("quiet", 0.05), ("normal", 0.3), ("loud", 3.0), ("very loud", 30.0))
                     for s in (1, 2)] + [Probe("silence", (torch.zeros(4, 16),))]


def _grade_wont_export(answer: Any) -> list[Verdict]:
    reference = FrameNormalizer()
    model, verdict = as_model(answer, reference)
    verdicts = [verdict]
    if model is None:
        return verdicts
    art, verdict = lowered(model, (_frames(0.3, 0),), hint=(
        "read the error: which line asks a tensor for a Python bool? Decide for each such line whether it is part "
        "of what the model computes or a check the app can do itself."))
    verdicts.append(verdict)
    if art is None:
        return verdicts
    verdicts.append(parity(reference, art, NORMALIZER_PROBES, criterion=(
        "matches the original on quiet and loud frames (both sides of the branch)"), hint=(
        "both kinds of frame must come out as the original computes them: which side does your program get wrong?")))
    return verdicts


def solve_wont_export() -> Any:
    """The solution of 12.wont_export."""
    class FrameNormalizerForExport(FrameNormalizer):
        def forward(self, x):
            # The NaN assertion is a debug check: the app validates microphone frames itself (incidental: deleted).
            h = self.enc(x)
            peak = h.abs().max()
            # The loudness branch is what the model computes (semantic) and elementwise: torch.where keeps both sides.
            h = torch.where(peak > 1.0, h / peak, h)
            return self.dec(h)


    return FrameNormalizerForExport()


# ----- 12.phone_disagrees --------------------------------------------------------------------------
class BatchStatsClassifier(nn.Module):
    """Standardises each feature over the batch before the head, when there is a batch to standardise.

    A single sample has no batch statistics, so it goes to the head as it is. The team's tests and
    the export use batches of 8; the phone app classifies one sample at a time.
    """

    def __init__(self, seed: int = 5):
        super().__init__()
        with seeded(seed):
            self.head = nn.Linear(6, 3)
        self.eval()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.shape[0] > 1:
            x = (x - x.mean(dim=0, keepdim=True)) / (x.std(dim=0, keepdim=True) + 1e-5)
        return self.head(x)


def _samples(n: int, seed: int) -> torch.Tensor:
    return torch.randn(n, 6, generator=torch.Generator().manual_seed(seed)) * 2 + 0.5


def shipped_batch_program():
    """What the team shipped: one program, batch ∈ [1, 8], exported with a batch of 8."""

    return lower(BatchStatsClassifier(), (_samples(8, 0),), dynamic_shapes={"x": {0: Dim("batch", min=1, max=8)}})


_LARGEST_BATCH = 8  # the app sends 1 to 8 samples


def _grade_phone_disagrees(answer: Any) -> list[Verdict]:
    from helpers.lowering import lower_methods

    criterion = "a (methods, pick) pair: {name: (model, example_args, dynamic_shapes)} and pick(x) -> method name"
    if not (isinstance(answer, tuple) and len(answer) == 2 and isinstance(answer[0], dict) and callable(answer[1])):
        return [Verdict(criterion, False, f"got a {type(answer).__name__}",
                        "answer = (methods, pick), as in the starter cell")]
    methods, pick = answer
    reference = BatchStatsClassifier()
    specs = {}
    for name, spec in methods.items():
        if not (isinstance(spec, tuple) and len(spec) in (2, 3)):
            return [Verdict(criterion, False, f"method {name!r} is not (model, example_args[, dynamic_shapes])",
                            "each method is a tuple like the starter's")]
        model, verdict = as_model(spec[0], reference, what=f"method {name!r}")
        if model is None:
            return [verdict]
        specs[name] = (model, *spec[1:])
    verdicts = [Verdict(criterion, True, f"{len(specs)} method(s): {', '.join(specs)}")]
    try:
        art = lower_methods(specs)
    except Exception as exc:  # noqa: BLE001 - the learner's methods may not export
        from helpers.diagnose import diagnose_exception
        from helpers.lowering import stage_of

        stage = stage_of(exc)
        if stage is None:
            raise
        d = diagnose_exception(exc, stage)
        fixes = f" (torch suggests: {'; '.join(d.suggested_fixes)})" if d.suggested_fixes else ""
        return verdicts + [Verdict("exports, lowers and loads", False, f"{stage} failed — {d.summary}{fixes}",
                                   "each method's example must lie inside its own dynamic range")]
    verdicts.append(Verdict("exports, lowers and loads", True, f"methods {', '.join(art.methods)}"))

    def app(probe: Probe) -> tuple[Any, ...]:
        (x,) = probe.args
        name = pick(x)
        if name not in art.methods:
            raise KeyError(f"pick() chose {name!r}, which is not a method of the program ({', '.join(art.methods)})")
        return art.run(x, method=name)

    probes = [Probe(f"batch {n}", (_samples(n, 10 + n),)) for n in range(1, _LARGEST_BATCH + 1)]
    probes += [Probe(f"batch 1 (sample {s})", (_samples(1, 30 + s),)) for s in range(3)]
    verdicts.append(parity(reference, art, probes, run=app, criterion=(
        "the app's call matches the original for every batch 1–8 (the phone sends 1)"), hint=(
        "export assumes a dynamic size is never 0 or 1 while it traces: what does that make of `x.shape[0] > 1`, "
        "and which call can the app make for a single sample instead?")))
    if not verdicts[-1].passed:
        return verdicts
    planned = {name: (art.runtime_input_shapes(name)[0] or (0,))[0] for name in art.methods}
    over = {name: rows for name, rows in planned.items() if rows > _LARGEST_BATCH}
    verdicts.append(Verdict(
        f"no method plans for more than {_LARGEST_BATCH} samples", not over,
        ("; ".join(f"method {name!r} plans for {rows} samples" for name, rows in over.items()) if over else
         ", ".join(f"{name}: at most {rows}" for name, rows in planned.items())),
        "each method's memory is planned for its Dim's max and held on every call: bound it by what the app sends"))
    return verdicts


def solve_phone_disagrees() -> Any:
    """The solution of 12.phone_disagrees."""
    # The branch is decided while tracing: a dynamic batch is assumed to be >= 2, so the standardising path is
    # baked in, and the phone's batch of one gets standardised (std of one sample: NaN). Give the phone its own
    # static batch-1 method, keep the dynamic method for 2..8, and let the app pick.
    model = BatchStatsClassifier()
    methods = {
        "single": (model, (torch.randn(1, 6),)),
        "batch": (model, (torch.randn(8, 6),), {"x": {0: Dim("batch", min=2, max=8)}}),
    }


    def pick(x):
        return "single" if x.shape[0] == 1 else "batch"


    return (methods, pick)


# ----- 12.camera_rejected ----------------------------------------------------------------------------
class GlyphNet(nn.Module):
    """Reads a road-sign glyph from a camera frame: two strided convolutions, a global average, a head.

    Exported from the training notebook's 96×96 crops.
    """

    def __init__(self, seed: int = 7):
        super().__init__()
        with seeded(seed):
            self.conv1 = nn.Conv2d(3, 8, 3, stride=2, padding=1)
            self.conv2 = nn.Conv2d(8, 16, 3, stride=2, padding=1)
            self.head = nn.Linear(16, 5)
        self.eval()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.relu(self.conv1(x))
        x = torch.relu(self.conv2(x))
        return self.head(x.mean(dim=(2, 3), keepdim=True).flatten(1))


GLYPH_SIZE = 96
# The fleet's cameras, scaled down (height, width): 4:3 landscape, 16:9 landscape, 3:4 portrait, square.
CAMERA_FRAMES = ((120, 160), (90, 160), (160, 120), (100, 100), (48, 64))


def glyph_program():
    """The shipped program: GlyphNet at 1×3×96×96, static."""

    return lower(GlyphNet(), (torch.rand(1, 3, GLYPH_SIZE, GLYPH_SIZE, generator=torch.Generator().manual_seed(0)),))


def _camera(h: int, w: int, seed: int = 0) -> torch.Tensor:
    return torch.rand(1, 3, h, w, generator=torch.Generator().manual_seed(seed + h * 1000 + w))


def _content_box(prepared: torch.Tensor) -> tuple[int, int] | None:
    """Height and width of the region where an all-ones frame landed (the rest is padding)."""
    lit = prepared[0].abs().sum(dim=0) > 1.5  # ones in three channels → 3; padding → 0; edges blend
    rows = torch.nonzero(lit.any(dim=1)).flatten()
    cols = torch.nonzero(lit.any(dim=0)).flatten()
    if len(rows) == 0 or len(cols) == 0:
        return None
    return int(rows[-1] - rows[0] + 1), int(cols[-1] - cols[0] + 1)


def _grade_camera_rejected(answer: Any) -> list[Verdict]:
    criterion = "prepare(frame) is a function of one frame"
    if not callable(answer) or isinstance(answer, nn.Module):
        return [Verdict(criterion, False, f"got a {type(answer).__name__}", "answer = prepare (the function itself)")]
    prepare: Callable[[torch.Tensor], torch.Tensor] = answer
    art = glyph_program()
    reference = GlyphNet()
    verdicts = [Verdict(criterion, True)]
    for h, w in CAMERA_FRAMES:
        frame = _camera(h, w)
        try:
            with torch.no_grad():
                x = prepare(frame.clone())
            (out,) = art.run_raw(x.contiguous())
        except Exception as exc:  # noqa: BLE001 - the learner's host step, or the runtime refusing it
            from helpers.display import error_excerpt

            return verdicts + [Verdict("every camera frame reaches the program", False,
                                       f"the {h}×{w} frame: {error_excerpt(exc, 1)}",
                                       "read the program's input signature: what shape does it accept?")]
        with torch.no_grad():
            expected = reference(x)
        if not torch.allclose(out, expected, atol=1e-4):
            return verdicts + [Verdict("every camera frame reaches the program", False,
                                       f"the {h}×{w} frame: the .pte and eager disagree on the prepared frame")]
    verdicts.append(Verdict("every camera frame reaches the program", True,
                            f"{len(CAMERA_FRAMES)} resolutions accepted by the runtime, outputs match eager"))
    for h, w in CAMERA_FRAMES:
        with torch.no_grad():
            box = _content_box(prepare(torch.ones(1, 3, h, w)))
        criterion = "the whole frame is kept, with its aspect ratio (nothing cropped, nothing stretched)"
        if box is None:
            return verdicts + [Verdict(criterion, False, f"the {h}×{w} frame left no content in the prepared input")]
        bh, bw = box
        scale = GLYPH_SIZE / max(h, w)
        want_h, want_w = round(h * scale), round(w * scale)
        if abs(bh - want_h) > 2 or abs(bw - want_w) > 2:
            return verdicts + [Verdict(criterion, False, (
                f"a {h}×{w} frame (aspect {w / h:.2f}) became a {bh}×{bw} picture (aspect {bw / bh:.2f}) inside the "
                f"{GLYPH_SIZE}×{GLYPH_SIZE} input"), (
                "the model must see all of the frame, undistorted, as large as the input allows: what do you do with "
                "the part of the input the frame does not cover?"))]
    verdicts.append(Verdict("the whole frame is kept, with its aspect ratio (nothing cropped, nothing stretched)",
                            True))
    return verdicts


def solve_camera_rejected() -> Any:
    """The solution of 12.camera_rejected."""
    def prepare(frame):
        """Letterbox on the host: fit the longer side to 96, keep the aspect ratio, pad the rest with zeros."""
        _, _, h, w = frame.shape
        scale = 96 / max(h, w)
        new_h, new_w = max(1, round(h * scale)), max(1, round(w * scale))
        resized = F.interpolate(frame, size=(new_h, new_w), mode="bilinear", align_corners=False)
        top, left = (96 - new_h) // 2, (96 - new_w) // 2
        return F.pad(resized, (left, 96 - new_w - left, top, 96 - new_h - top))


    return prepare


def _context() -> dict[str, Any]:
    return {"torch": torch, "nn": nn, "F": F, "Dim": Dim, "FrameNormalizer": FrameNormalizer,
            "BatchStatsClassifier": BatchStatsClassifier, "GlyphNet": GlyphNet}


EXERCISES = [
    Exercise(
        id="12.wont_export", lesson=LESSON, title="“this model won't export”: make FrameNormalizer export, unchanged",
        goal=("Make FrameNormalizer export and lower, while the .pte computes what the original computes on every "
              "kind of frame (quiet and loud)."),
        grade=_grade_wont_export, solve=solve_wont_export, context=_context,
        revisit=("02_loud_failures", "04_torch_where")),
    Exercise(
        id="12.phone_disagrees", lesson=LESSON,
        title="“the .pte disagrees with eager on the phone”: ship what the phone calls",
        goal=("The shipped program (one method, batch ∈ [1, 8], exported at batch 8) is wrong for the phone's single "
              "samples. Give the app methods and a pick() so every batch from 1 to 8 gets the original's answer, and no "
              "method plans memory for more than 8 samples."),
        grade=_grade_phone_disagrees, solve=solve_phone_disagrees, context=_context, kind="methods",
        revisit=("07_dynamic_dims", "05_hoisting")),
    Exercise(
        id="12.camera_rejected", lesson=LESSON,
        title="“the runtime rejects our camera frames”: a host step that fits every camera",
        goal=("Write prepare(frame) so that every camera resolution runs on the shipped 96×96 program, keeping the "
              "whole frame and its aspect ratio."),
        grade=_grade_camera_rejected, solve=solve_camera_rejected, context=_context, kind="function",
        revisit=("06_static_shapes", "09_normalize_or_bucket")),
]
