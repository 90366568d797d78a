"""Lesson 11's exercise (a streaming step for a recurrent model), through the real pipeline (its predictions:
tests/test_questions.py)."""

from __future__ import annotations

import pytest
from exercise_support import WrongAnswer, assert_exercise_behaves

from helpers import exercises

WRONG: dict[str, list[WrongAnswer]] = {
    "11.gru_step": [
        WrongAnswer("the state passed back unchanged", """
class Frozen(RecurrentTagger):
    def forward(self, x_t, h):
        out, _ = self.rnn(x_t.unsqueeze(1), h)
        return self.head(out[:, 0]), h
answer = Frozen()
""", ("on 2 frames", "the reference")),
        WrongAnswer("the output alone (no state back)", """
class NoState(RecurrentTagger):
    def forward(self, x_t, h):
        out, _ = self.rnn(x_t.unsqueeze(1), h)
        return self.head(out[:, 0])
answer = NoState()
""", ("returns (output of this frame, next state)",)),
        WrongAnswer("the whole-sequence model itself", "answer = RecurrentTagger()", ("failed",)),
    ],
}


@pytest.mark.parametrize("exercise", [e for e in exercises.catalog() if e.lesson.startswith("11_")],
                         ids=lambda e: e.id)
def test_exercise_grades_by_behaviour(exercise):
    assert_exercise_behaves(exercise, WRONG[exercise.id])
