"""Session fixtures for the real-browser tests: one JupyterLab server, one headless Chromium."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import pytest

from .lab import CHROMIUM, CHROMIUM_ARGS, ROOT, LabServer

OUTPUT = ROOT / "test-output"
LATENCY_DIR = OUTPUT / "browser-latency"
FIRST_VERDICT_DIR = OUTPUT / "first-verdict"


@pytest.fixture(scope="session")
def lab_server():
    with tempfile.TemporaryDirectory(prefix="exportlab-lab-") as tmp:
        server = LabServer(Path(tmp)).start()
        try:
            yield server
        finally:
            server.stop()


@pytest.fixture(scope="session")
def browser():
    from playwright.sync_api import sync_playwright

    if not Path(CHROMIUM).exists():
        pytest.fail(f"Chromium not found at {CHROMIUM}: run `bash tools/ensure_chromium.sh` (make test does)")
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        try:
            yield b
        finally:
            b.close()


@pytest.fixture(scope="session")
def _kept_page(browser):
    kept: dict = {}
    yield kept
    if kept.get("page") and not kept["page"].is_closed():
        kept["page"].close()


@pytest.fixture
def lab_page(browser, _kept_page):
    """One Chromium page per worker, holding JupyterLab from one lesson to the next (the learner's tab); a test that
    could not close its lesson closes the page, and the next test gets a new one."""
    page = _kept_page.get("page")
    if page is None or page.is_closed():
        page = _kept_page["page"] = browser.new_page(viewport={"width": 1300, "height": 1000})
    return page


def record_latencies(lesson: str, values: list[float], first_reveals: list[float] = ()) -> None:
    """Keep one lesson's reaction times (a file: under pytest-xdist the summary is printed by another process).

    ``values``: widget interactions whose answer the kernel already has or computes from a loaded program;
    ``first_reveals``: the first Reveal of each prediction, which runs the real pipeline (export, the cached
    program, the runtime) once, reported apart."""
    LATENCY_DIR.mkdir(parents=True, exist_ok=True)
    (LATENCY_DIR / f"{lesson}.json").write_text(json.dumps({"widgets": values, "first_reveals": list(first_reveals)}))


def record_first_verdict(cache: str, lesson: str, seconds: float) -> None:
    """Keep Run All → first verdict in the DOM for one lesson, with an ``empty`` or ``warm`` cache."""
    FIRST_VERDICT_DIR.mkdir(parents=True, exist_ok=True)
    (FIRST_VERDICT_DIR / f"{cache}-{lesson}.json").write_text(json.dumps(seconds))
