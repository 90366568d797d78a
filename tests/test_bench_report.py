"""The README's "How long it takes" is written from the benchmarks' results, never by hand."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _report():
    spec = importlib.util.spec_from_file_location("bench_report", ROOT / "benchmarks" / "report.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


RESULTS = {
    "bench-lab-url.json": {"url_s": 9.4, "warm_up_started": True},
    "bench-first-verdict.json": {
        "00_start_here": {"built_first_s": 1.2, "built_whole_s": 6.0, "empty_first_s": 7.5, "empty_whole_s": 20.1},
        "10_diagnosis_drills": {"built_first_s": 2.1, "built_whole_s": 18.4, "empty_first_s": 9.9, "empty_whole_s": 41.0}},
    "bench-browser.json": {"widgets": {"n": 171, "p50_ms": 21.0, "p95_ms": 44.2},
                           "first_reveal": {"n": 30, "p50_ms": 120.0, "p95_ms": 480.0, "max_ms": 640.0}, "lessons": {}},
    "bench-exercises.json": [{"exercise": "03.cond_rewrite", "cold_s": 4.1, "cached_new_process_s": 0.5,
                              "cached_same_process_s": 0.05},
                             {"exercise": "11.gru_step", "cold_s": 9.2, "cached_new_process_s": 0.9,
                              "cached_same_process_s": 0.3}],
}


def test_the_section_is_computed_from_the_results(tmp_path, monkeypatch):
    report = _report()
    for name, data in RESULTS.items():
        (tmp_path / name).write_text(json.dumps(data))
    monkeypatch.setattr(report, "OUT", tmp_path)
    text = report.section()
    assert "URL after 9.4 s" in text
    assert "first result ≤ 2.1 s and the whole lesson ≤ 18.4 s in every lesson" in text  # the worst lesson, not a goal
    assert "| `10_diagnosis_drills` | 2.1 s | 18.4 s | 9.9 s | 41.0 s |" in text
    assert "p50 21 ms, p95 44 ms" in text and "max 640 ms" in text
    assert "4.1–9.2 s cold" in text and "0.50–0.90 s cached in a new process" in text
    assert "(slowest there: 11.gru_step 0.30 s, 03.cond_rewrite 0.05 s)" in text


def test_missing_results_stop_the_report(tmp_path, monkeypatch):
    report = _report()
    monkeypatch.setattr(report, "OUT", tmp_path)
    with pytest.raises(SystemExit, match="run `make bench` first"):
        report.section()


def test_the_readme_holds_the_generated_section_once():
    report = _report()
    readme = (ROOT / "README.md").read_text()
    assert readme.count(report.START) == 1 and readme.count(report.END) == 1
    assert readme.index(report.START) < readme.index(report.END)
