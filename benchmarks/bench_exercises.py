"""How long an exercise's check takes, per exercise (a script, not a timed test).

    python benchmarks/bench_exercises.py            # every exercise
    python benchmarks/bench_exercises.py 07 12      # ids starting with 07 or 12

For each exercise, in a new process with an empty cache of lowered programs:

- **cold**: the first check of the solution, after the ExecuTorch compiler is imported (what a learner
  meets in a lesson whose earlier cells already lowered something: the answer's program is built);
- **cached, new process**: the same check in another process, the programs now on disk (export runs
  again; lowering does not);
- **cached, same process**: the check again in that process (programs in memory).

Budgets (issue "The learner does the work"): ≤ 10 s cold, ≤ 2 s cached, on 2 cores.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

_ONE = r"""
import json, sys, time
import helpers
from helpers import exercises
from helpers._quiet import import_executorch_quietly

helpers.set_progress(False)
import_executorch_quietly()  # a lesson's kernel has it by the time the learner checks an answer
exercise = exercises.get(sys.argv[1])
answer = exercise.solution
times = []
for _ in range(int(sys.argv[2])):
    start = time.perf_counter()
    grade = exercise.check(answer)
    times.append(time.perf_counter() - start)
    assert grade.passed, grade.report()
print(json.dumps(times))
"""


def _run(exercise_id: str, repeats: int, cache: str) -> list[float]:
    env = {**os.environ, "EXPORTLAB_CACHE_DIR": cache}
    done = subprocess.run([sys.executable, "-c", _ONE, exercise_id, str(repeats)], env=env, cwd=ROOT,
                          capture_output=True, text=True, timeout=600)
    if done.returncode:
        raise RuntimeError(f"{exercise_id}: {done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main(prefixes: list[str]) -> None:
    sys.path.insert(0, str(ROOT))
    from helpers import exercises

    chosen = [e.id for e in exercises.catalog() if not prefixes or e.id.startswith(tuple(prefixes))]
    print(f"{'exercise':<24} {'cold':>7} {'cached, new process':>20} {'cached, same process':>21}")
    rows = []
    for exercise_id in chosen:
        with tempfile.TemporaryDirectory(prefix="exportlab-bench-ex-") as cache:
            cold, same = _run(exercise_id, 2, cache)
            (again,) = _run(exercise_id, 1, cache)
        rows.append({"exercise": exercise_id, "cold_s": cold, "cached_new_process_s": again, "cached_same_process_s": same})
        print(f"{exercise_id:<24} {cold:6.2f}s {again:19.2f}s {same:20.2f}s", flush=True)
    worst = {k: max(r[k] for r in rows) for k in ("cold_s", "cached_new_process_s", "cached_same_process_s")}
    print(f"{'worst':<24} {worst['cold_s']:6.2f}s {worst['cached_new_process_s']:19.2f}s "
          f"{worst['cached_same_process_s']:20.2f}s   (budgets: ≤ 10 s cold, ≤ 2 s cached)")
    out = ROOT / "test-output" / "bench-exercises.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main(sys.argv[1:])
