"""Track 2 in the browser: the shape lessons (06-10) and the export doctor (11), used like a learner would."""

from __future__ import annotations

import pytest

from .learner import use_lesson_like_a_learner, widget_notebooks


@pytest.mark.parametrize("name", widget_notebooks(6, 99))
def test_widget_lesson_in_the_browser(lab_server, browser, name):
    use_lesson_like_a_learner(lab_server, browser, name)

