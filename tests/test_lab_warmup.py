"""`make lab`'s background warm-up (tools/notebooks.py warm --background): lessons in order, one at a time, at the
lowest CPU priority, progress logged; it stops when JupyterLab stops, and its lesson kernel goes with it.

The lessons here are two tiny notebooks in a temporary folder (the real ones are run by nbval), so the test is
about the warm-up's behaviour, not the lessons' contents."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parent.parent
TOOL = ROOT / "tools" / "notebooks.py"


def _lesson(folder: Path, name: str, code: str) -> None:
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(code)])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, folder / f"{name}.ipynb")


def _env(tmp_path: Path) -> dict[str, str]:
    return {**os.environ, "EXPORTLAB_CACHE_DIR": str(tmp_path / "cache")}


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[-1].split()[0] != "Z"
    except OSError:
        return False


def test_lessons_run_in_order_at_the_lowest_priority_and_the_log_says_so(tmp_path):
    lessons, seen = tmp_path / "lessons", tmp_path / "seen.txt"
    lessons.mkdir()
    for name in ("01_second", "00_first"):
        _lesson(lessons, name, f"import os\nopen({str(seen)!r}, 'a').write('{name} ' + str(os.nice(0)) + '\\n')")
    done = subprocess.run([sys.executable, str(TOOL), "warm", "--background", "--notebooks", str(lessons),
                           "--no-answers"], env=_env(tmp_path), capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert seen.read_text().split("\n")[:2] == ["00_first 19", "01_second 19"]  # lesson order; nice 19 inherited
    log = (tmp_path / "cache" / "warm.log").read_text()
    assert "lesson 1 of 2: 00_first ready" in log and "lesson 2 of 2: 01_second ready" in log and "done in" in log
    assert "[exportlab] lesson 2 of 2: 01_second ready" in done.stderr  # the terminal shows progress too
    status = subprocess.run([sys.executable, str(TOOL), "warm-status"], env=_env(tmp_path), capture_output=True,
                            text=True, timeout=60)
    assert "done in" in status.stdout


def test_it_stops_when_jupyterlab_stops_and_its_kernel_goes_with_it(tmp_path):
    lessons, pid_file = tmp_path / "lessons", tmp_path / "kernel.json"
    lessons.mkdir()
    _lesson(lessons, "00_slow", f"import json, os, time\njson.dump(os.getpid(), open({str(pid_file)!r}, 'w'))\n"
                                "time.sleep(300)")
    _lesson(lessons, "01_never", "raise SystemExit('the warm-up went on after JupyterLab stopped')")
    jupyterlab = subprocess.Popen(["sleep", "600"])  # stands in for JupyterLab's process
    warm = subprocess.Popen([sys.executable, str(TOOL), "warm", "--background", "--notebooks", str(lessons),
                             "--no-answers", "--watch-pid", str(jupyterlab.pid)], env=_env(tmp_path),
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        while not pid_file.exists() and time.monotonic() < deadline:
            time.sleep(0.2)
        assert pid_file.exists(), "the first lesson's kernel never started"
        time.sleep(0.5)
        kernel = json.loads(pid_file.read_text())
        assert _alive(kernel)
        jupyterlab.kill()
        jupyterlab.wait()
        assert warm.wait(timeout=30) == 0  # stopped within a few seconds of JupyterLab
        deadline = time.monotonic() + 30
        while _alive(kernel) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not _alive(kernel), "the lesson's kernel outlived the warm-up"
        log = (tmp_path / "cache" / "warm.log").read_text()
        assert "stopped: JupyterLab has stopped" in log and "01_never" not in log
    finally:
        for proc in (jupyterlab, warm):
            if proc.poll() is None:
                proc.kill()


def test_the_status_a_lesson_prints_says_what_the_log_says_last_and_when(tmp_path):
    from helpers.warmup import warm_up_status

    log = tmp_path / "warm.log"
    assert warm_up_status(log).startswith("No background warm-up has run with this cache (`make lab` starts one)")
    log.write_text("2026-12-05 03:00:00 building the lessons' programs in the background, lesson by lesson\n"
                   "2026-12-05 03:00:41 lesson 1 of 13: 00_start_here ready (41 s)\n"
                   "2026-12-05 03:00:41 lesson 2 of 13: 01_silent_specialization …\n")
    written = log.stat().st_mtime
    assert warm_up_status(log, now=written + 12) == ("Background warm-up, 12 s ago: lesson 2 of 13: "
                                                     "01_silent_specialization being built; the lessons before it "
                                                     "are ready.")
    with open(log, "a") as handle:
        handle.write("2026-12-05 03:01:30 lesson 2 of 13: 01_silent_specialization ready (49 s)\n")
    written = log.stat().st_mtime
    assert warm_up_status(log, now=written + 600) == ("Background warm-up, 10 min ago: lesson 2 of 13: "
                                                      "01_silent_specialization ready (49 s).")
    with open(log, "a") as handle:
        handle.write("2026-12-05 03:02:00 stopped: JupyterLab has stopped\n")
    written = log.stat().st_mtime
    assert warm_up_status(log, now=written + 3 * 3600) == (
        "The background warm-up stopped: JupyterLab has stopped (3 h ago); lessons it had not reached build their "
        "programs on their first run.")
