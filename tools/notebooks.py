"""Build, execute and check the lesson notebooks.

    python tools/notebooks.py execute [NAME ...]   # src/*.py → .ipynb, run in a fresh kernel, save outputs
    python tools/notebooks.py check                # CI: .ipynb and src/*.py agree, every cell has run, no stray errors
    python tools/notebooks.py warm                 # `make lab`: run every lesson once (nothing saved), reveal
                                                   # every prediction and check every exercise's solution, so the
                                                   # programs they lower are in the cache before a learner opens them

The py:percent file in notebooks/src/ is the source a reviewer reads; the .ipynb carries the
executed outputs that nbval compares. Cell ids are kept stable across rebuilds (an unchanged
cell keeps its id), volatile metadata is stripped, and widget state is not stored.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import jupytext
import nbformat
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = ROOT / "notebooks"
SOURCES = NOTEBOOKS / "src"


def _cells(nb: nbformat.NotebookNode) -> list[tuple[str, str]]:
    return [(cell.cell_type, cell.source.strip()) for cell in nb.cells]


def _stable_ids(nb: nbformat.NotebookNode, previous: nbformat.NotebookNode | None) -> None:
    old = {}
    if previous is not None:
        for cell in previous.cells:
            old.setdefault((cell.cell_type, cell.source), cell.get("id"))
    used: set[str] = set()
    for cell in nb.cells:
        cid = old.get((cell.cell_type, cell.source))
        if not cid or cid in used:
            cid = hashlib.sha1(f"{cell.cell_type}:{cell.source}".encode()).hexdigest()[:8]
            while cid in used:
                cid = hashlib.sha1(cid.encode()).hexdigest()[:8]
        cell["id"] = cid
        used.add(cid)


_CARRIAGE_RETURN = re.compile(r"^.*\r(?=[^\n])", re.MULTILINE)


def _settle_streams(outputs: list) -> list:
    """Merge adjacent stream outputs and keep only what a progress line (``\r``) finally shows,
    so a cold run (with progress steps) and a cached run store the same text."""
    settled: list = []
    for out in outputs:
        if (out.get("output_type") == "stream" and settled and settled[-1].get("output_type") == "stream"
                and settled[-1]["name"] == out["name"]):
            settled[-1]["text"] += out["text"]
        else:
            settled.append(out)
    for out in settled:
        if out.get("output_type") == "stream":
            out["text"] = _CARRIAGE_RETURN.sub("", out["text"]).replace("\r\n", "\n").lstrip("\r")
    return settled


def _clean(nb: nbformat.NotebookNode) -> None:
    nb.metadata = {
        "kernelspec": {"display_name": "Python 3 (exportlab)", "language": "python", "name": "python3"},
        "language_info": {"name": "python"},
    }
    for cell in nb.cells:
        cell.metadata = {}
        if cell.cell_type == "code":
            cell.outputs = _settle_streams(cell.get("outputs", []))
            for out in cell.get("outputs", []):
                out.pop("metadata", None) if out.get("output_type") == "stream" else None
                if "metadata" in out:
                    out["metadata"] = {}


def execute(names: list[str]) -> None:
    sources = sorted(SOURCES.glob("*.py"))
    if names:
        sources = [s for s in sources if any(n in s.stem for n in names)]
        if not sources:
            sys.exit(f"no notebook source matches {names}")
    os.environ.setdefault("EXPORTLAB_CACHE_DIR", str(ROOT / ".cache" / "exportlab"))
    for src in sources:
        target = NOTEBOOKS / f"{src.stem}.ipynb"
        nb = jupytext.read(src)
        nb.nbformat, nb.nbformat_minor = 4, 5
        previous = nbformat.read(target, as_version=4) if target.exists() else None
        _stable_ids(nb, previous)
        start = time.perf_counter()
        client = NotebookClient(nb, timeout=900, kernel_name="python3", store_widget_state=False,
                                resources={"metadata": {"path": str(NOTEBOOKS)}})
        client.execute(stderr=subprocess.DEVNULL)  # the kernel process's own log lines, not the cells' stderr
        _clean(nb)
        nbformat.validate(nb)
        target.write_text(json.dumps(nb, indent=1, ensure_ascii=False, sort_keys=True) + "\n")
        print(f"{target.relative_to(ROOT)}: executed in {time.perf_counter() - start:.1f} s")


def _warm_one(path: str) -> tuple[str, float, str]:
    start = time.perf_counter()
    nb = nbformat.read(path, as_version=4)
    try:
        NotebookClient(nb, timeout=900, kernel_name="python3", store_widget_state=False,
                       resources={"metadata": {"path": str(NOTEBOOKS)}}).execute(stderr=subprocess.DEVNULL)
        problem = ""
    except Exception as exc:  # noqa: BLE001 - report and go on: a lesson that fails still warms the others
        problem = f"{type(exc).__name__}: {str(exc).strip().splitlines()[-1] if str(exc).strip() else ''}"
    return Path(path).stem, time.perf_counter() - start, problem


# A stored lesson never reveals a prediction nor passes an exercise (the learner does), so running the lessons
# leaves those programs unbuilt: a learner's first Reveal or first passing check would build them.
_WARM_ANSWERS = r"""
import helpers
from helpers import exercises, questions

helpers.set_progress(False)
problems = []
for item in [*questions.catalog(), *exercises.catalog()]:
    try:
        item.actual() if isinstance(item, questions.Question) else item.check(item.solution)
    except Exception as exc:  # report and go on: one failure must not leave the others cold
        problems.append(f"{item.id}: {type(exc).__name__}")
print("; ".join(problems))
"""


def _warm_answers() -> tuple[str, float, str]:
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", _WARM_ANSWERS], cwd=ROOT, capture_output=True, text=True)
    lines = done.stdout.strip().splitlines()
    problem = (lines[-1] if lines else "") if done.returncode == 0 else f"exit {done.returncode}: " + (
        done.stderr.strip().splitlines() or [""])[-1]
    return "predictions and exercises", time.perf_counter() - start, problem


def _warm_stamp() -> Path:
    digest = hashlib.sha256()
    for path in sorted([*SOURCES.glob("*.py"), *(ROOT / "helpers").rglob("*.py"), ROOT / "requirements.txt"]):
        digest.update(path.read_bytes())
    cache = Path(os.environ.get("EXPORTLAB_CACHE_DIR") or ROOT / ".cache" / "exportlab")
    return cache / f"warm-{digest.hexdigest()[:16]}.stamp"


def warm(workers: int = 2) -> int:
    """Run every lesson once, two at a time, without saving: the cache then holds every program the
    lessons lower, so a learner's first open loads them instead of building them. Skipped when the
    lessons, the library and the pins are unchanged since the last warm-up."""
    from concurrent.futures import ProcessPoolExecutor, as_completed

    os.environ.setdefault("EXPORTLAB_CACHE_DIR", str(ROOT / ".cache" / "exportlab"))
    stamp = _warm_stamp()
    if stamp.exists():
        print("lessons' programs: already built (the cache is warm)")
        return 0
    paths = sorted(str(p) for p in NOTEBOOKS.glob("*.ipynb"))
    start, failed = time.perf_counter(), []
    with ProcessPoolExecutor(max_workers=workers) as pool:
        futures = [pool.submit(_warm_answers), *(pool.submit(_warm_one, p) for p in paths)]
        for done, future in enumerate(as_completed(futures), 1):
            name, seconds, problem = future.result()
            if problem:
                failed.append(f"{name}: {problem}")
            line = f"building the lessons' programs: {done}/{len(futures)} · {name} ({seconds:.0f} s)"
            print(f"\r{line:<100}", end="", flush=True)
    print(f"\rbuilt the lessons' programs in {time.perf_counter() - start:.0f} s{'':<60}")
    for f in failed:
        print(f"- {f}")
    if not failed:
        stamp.parent.mkdir(parents=True, exist_ok=True)
        stamp.touch()
    return 1 if failed else 0


def check() -> int:
    problems = []
    notebooks = {p.stem: p for p in NOTEBOOKS.glob("*.ipynb")}
    sources = {p.stem: p for p in SOURCES.glob("*.py")}
    for stem in sorted(set(notebooks) ^ set(sources)):
        problems.append(f"{stem}: has {'a notebook but no source' if stem in notebooks else 'a source but no notebook'}")
    for stem in sorted(set(notebooks) & set(sources)):
        nb = nbformat.read(notebooks[stem], as_version=4)
        if _cells(nb) != _cells(jupytext.read(sources[stem])):
            problems.append(f"{stem}: notebook and notebooks/src/{stem}.py differ — run `make notebooks NB={stem}`")
        for i, cell in enumerate(nb.cells):
            if cell.cell_type != "code" or not cell.source.strip():
                continue
            if cell.get("execution_count") is None:
                problems.append(f"{stem}: cell {i} has not been executed")
            if any(o.get("output_type") == "error" for o in cell.get("outputs", [])) \
                    and "NBVAL_RAISES_EXCEPTION" not in cell.source:
                problems.append(f"{stem}: cell {i} stores an error output")
            if cell.get("metadata"):
                problems.append(f"{stem}: cell {i} carries metadata (run `make notebooks`)")
    for p in problems:
        print("-", p)
    print(f"{len(notebooks)} notebooks checked, {len(problems)} problem(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    if len(sys.argv) < 2 or sys.argv[1] not in {"execute", "check", "warm"}:
        sys.exit(__doc__)
    if sys.argv[1] == "execute":
        execute(sys.argv[2:])
    elif sys.argv[1] == "warm":
        sys.exit(warm())
    else:
        sys.exit(check())
