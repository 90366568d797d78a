"""The other half of the lessons with a widget (the 2nd, 4th, …) in the browser (see the first half's file)."""

from __future__ import annotations

import pytest

from .learner import use_lesson_like_a_learner, widget_notebooks


@pytest.mark.parametrize("name", widget_notebooks()[1::2])
def test_widget_lesson_in_the_browser(lab_server, lab_page, name):
    use_lesson_like_a_learner(lab_server, lab_page, name)

