"""The second third of the lessons used in the browser (the 2nd, 5th, … of ``browser_lessons()``; see the first
third's file)."""

from __future__ import annotations

import pytest

from .learner import browser_lessons, use_lesson_like_a_learner


@pytest.mark.parametrize("name", browser_lessons()[1::3])
def test_widget_lesson_in_the_browser(lab_server, lab_page, name):
    use_lesson_like_a_learner(lab_server, lab_page, name)
