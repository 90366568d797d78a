"""The mock interview's live tasks (lesson 12), through the real pipeline: starter fails, solution passes,
plausible mistakes fail with feedback that names what failed (see exercise_support.py)."""

from __future__ import annotations

import pytest
from exercise_support import WrongAnswer, assert_exercise_behaves

from helpers import exercises

WRONG: dict[str, list[WrongAnswer]] = {
    "12.wont_export": [
        WrongAnswer("the loudness branch deleted with the assertion", """
class NoBranch(FrameNormalizer):
    def forward(self, x):
        return self.dec(self.enc(x))
answer = NoBranch()
""", ("on loud frames", "the reference")),
        WrongAnswer("the assertion kept", """
class KeepsAssert(FrameNormalizer):
    def forward(self, x):
        assert not torch.isnan(x).any()
        h = self.enc(x)
        peak = h.abs().max()
        return self.dec(torch.where(peak > 1.0, h / peak, h))
answer = KeepsAssert()
""", ("export failed", "data-dependent")),
        WrongAnswer("clamping instead of scaling", """
class Clamps(FrameNormalizer):
    def forward(self, x):
        return self.dec(self.enc(x).clamp(-1.0, 1.0))
answer = Clamps()
""", ("on loud frames",)),
    ],
    "12.phone_disagrees": [
        WrongAnswer("only a static batch-1 method", """
model = BatchStatsClassifier()
answer = ({"single": (model, (torch.randn(1, 6),))}, lambda x: "single")
""", ("on batch 2", "refused")),
        WrongAnswer("the right methods, the pick inverted", """
model = BatchStatsClassifier()
methods = {"single": (model, (torch.randn(1, 6),)),
           "batch": (model, (torch.randn(8, 6),), {"x": {0: Dim("batch", min=2, max=8)}})}
answer = (methods, lambda x: "batch" if x.shape[0] == 1 else "single")
""", ("on batch 1",)),
        WrongAnswer("the shipped program renamed: one method, batch from 1", """
model = BatchStatsClassifier()
methods = {"batch": (model, (torch.randn(8, 6),), {"x": {0: Dim("batch", min=1, max=8)}})}
answer = (methods, lambda x: "batch")
""", ("on batch 1", "nan")),
    ],
    "12.camera_rejected": [
        WrongAnswer("stretching every frame to 96×96", """
def prepare(frame):
    return F.interpolate(frame, size=(96, 96), mode="bilinear", align_corners=False)
answer = prepare
""", ("became a 96×96 picture",)),
        WrongAnswer("a centre crop of the short side", """
def prepare(frame):
    _, _, h, w = frame.shape
    side = min(h, w)
    top, left = (h - side) // 2, (w - side) // 2
    crop = frame[:, :, top:top + side, left:left + side]
    return F.interpolate(crop, size=(96, 96), mode="bilinear", align_corners=False)
answer = prepare
""", ("became a 96×96 picture",)),
        WrongAnswer("the frame as it comes", "answer = lambda frame: frame", ("120×160 frame", "refused")),
    ],
}

TRACK = [e for e in exercises.catalog() if e.lesson.startswith("12_")]


@pytest.mark.parametrize("exercise", TRACK, ids=lambda e: e.id)
def test_live_task_grades_by_behaviour(exercise):
    assert_exercise_behaves(exercise, WRONG[exercise.id])
