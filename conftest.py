"""Run-wide pytest hooks for `make test`.

`make test` runs under pytest-xdist with ``--dist loadfile --no-loadscope-reorder``: every file is
one unit of work on one worker, handed out in collection order. That keeps the cells of a notebook
together in ONE kernel, in order (nbval needs that), and the browser tests of one file on one
JupyterLab server. The lowered-program cache is shared by every process of the run
(``helpers.cache.build_lock``: a program that two processes need is built once).

The browser tests go last: by then the unit tests and nbval have built every program the lessons
lower, so the three browser files (a third of the lessons each, one per worker) run on a warm cache, side by
side.

The browser tests' reaction times are summarised here, by the process that prints the report.
"""

from __future__ import annotations

import json
import statistics
import time
from pathlib import Path

LATENCY_DIR = Path(__file__).resolve().parent / "test-output" / "browser-latency"
FIRST_VERDICT_DIR = LATENCY_DIR.parent / "first-verdict"
_STARTED = time.time()


def pytest_collection_modifyitems(config, items):
    items.sort(key=lambda item: "browser" in Path(str(item.path)).parts)  # stable: the rest keep their order


def _p95(ordered: list[float]) -> float:
    return ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]


def _first_verdict_summary(terminalreporter) -> None:
    files = [f for f in FIRST_VERDICT_DIR.glob("*.json") if f.stat().st_mtime >= _STARTED]
    if not files:
        return
    times: dict[str, dict[str, float]] = {}
    for f in files:
        cache, lesson = f.stem.split("-", 1)
        times.setdefault(lesson, {})[cache] = json.loads(f.read_text())
    terminalreporter.section("Run All → first verdict in the DOM (fresh kernel; goals: ≤ 12 s empty cache, ≤ 3 s built)")
    for lesson in sorted(times):
        t = times[lesson]
        cells = [f"{c} {t[c]:5.1f} s" if c in t else f"{c}    —  " for c in ("empty", "warm")]
        terminalreporter.write_line(f"{lesson:<34} " + "   ".join(cells))
    (FIRST_VERDICT_DIR.parent / "first-verdict.json").write_text(json.dumps(times, indent=1, sort_keys=True))


def pytest_terminal_summary(terminalreporter):
    if hasattr(terminalreporter.config, "workerinput"):  # an xdist worker: the controller reports
        return
    _first_verdict_summary(terminalreporter)
    files = sorted(f for f in LATENCY_DIR.glob("*.json") if f.stat().st_mtime >= _STARTED)
    if not files:
        return
    terminalreporter.section("widget reaction time in the browser (input event → verdict in the DOM)")
    summary, everything, first_reveals = {}, [], []
    for f in files:
        recorded = json.loads(f.read_text())
        ordered = sorted(recorded["widgets"])
        first_reveals += recorded["first_reveals"]
        if not ordered:  # a lesson without explorers or quizzes (its exercises are timed by their checks)
            continue
        everything += ordered
        summary[f.stem] = {"n": len(ordered), "p50_ms": round(statistics.median(ordered), 1),
                           "p95_ms": round(_p95(ordered), 1)}
        terminalreporter.write_line(f"{f.stem:<34} n={len(ordered):>3}  p50={summary[f.stem]['p50_ms']:7.1f} ms"
                                    f"  p95={summary[f.stem]['p95_ms']:7.1f} ms")
    everything.sort()
    if not everything:
        return
    terminalreporter.write_line(f"{'all lessons':<34} n={len(everything):>3}  p50={statistics.median(everything):7.1f} ms"
                                f"  p95={_p95(everything):7.1f} ms   (target p95 ≤ 100 ms)")
    if first_reveals:
        first_reveals.sort()
        summary["first Reveal of a question"] = {"n": len(first_reveals), "p50_ms": round(statistics.median(first_reveals), 1),
                                                 "p95_ms": round(_p95(first_reveals), 1)}
        terminalreporter.write_line(
            f"{'first Reveal (runs the pipeline)':<34} n={len(first_reveals):>3}  "
            f"p50={statistics.median(first_reveals):7.1f} ms  p95={_p95(first_reveals):7.1f} ms  max={first_reveals[-1]:.0f} ms")
    (LATENCY_DIR.parent / "browser-latency.json").write_text(json.dumps(summary, indent=1))
