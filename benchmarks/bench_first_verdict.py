"""Run All → the first verdict in the page, for every lesson, in JupyterLab and headless Chromium.

    python benchmarks/bench_first_verdict.py            # every lesson
    python benchmarks/bench_first_verdict.py 01 09      # lessons whose name starts with 01 or 09

For each lesson, on a fresh kernel: with an **empty** cache of lowered programs (a private cache,
emptied before the lesson) and with the programs **built** (the repository's cache, warmed first with
``tools/notebooks.py warm`` if the lessons changed since). One lesson at a time, nothing else running,
so the figures are the lesson's own. The browser tests record the built-cache figure too, on every
``make test`` run (``test-output/first-verdict.json``); this script adds the empty-cache one.

"First verdict": the first ``.exportlab-verdict`` element, line starting with ``.pte`` (a program's result
printed next to eager's), runtime refusal, or verdict word after a ``.pte`` was loaded
(``tests/browser/lab.py``). Goals (issue "Proven on real models"): ≤ 12 s empty, ≤ 3 s built.
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
            print(f"{'lesson':<28} {'empty cache':>12} {'built':>8}")
            for name in names:
                row = {}
                for label, server in (("empty", cold), ("built", warm)):
                    if label == "empty":
                        subprocess.run(["rm", "-rf", str(server.cache_dir)], check=True)
                    page = browser.new_page(viewport={"width": 1300, "height": 1000})
                    try:
                        row[label] = LessonPage(page, server, name).run_all_timing_first_verdict()
                    finally:
                        page.close()
                        shutdown_kernels(server)
                results[name.removesuffix(".ipynb")] = row
                print(f"{name.removesuffix('.ipynb'):<28} {row['empty']:11.1f}s {row['built']:7.1f}s", flush=True)
        finally:
            for server in (cold, warm):
                server.stop()
            browser.close()
    out = ROOT / "test-output" / "bench-first-verdict.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(results, indent=1, sort_keys=True))
    worst = {k: max(r[k] for r in results.values()) for k in ("empty", "built")}
    print(f"{'worst':<28} {worst['empty']:11.1f}s {worst['built']:7.1f}s   (goals: ≤ 12 s empty, ≤ 3 s built)")


if __name__ == "__main__":
    main(sys.argv[1:])
