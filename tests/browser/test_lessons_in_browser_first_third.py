"""A third of the lessons used in the browser (the 1st, 4th, 7th, … of ``browser_lessons()``), used like a learner
would; the others run from test_lessons_in_browser_second_third.py and test_lessons_in_browser_last_third.py, so
`make test`'s three workers each end on one third, side by side."""

from __future__ import annotations

import json
import urllib.request

import pytest

from .learner import browser_lessons, generic_only, use_lesson_like_a_learner, widget_notebooks


def test_every_widget_lesson_is_used_in_the_browser_or_shows_only_generic_widgets():
    thirds = browser_lessons()[0::3] + browser_lessons()[1::3] + browser_lessons()[2::3]
    assert sorted(thirds) == browser_lessons() and "00_start_here.ipynb" in thirds
    left = [name for name in widget_notebooks() if name not in thirds]
    assert all(generic_only(name) for name in left), left
    assert widget_notebooks()[-1] in thirds or not generic_only(widget_notebooks()[-1])  # the newest lesson is used
    assert not generic_only("11_export_doctor.ipynb") and generic_only("15_loops.ipynb")  # the rule sees both kinds


@pytest.mark.parametrize("name", browser_lessons()[0::3])
def test_widget_lesson_in_the_browser(lab_server, lab_page, name):
    use_lesson_like_a_learner(lab_server, lab_page, name)


def test_repo_settings_are_in_effect(lab_server):
    """windowingMode 'none' (from jupyter/overrides.json) keeps every cell in the DOM for these tests."""
    request = urllib.request.Request(f"{lab_server.url}/lab/api/settings/@jupyterlab/notebook-extension:tracker",
                                     headers={"Authorization": f"token {lab_server.token}"})
    with urllib.request.urlopen(request) as response:
        settings = json.load(response)
    # Overrides become the schema's defaults (the shipped default is "contentVisibility").
    effective = settings["settings"].get("windowingMode", settings["schema"]["properties"]["windowingMode"]["default"])
    assert effective == "none"

