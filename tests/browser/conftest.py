"""Session fixtures for the real-browser tests: one JupyterLab server, one headless Chromium."""

from __future__ import annotations

import json
import statistics
import tempfile
from pathlib import Path

import pytest

from .lab import CHROMIUM, CHROMIUM_ARGS, ROOT, LabServer

OUTPUT = ROOT / "test-output"
LATENCIES: dict[str, list[float]] = {}


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


def pytest_terminal_summary(terminalreporter):
    if not LATENCIES:
        return
    OUTPUT.mkdir(exist_ok=True)
    terminalreporter.section("widget reaction time in the browser (input event → verdict in the DOM)")
    summary = {}
    everything = []
    for name, values in sorted(LATENCIES.items()):
        ordered = sorted(values)
        p50 = statistics.median(ordered)
        p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
        everything += ordered
        summary[name] = {"n": len(ordered), "p50_ms": round(p50, 1), "p95_ms": round(p95, 1)}
        terminalreporter.write_line(f"{name:<34} n={len(ordered):>3}  p50={p50:7.1f} ms  p95={p95:7.1f} ms")
    everything.sort()
    p95_all = everything[min(len(everything) - 1, round(0.95 * (len(everything) - 1)))]
    terminalreporter.write_line(f"{'all lessons':<34} n={len(everything):>3}  p50={statistics.median(everything):7.1f} ms"
                                f"  p95={p95_all:7.1f} ms   (target p95 ≤ 100 ms)")
    (OUTPUT / "browser-latency.json").write_text(json.dumps(summary, indent=1))
