"""The README's "How long it takes", written from the last benchmark run (``make bench`` ends with it).

    python benchmarks/report.py            # rewrite the README section from test-output/bench-*.json
    python benchmarks/report.py --print    # print it instead

Reads what ``bench_lab_url.py``, ``bench_first_verdict.py``, ``bench_browser.py`` and ``bench_exercises.py``
wrote, and replaces the README's text between the two ``bench-report`` markers. The date is the files'
(the oldest of them), the machine is this one: run it where the benchmarks ran.
"""

from __future__ import annotations

import datetime
import json
import os
import platform
import re
import sys
from importlib import metadata
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "test-output"
START, END = "<!-- bench-report: start (benchmarks/report.py writes this section; do not edit) -->", \
    "<!-- bench-report: end -->"
FILES = {"url": "bench-lab-url.json", "lessons": "bench-first-verdict.json", "browser": "bench-browser.json",
         "exercises": "bench-exercises.json"}


def _machine() -> str:
    model = ""
    try:
        model = next(line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                     if line.startswith("model name"))
    except (OSError, StopIteration):
        model = platform.processor()
    memory = ""
    try:
        kib = int(next(line.split()[1] for line in Path("/proc/meminfo").read_text().splitlines()
                       if line.startswith("MemTotal")))
        memory = f", {kib / 1024 ** 2:.0f} GB"
    except (OSError, StopIteration, ValueError):
        pass
    return f"{platform.machine()}, {os.cpu_count()} cores ({model}){memory}, no GPU"


def _span(values: list[float], unit: str = "s", digits: int = 1) -> str:
    lo, hi = min(values), max(values)
    return f"{lo:.{digits}f} {unit}" if f"{lo:.{digits}f}" == f"{hi:.{digits}f}" else f"{lo:.{digits}f}–{hi:.{digits}f} {unit}"


def section() -> str:
    missing = [name for name in FILES.values() if not (OUT / name).exists()]
    if missing:
        raise SystemExit(f"no benchmark results for {', '.join(missing)}: run `make bench` first")
    data = {key: json.loads((OUT / name).read_text()) for key, name in FILES.items()}
    measured = min((OUT / name).stat().st_mtime for name in FILES.values())
    day = datetime.datetime.fromtimestamp(measured, tz=datetime.UTC).strftime("%Y-%m-%d")
    versions = ", ".join(f"{pkg} {metadata.version(pkg)}" for pkg in ("torch", "executorch"))
    lessons, browser, url, checks = data["lessons"], data["browser"], data["url"], data["exercises"]
    built_first = max(r["built_first_s"] for r in lessons.values())
    built_whole = max(r["built_whole_s"] for r in lessons.values())
    lines = [
        f"### How long it takes (`make bench`, {day}; {_machine()}; {versions})",
        "",
        "Measured one thing at a time, nothing else running; a newcomer's path from the install on.",
        "",
        f"- **`make lab` on an empty cache**: JupyterLab's URL after {url['url_s']:.1f} s "
        f"(`benchmarks/bench_lab_url.py`); the lessons' programs then build in the background, lesson by lesson.",
        f"- **Run All on a fresh kernel** (`benchmarks/bench_first_verdict.py`, JupyterLab in headless Chromium), from "
        "the click to the first `.pte` result in the page and to the end of the lesson. With the programs built: "
        f"first result ≤ {built_first:.1f} s and the whole lesson ≤ {built_whole:.1f} s in every lesson (goals 3 s "
        "and 15 s); with an empty cache each program is built the first time it is needed:",
        "",
        "| lesson | built: first result | built: whole lesson | empty cache: first result | empty cache: whole lesson |",
        "|---|---|---|---|---|",
    ]
    for name, r in sorted(lessons.items()):
        lines.append(f"| `{name}` | {r['built_first_s']:.1f} s | {r['built_whole_s']:.1f} s | {r['empty_first_s']:.1f} s "
                     f"| {r['empty_whole_s']:.1f} s |")
    w, fr = browser["widgets"], browser["first_reveal"]
    lines += [
        "",
        f"- **A widget interaction** in the browser (input event → verdict in the DOM; `benchmarks/bench_browser.py`, the "
        f"browser tests alone): {w['n']} interactions, p50 {w['p50_ms']:.0f} ms, p95 {w['p95_ms']:.0f} ms (goal 50 ms). "
        f"The first Reveal of a prediction runs the real pipeline once: {fr['n']} reveals, p50 {fr['p50_ms']:.0f} ms, "
        f"p95 {fr['p95_ms']:.0f} ms, max {fr['max_ms']:.0f} ms.",
        f"- **An exercise's check** (`benchmarks/bench_exercises.py`, {len(checks)} exercises): "
        f"{_span([c['cold_s'] for c in checks])} cold (a new process, empty cache), "
        f"{_span([c['cached_new_process_s'] for c in checks], digits=2)} cached in a new process, "
        f"{_span([c['cached_same_process_s'] for c in checks], digits=2)} in the same process (slowest there: "
        + ", ".join(f"{c['exercise']} {c['cached_same_process_s']:.2f} s"
                    for c in sorted(checks, key=lambda c: -c["cached_same_process_s"])[:2]) + ").",
    ]
    return "\n".join(lines)


def main(argv: list[str]) -> None:
    text = section()
    if "--print" in argv:
        print(text)
        return
    readme = ROOT / "README.md"
    current = readme.read_text()
    pattern = re.compile(re.escape(START) + r".*?" + re.escape(END), re.S)
    if not pattern.search(current):
        raise SystemExit(f"README.md has no {START!r} … {END!r} markers")
    readme.write_text(pattern.sub(lambda _: f"{START}\n{text}\n{END}", current))
    print(f"README.md: 'How long it takes' rewritten from {', '.join(FILES.values())}")


if __name__ == "__main__":
    main(sys.argv[1:])
