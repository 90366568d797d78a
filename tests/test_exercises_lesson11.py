"""Lesson 11's exercise (a streaming step for a recurrent model) and its predictions, through the real pipeline."""

from __future__ import annotations

import pytest
from exercise_support import WrongAnswer, assert_exercise_behaves

from helpers import exercises, questions

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


EXPECTED = {"11.smoke_vs_doctor": "fail", "11.config_branch": "pass", "11.batch_loop_static": "pass",
            "11.segmenter_min_delegated": "fail"}


@pytest.mark.parametrize("question_id", sorted(EXPECTED))
def test_prediction_reveals_what_the_doctor_says(question_id):
    actual, why = questions.get(question_id).actual()
    assert actual == EXPECTED[question_id], why
    assert why


def test_every_lesson11_question_is_tested():
    assert {q.id for q in questions.catalog() if q.lesson.startswith("11_")} == set(EXPECTED)
