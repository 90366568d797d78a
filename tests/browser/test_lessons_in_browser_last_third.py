"""The last third of the lessons used in the browser (the 3rd, 6th, … of ``browser_lessons()``; see the first
third's file), and every lesson's predictions and interview cards on one page."""

from __future__ import annotations

import pytest

from .learner import browser_lessons, every_prediction_and_card_on_one_page, use_lesson_like_a_learner


@pytest.mark.parametrize("name", browser_lessons()[2::3])
def test_widget_lesson_in_the_browser(lab_server, lab_page, name):
    use_lesson_like_a_learner(lab_server, lab_page, name)


def test_every_prediction_and_card_renders_on_one_page(lab_server, lab_page):
    every_prediction_and_card_on_one_page(lab_server, lab_page)

