"""Importing the library changes nothing process-wide: no warning filter, no logger level, no environment
variable. A lesson kernel opts in to quiet output (tools/kernelspec.py) and so does the doctor's command line;
someone else's program that imports ``helpers`` (or the doctor) keeps its own settings."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

SNAPSHOT = textwrap.dedent('''
    import json, logging, os, sys, warnings

    def snapshot():
        loggers = {{name: logging.getLogger(name).level for name in sorted(logging.root.manager.loggerDict)}}
        loggers["<root>"] = logging.getLogger().level
        return {{"filters": [repr(f) for f in warnings.filters], "loggers": loggers, "env": dict(os.environ),
                "disabled": logging.root.manager.disable}}

    # what the library imports, imported first: their own import-time settings are not the library's
    import torch, torch._dynamo, executorch.exir, executorch.runtime, transformers
    before = snapshot()
    {imports}
    after = snapshot()
    changed = {{k: (before[k], after[k]) for k in before if k != "loggers" and before[k] != after[k]}}
    changed["loggers"] = {{n: (before["loggers"].get(n), lvl) for n, lvl in after["loggers"].items()
                          if lvl != before["loggers"].get(n, logging.NOTSET)}}
    print(json.dumps(changed))
''')

# Every module of the package (not the two ``__main__`` modules: importing those runs a command).
EVERY_MODULE = textwrap.dedent('''
    import importlib, pkgutil, helpers
    names = [m.name for m in pkgutil.walk_packages(helpers.__path__, "helpers.") if not m.name.endswith("__main__")]
    assert len(names) > 30, names
    for name in names:
        importlib.import_module(name)
''')


def _changes(imports: str) -> dict:
    code = SNAPSHOT.format(imports=imports)
    # The variable the opt-in sets, removed: a test before this one may have opted this process in already.
    env = {k: v for k, v in os.environ.items() if k != "TORCHDYNAMO_VERBOSE"}
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300,
                          env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_importing_every_module_of_the_library_changes_nothing_global():
    changed = _changes(EVERY_MODULE)
    assert not changed["loggers"], changed["loggers"]
    assert set(changed) == {"loggers"}, {k: v for k, v in changed.items() if k != "loggers"}


def test_the_snapshot_sees_an_opt_in():
    """The check above can fail: opting in to quiet output shows up in it."""
    changed = _changes("import helpers\nhelpers.silence_library_noise()")
    assert changed["loggers"] and "filters" in changed and "env" in changed


def test_the_lesson_kernel_opts_in():
    """tools/kernelspec.py writes the start-up lines every kernel of the environment runs (nbval's too)."""
    config = Path(sys.prefix) / "etc" / "ipython" / "ipython_kernel_config.py"
    assert "helpers.silence_library_noise()" in config.read_text(), f"run tools/kernelspec.py: {config}"
