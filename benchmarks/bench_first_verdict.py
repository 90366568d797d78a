"""Run All per lesson, as a newcomer meets it: the first ``.pte`` result in the page, and the whole lesson.

    python benchmarks/bench_first_verdict.py            # every lesson
    python benchmarks/bench_first_verdict.py 01 09      # lessons whose name starts with 01 or 09

For each lesson, on a fresh kernel, in JupyterLab and headless Chromium: with an **empty** cache of lowered
programs (a private cache, emptied before the lesson) and with the programs **built** (the repository's cache,
warmed first with ``tools/notebooks.py warm`` if the lessons changed since). One lesson at a time, nothing
else running, so the figures are the lesson's own. Two times each, from the moment Run All is pressed:

- **first result**: the first ``.exportlab-verdict`` element, line starting with ``.pte`` (a program's result
  printed next to eager's), runtime refusal, or verdict word after a ``.pte`` was loaded (``tests/browser/lab.py``);
- **whole lesson**: every code cell has run and the kernel is idle.

Goals (issue "A newcomer's first ten minutes"): built cache, first result ≤ 3 s and the whole lesson ≤ 15 s.
The browser tests record the built-cache first result on every ``make test`` run too, under the test run's load.
Writes ``test-output/bench-first-verdict.json`` (read by ``benchmarks/report.py``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))


def main(prefixes: list[str]) -> None:
    from browser.lab import CHROMIUM, CHROMIUM_ARGS, LabServer, LessonPage
    from browser.learner import shutdown_kernels
    from playwright.sync_api import sync_playwright

    os.environ.setdefault("EXPORTLAB_CACHE_DIR", str(ROOT / ".cache" / "exportlab"))
    subprocess.run([sys.executable, str(ROOT / "tools" / "notebooks.py"), "warm"], check=False)
    notebooks = sorted(p.name for p in (ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
    names = [n for n in notebooks if not prefixes or n.startswith(tuple(prefixes))]
    results: dict[str, dict[str, float]] = {}
    with tempfile.TemporaryDirectory(prefix="bench-first-verdict-") as tmp, sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        cold = LabServer(Path(tmp) / "cold", cache_dir=Path(tmp) / "cold" / "cache")
        warm = LabServer(Path(tmp) / "warm")
        for server in (cold, warm):
            server.root.mkdir(parents=True)
            server.start()
        try:
            print(f"{'lesson':<28} {'empty cache: first, whole':>26} {'built: first, whole':>21}")
            for name in names:
                row = {}
                for label, server in (("empty", cold), ("built", warm)):
                    if label == "empty":
                        subprocess.run(["rm", "-rf", str(server.cache_dir)], check=True)
                    page = browser.new_page(viewport={"width": 1300, "height": 1000})
                    try:
                        row[f"{label}_first_s"], row[f"{label}_whole_s"] = LessonPage(page, server, name).run_all_timing()
                    finally:
                        page.close()
                        shutdown_kernels(server)
                results[name.removesuffix(".ipynb")] = row
                print(f"{name.removesuffix('.ipynb'):<28} {row['empty_first_s']:12.1f}s {row['empty_whole_s']:11.1f}s "
                      f"{row['built_first_s']:10.1f}s {row['built_whole_s']:9.1f}s", flush=True)
        finally:
            for server in (cold, warm):
                server.stop()
            browser.close()
    out = ROOT / "test-output" / "bench-first-verdict.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(results, indent=1, sort_keys=True))
    worst = {k: max(r[k] for r in results.values()) for k in next(iter(results.values()))}
    print(f"{'worst':<28} {worst['empty_first_s']:12.1f}s {worst['empty_whole_s']:11.1f}s "
          f"{worst['built_first_s']:10.1f}s {worst['built_whole_s']:9.1f}s   (goals, built: ≤ 3 s first, ≤ 15 s whole)")


if __name__ == "__main__":
    main(sys.argv[1:])
