"""Widget reaction time in the real browser, with nothing else running.

    python benchmarks/bench_browser.py

Runs the browser tests alone (``pytest tests/browser``, one file after the other, on the repository's built
cache): every lesson opened in JupyterLab and headless Chromium, its widgets moved and its predictions
revealed like a learner would (``tests/browser/learner.py``). Each interaction is timed from the input
event to the verdict in the DOM. Under ``make test`` the same tests run beside the rest of the suite on
the two cores, so their figures include that load; these do not. Goal (issue "A newcomer's first ten
minutes"): p95 ≤ 50 ms over every lesson; a first Reveal (it runs the pipeline) reported apart, ≤ 500 ms.
Writes ``test-output/bench-browser.json`` (read by ``benchmarks/report.py``).
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LATENCY_DIR = ROOT / "test-output" / "browser-latency"


def p95(ordered: list[float]) -> float:
    return ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]


def main() -> None:
    env = {**os.environ, "EXPORTLAB_CACHE_DIR": os.environ.get("EXPORTLAB_CACHE_DIR", str(ROOT / ".cache" / "exportlab")),
           "EXPORTLAB_BROWSER_INTERACTIONS": "14",  # the suite times 8 per lesson; the benchmark more
           "EXPORTLAB_BROWSER_ALL_LESSONS": "1"}  # and every widget lesson, where the suite uses some (learner.py)
    started = time.time()
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:randomly", "tests/browser"], cwd=ROOT, env=env)
    if done.returncode:
        raise SystemExit(f"the browser tests failed (exit {done.returncode}): no figures")
    widgets, reveals, lessons = [], [], {}
    for f in sorted(LATENCY_DIR.glob("*.json")):
        if f.stat().st_mtime < started:
            continue
        recorded = json.loads(f.read_text())
        widgets += recorded["widgets"]
        reveals += recorded["first_reveals"]
        if recorded["widgets"]:
            ordered = sorted(recorded["widgets"])
            lessons[f.stem] = {"n": len(ordered), "p50_ms": round(statistics.median(ordered), 1),
                               "p95_ms": round(p95(ordered), 1)}
    widgets.sort()
    reveals.sort()
    result = {"widgets": {"n": len(widgets), "p50_ms": round(statistics.median(widgets), 1), "p95_ms": round(p95(widgets), 1)},
              "first_reveal": {"n": len(reveals), "p50_ms": round(statistics.median(reveals), 1),
                               "p95_ms": round(p95(reveals), 1), "max_ms": round(reveals[-1], 1)},
              "lessons": lessons}
    for name, row in lessons.items():
        print(f"{name:<34} n={row['n']:>3}  p50={row['p50_ms']:6.1f} ms  p95={row['p95_ms']:6.1f} ms")
    w, r = result["widgets"], result["first_reveal"]
    print(f"{'every lesson':<34} n={w['n']:>3}  p50={w['p50_ms']:6.1f} ms  p95={w['p95_ms']:6.1f} ms   (goal p95 ≤ 50 ms)")
    print(f"{'first Reveal (runs the pipeline)':<34} n={r['n']:>3}  p50={r['p50_ms']:6.1f} ms  p95={r['p95_ms']:6.1f} ms  "
          f"max={r['max_ms']:.0f} ms   (goal ≤ 500 ms)")
    out = ROOT / "test-output" / "bench-browser.json"
    out.write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
