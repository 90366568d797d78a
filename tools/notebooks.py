"""Build, execute and check the lesson notebooks.

    python tools/notebooks.py execute [NAME ...]   # src/*.py → .ipynb, run in a fresh kernel, save outputs
    python tools/notebooks.py check                # CI: .ipynb and src/*.py agree, every cell has run, no stray errors
    python tools/notebooks.py warm                 # run every lesson once (nothing saved), reveal every
                                                   # prediction and check every exercise's solution, so the
                                                   # programs they lower are in the cache before a learner opens them
    python tools/notebooks.py warm --background --watch-pid PID
                                                   # `make lab` (tools/lab.py): the same, while JupyterLab runs:
                                                   # lesson by lesson in lesson order, at the lowest priority,
                                                   # progress in <cache>/warm.log; stops when PID stops
    python tools/notebooks.py warm-status          # where the warm-up stands (lesson 00 prints it too)

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


def _metadata(nb: nbformat.NotebookNode) -> list[dict]:
    return [_kept_metadata(dict(cell.metadata)) for cell in nb.cells]


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


# Cell metadata a lesson may carry (set in its py:percent source): nbval's tag for a cell whose output varies
# (timings), and the closed "Checked for CI" section at the end of a lesson (its heading collapsed in JupyterLab, its
# code cells tagged ci-check with their source hidden). Anything else is stripped.
KEPT_CELL_METADATA = {
    "tags": [["nbval-ignore-output"], ["ci-check"]],
    "jupyter": [{"source_hidden": True}],
    "jp-MarkdownHeadingCollapsed": [True],
}


def _kept_metadata(metadata: dict) -> dict:
    return {key: value for key, value in metadata.items() if value in KEPT_CELL_METADATA.get(key, [])}


def _clean(nb: nbformat.NotebookNode) -> None:
    nb.metadata = {
        "kernelspec": {"display_name": "Python 3 (exportlab)", "language": "python", "name": "python3"},
        "language_info": {"name": "python"},
    }
    for cell in nb.cells:
        cell.metadata = _kept_metadata(dict(cell.metadata))
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


def _warm_one(path: str, answers: bool = False) -> tuple[str, float, str]:
    """Run one lesson in a fresh kernel (nothing saved); with ``answers``, then reveal its predictions and check
    its exercises' solutions in the same kernel. Returns (lesson, seconds, what went wrong or '')."""
    start = time.perf_counter()
    nb = nbformat.read(path, as_version=4)
    if answers:
        nb.cells.append(nbformat.v4.new_code_cell(_WARM_ANSWERS.replace("ONLY_LESSON", repr(Path(path).stem))))
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
    if ONLY_LESSON is not None and item.lesson != ONLY_LESSON:
        continue
    try:
        item.actual() if isinstance(item, questions.Question) else item.check(item.solution)
    except Exception as exc:  # report and go on: one failure must not leave the others cold
        problems.append(f"{item.id}: {type(exc).__name__}")
print("; ".join(problems))
if problems and ONLY_LESSON is not None:  # in a lesson's kernel: fail the cell, so the warm-up reports it
    raise RuntimeError("; ".join(problems))
"""


def _warm_answers() -> tuple[str, float, str]:
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", _WARM_ANSWERS.replace("ONLY_LESSON", "None")], cwd=ROOT,
                          capture_output=True, text=True)
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


def _cache() -> Path:
    return Path(os.environ.get("EXPORTLAB_CACHE_DIR") or ROOT / ".cache" / "exportlab")


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[-1].split()[0]
    except OSError:
        return False
    return state != "Z"  # a zombie has exited


def warm_background(watch_pid: int | None, notebooks: Path = NOTEBOOKS, answers: bool = True) -> int:
    """The warm-up of `make lab`, beside JupyterLab: every lesson once, in lesson order, one at a time, at the
    lowest CPU priority (``os.nice(19)``, which the lessons' kernels inherit), so that a learner's kernel gets
    the processor first. A program the learner needs while the warm-up builds it is built once: the second
    builder waits on the cache entry's lock (:func:`helpers.cache.build_lock`) and loads it. Progress goes to
    ``<cache>/warm.log`` and to the terminal; it stops when ``watch_pid`` (JupyterLab) has stopped, or on
    SIGTERM. Does nothing when the cache is already warm (the same stamp as :func:`warm`)."""
    import signal

    cache = _cache()
    cache.mkdir(parents=True, exist_ok=True)
    os.environ["EXPORTLAB_CACHE_DIR"] = str(cache)
    from helpers.warmup import LOG_NAME  # the log's name, shared with its reader (helpers.warm_up_status)

    log_path = cache / LOG_NAME

    def log(message: str, terminal: bool = True) -> None:
        with open(log_path, "a") as handle:
            handle.write(f"{time.strftime('%Y-%m-%d %H:%M:%S')} {message}\n")
        if terminal:
            print(f"[exportlab] {message}", file=sys.stderr, flush=True)

    def stop(why: str) -> None:
        log(f"stopped: {why}", terminal=False)
        os._exit(0)  # the lesson's kernel notices its parent is gone and exits (ipykernel's parent poller)

    signal.signal(signal.SIGTERM, lambda *_: stop("JupyterLab has stopped"))
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C in the terminal is JupyterLab's; we stop with it
    if watch_pid is not None:  # also when JupyterLab is killed outright (no SIGTERM reaches us then)
        import threading

        def watch() -> None:
            while _alive(watch_pid):
                time.sleep(1)
            stop("JupyterLab has stopped")

        threading.Thread(target=watch, daemon=True, name="watch-jupyterlab").start()
    stamp = _warm_stamp()
    if notebooks == NOTEBOOKS and stamp.exists():
        log("the lessons' programs are already built (the cache is warm)")
        return 0
    os.nice(19)
    paths = sorted(notebooks.glob("[0-9][0-9]_*.ipynb"))
    log(f"building the lessons' programs in the background, lesson by lesson, at low priority "
        f"({len(paths)} lessons; progress: {log_path})")
    start, failed = time.perf_counter(), []
    for k, path in enumerate(paths, 1):
        log(f"lesson {k} of {len(paths)}: {path.stem} …", terminal=False)
        name, seconds, problem = _warm_one(str(path), answers=answers)
        if problem:
            failed.append(name)
            log(f"lesson {k} of {len(paths)}: {name} had a problem ({problem}); it builds on its first run")
        else:
            log(f"lesson {k} of {len(paths)}: {name} ready ({seconds:.0f} s)")
    log(f"done in {time.perf_counter() - start:.0f} s: {len(paths) - len(failed)} of {len(paths)} lessons ready")
    if not failed and notebooks == NOTEBOOKS:
        stamp.parent.mkdir(parents=True, exist_ok=True)
        stamp.touch()
    return 1 if failed else 0


def warm_status() -> str:
    """Where the background warm-up stands (the sentence lesson 00 prints, from ``warm.log``'s last line)."""
    from helpers.warmup import LOG_NAME, warm_up_status

    return warm_up_status(_cache() / LOG_NAME)


def check() -> int:
    problems = []
    notebooks = {p.stem: p for p in NOTEBOOKS.glob("*.ipynb")}
    sources = {p.stem: p for p in SOURCES.glob("*.py")}
    for stem in sorted(set(notebooks) ^ set(sources)):
        problems.append(f"{stem}: has {'a notebook but no source' if stem in notebooks else 'a source but no notebook'}")
    for stem in sorted(set(notebooks) & set(sources)):
        nb = nbformat.read(notebooks[stem], as_version=4)
        if _cells(nb) != _cells(jupytext.read(sources[stem])) or _metadata(nb) != _metadata(jupytext.read(sources[stem])):
            problems.append(f"{stem}: notebook and notebooks/src/{stem}.py differ — run `make notebooks NB={stem}`")
        for i, cell in enumerate(nb.cells):
            if cell.cell_type != "code" or not cell.source.strip():
                continue
            if cell.get("execution_count") is None:
                problems.append(f"{stem}: cell {i} has not been executed")
            if any(o.get("output_type") == "error" for o in cell.get("outputs", [])) \
                    and "NBVAL_RAISES_EXCEPTION" not in cell.source:
                problems.append(f"{stem}: cell {i} stores an error output")
            if cell.get("metadata", {}) != _kept_metadata(dict(cell.get("metadata", {}))):
                problems.append(f"{stem}: cell {i} carries metadata (run `make notebooks`)")
    for p in problems:
        print("-", p)
    print(f"{len(notebooks)} notebooks checked, {len(problems)} problem(s)")
    return 1 if problems else 0


def _warm_command(args: list[str]) -> int:
    import argparse

    parser = argparse.ArgumentParser(prog="notebooks.py warm")
    parser.add_argument("--background", action="store_true", help="lesson by lesson at low priority (make lab)")
    parser.add_argument("--watch-pid", type=int, help="stop when this process (JupyterLab) stops")
    parser.add_argument("--notebooks", type=Path, default=NOTEBOOKS, help="another folder of NN_*.ipynb lessons")
    parser.add_argument("--no-answers", action="store_true", help="do not reveal predictions nor check solutions")
    options = parser.parse_args(args)
    if options.background:
        return warm_background(options.watch_pid, options.notebooks.resolve(), answers=not options.no_answers)
    return warm()


if __name__ == "__main__":
    if len(sys.argv) < 2 or sys.argv[1] not in {"execute", "check", "warm", "warm-status"}:
        sys.exit(__doc__)
    if sys.argv[1] == "execute":
        execute(sys.argv[2:])
    elif sys.argv[1] == "warm":
        sys.exit(_warm_command(sys.argv[2:]))
    elif sys.argv[1] == "warm-status":
        print(warm_status())
    else:
        sys.exit(check())
