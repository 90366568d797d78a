"""Widget reaction time on the Python side, per lesson (a script, not a timed test).

    python benchmarks/bench_widgets.py

For every lesson module in ``helpers.lessons`` that defines ``widget_demo()`` (see the convention
in ``helpers/lessons/__init__.py``), build the widget once (artifacts come from the cache), then
replay its interactions many times and report the median and p95 time per interaction in ms:
eager forward + host contract check + one run in the ExecuTorch runtime + rendering the HTML.
It also checks each interaction still gives the verdict the lesson expects. The browser adds
comm and rendering time on top; ``tests/browser`` measures that end to end.
"""

from __future__ import annotations

import importlib
import os
import pkgutil
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("EXPORTLAB_CACHE_DIR", str(ROOT / ".cache" / "exportlab"))


def start_here_demo():
    """The 00_start_here explorer: ConfigBranch exported at batch 2, batch slider and sign toggle."""
    import ipywidgets as w
    import torch

    import helpers
    from helpers import models
    from helpers.widgets import ParityExplorer

    model = models.ConfigBranch(use_residual=True)
    art = helpers.lower(model, (torch.randn(2, 4),))
    base = torch.randn(4, 4, generator=torch.Generator().manual_seed(0))
    explorer = ParityExplorer(model, art, lambda batch, sign: (sign * base[:batch].abs(),),
                              controls={"batch": w.IntSlider(value=2, min=1, max=4),
                                        "sign": w.ToggleButtons(options=[("positive", 1.0), ("negative", -1.0)])})
    return explorer, [({"batch": 3}, "rejected"), ({"batch": 2}, "match"), ({"sign": -1.0}, "match"),
                      ({"sign": 1.0}, "match")]


def demos():
    import helpers.lessons

    found = {"00_start_here": start_here_demo}
    for info in pkgutil.iter_modules(helpers.lessons.__path__):
        module = importlib.import_module(f"helpers.lessons.{info.name}")
        if hasattr(module, "widget_demo"):
            found[info.name] = module.widget_demo
    return found


def main(rounds: int = 25) -> int:
    import helpers

    helpers.set_progress(False)
    failures = 0
    print(f"{'widget':<28}{'n':>5}{'median ms':>11}{'p95 ms':>9}   verdicts")
    for name, build in demos().items():
        explorer, interactions = build()
        times, wrong = [], []
        for _ in range(rounds):
            for values, expected in interactions:
                start = time.perf_counter()
                row = explorer.set(**values)
                times.append((time.perf_counter() - start) * 1000)
                verdict = getattr(row, "verdict", None) or explorer.verdict
                if expected is not None and verdict != expected:
                    wrong.append(f"{values} → {verdict} (expected {expected})")
        times.sort()
        p95 = times[min(len(times) - 1, round(0.95 * (len(times) - 1)))]
        status = "as expected" if not wrong else f"{len(set(wrong))} unexpected: {sorted(set(wrong))[:2]}"
        failures += bool(wrong)
        print(f"{name:<28}{len(times):>5}{statistics.median(times):>11.2f}{p95:>9.2f}   {status}")
    print("(target: ≤ 50 ms median per interaction)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
