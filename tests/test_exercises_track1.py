"""The exercises of lessons 01–05, each through the real pipeline: starter fails, solution passes,
plausible mistakes fail with useful feedback (see exercise_support.py)."""

from __future__ import annotations

import pytest
from exercise_support import WrongAnswer, assert_exercise_behaves

from helpers import exercises

WRONG: dict[str, list[WrongAnswer]] = {
    "01.vectorize_loop": [
        WrongAnswer("the row weights forgotten", """
class Forgot(BatchLoop):
    def forward(self, x):
        return torch.tanh(self.item(x))
answer = Forgot()
""", ("on batch 2", "the reference")),
        WrongAnswer("a model that returns zeros (matches its own .pte)", """
class Zeros(BatchLoop):
    def forward(self, x):
        return torch.zeros_like(x)
answer = Zeros()
""", ("on batch 1", "the reference")),
        WrongAnswer("the class instead of an instance", "answer = BatchLoop", ("not an nn.Module instance",)),
    ],
}

TRACK = [e for e in exercises.catalog() if e.lesson[:2] in {"01", "02", "03", "04", "05"}]


@pytest.mark.parametrize("exercise", TRACK, ids=lambda e: e.id)
def test_exercise_grades_by_behaviour(exercise):
    assert_exercise_behaves(exercise, WRONG.get(exercise.id, []))
