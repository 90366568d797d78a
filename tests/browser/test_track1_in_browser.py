"""Track 1 in the browser: 00_start_here and the control-flow lessons (01-05), used like a learner would."""

from __future__ import annotations

import json
import urllib.request

import pytest

from .learner import use_lesson_like_a_learner, widget_notebooks


def test_every_widget_lesson_has_a_browser_test():
    tracks = widget_notebooks(0, 5) + widget_notebooks(6, 99)
    assert tracks == widget_notebooks() and "00_start_here.ipynb" in tracks


@pytest.mark.parametrize("name", widget_notebooks(0, 5))
def test_widget_lesson_in_the_browser(lab_server, browser, name):
    use_lesson_like_a_learner(lab_server, browser, name)


def test_repo_settings_are_in_effect(lab_server):
    """windowingMode 'none' (from jupyter/overrides.json) keeps every cell in the DOM for these tests."""
    request = urllib.request.Request(f"{lab_server.url}/lab/api/settings/@jupyterlab/notebook-extension:tracker",
                                     headers={"Authorization": f"token {lab_server.token}"})
    with urllib.request.urlopen(request) as response:
        settings = json.load(response)
    # Overrides become the schema's defaults (the shipped default is "contentVisibility").
    effective = settings["settings"].get("windowingMode", settings["schema"]["properties"]["windowingMode"]["default"])
    assert effective == "none"

