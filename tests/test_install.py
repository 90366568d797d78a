"""export-doctor in someone else's project: installed into a clean virtual environment, run from their folder.

Issue 20 §1. A throwaway project in a temporary folder, with its own ``pyproject.toml``, its own model and its own
top-level ``helpers`` module (a name many projects use, and the name of this checkout's library folder). A fresh
virtual environment gets this project by ``pip install <path>`` (a copy of ``pyproject.toml`` and ``helpers/``, as
a clone would have them; the dependencies come from the package index as configured, torch's CPU build included),
then ``export-doctor`` runs from the throwaway project's folder: a model that passes (exit 0) and one that
specializes its batch (exit 1), each with its JSON report read back.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

THEIR_HELPERS = '''\
"""The throwaway project's own helpers module: export-doctor must not shadow it."""

WIDTH = 8
'''

THEIR_MODEL = '''\
import torch
from helpers import WIDTH  # their helpers.py, not exportlab's folder


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, WIDTH, 3, padding=1)

    def forward(self, x):
        return torch.relu(self.conv(x)).mean(dim=(2, 3))


class FlatNet(Net):
    def forward(self, x):
        return super().forward(x) + torch.zeros(2, WIDTH)  # a batch of 2, written as a number


def build():
    torch.manual_seed(0)
    return Net()


def build_flat():
    torch.manual_seed(0)
    return FlatNet()
'''

THEIR_PYPROJECT = '''\
[project]
name = "acme-vision"
version = "0.0.1"
'''


def _clean_env(**extra: str) -> dict[str, str]:
    # PYTHONDONTWRITEBYTECODE (set on CI machines like this one) would make every run of the fresh venv compile
    # torch's modules again: the first doctor run writes them, the second reads them
    leave_out = ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME", "PYTHONDONTWRITEBYTECODE")
    env = {k: v for k, v in os.environ.items() if k not in leave_out}
    env.update(extra)
    return env


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, dict[str, str]]:
    """(the venv's bin folder, the throwaway project's folder, the environment to run in)."""
    base = tmp_path_factory.mktemp("install")
    source = base / "exportlab"
    source.mkdir()
    shutil.copy(ROOT / "pyproject.toml", source / "pyproject.toml")
    shutil.copytree(ROOT / "helpers", source / "helpers", ignore=shutil.ignore_patterns("__pycache__"))
    project = base / "acme"
    project.mkdir()
    (project / "pyproject.toml").write_text(THEIR_PYPROJECT)
    (project / "helpers.py").write_text(THEIR_HELPERS)
    (project / "model.py").write_text(THEIR_MODEL)
    env = _clean_env(EXPORTLAB_CACHE_DIR=str(base / "cache"))
    venv = base / "venv"
    # sys.executable is this checkout's .venv; venv builds on its base interpreter, so the new one holds nothing
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, env=env)
    bin_dir = venv / "bin"
    # --no-compile: byte-compiling torch's sources for the test would take longer than installing them
    pip = subprocess.run([str(bin_dir / "python"), "-m", "pip", "install", "--quiet", "--no-compile", str(source)],
                         capture_output=True, text=True, env=env, cwd=base)
    assert pip.returncode == 0, pip.stdout[-2000:] + pip.stderr[-4000:]
    return bin_dir, project, env


def _doctor(installed: tuple[Path, Path, dict[str, str]], *args: str) -> subprocess.CompletedProcess[str]:
    bin_dir, project, env = installed
    return subprocess.run([str(bin_dir / "export-doctor"), *args], capture_output=True, text=True, env=env,
                          cwd=project, timeout=300)


@pytest.mark.timeout(900)
def test_the_clean_venv_has_the_command_and_no_helpers_module(installed):
    bin_dir, project, env = installed
    assert (bin_dir / "export-doctor").is_file()
    probe = "import importlib.util as u; print(u.find_spec('helpers'), u.find_spec('exportlab.doctor').origin)"
    elsewhere = subprocess.run([str(bin_dir / "python"), "-c", probe], capture_output=True, text=True, env=env,
                               cwd=project.parent, check=True)
    spec_helpers, doctor_origin = elsewhere.stdout.split()
    assert spec_helpers == "None", "the install put a top-level `helpers` module in the environment"
    assert Path(doctor_origin).is_relative_to(bin_dir.parent), doctor_origin  # installed, not read from the checkout


@pytest.mark.timeout(900)
def test_export_doctor_passes_their_model_from_their_folder(installed):
    run = _doctor(installed, "model:build", "--example", "2x3x16x16", "--dim", "x:0:batch:1:4", "--json",
                  "doctor.json", "--quiet")
    assert run.returncode == 0, run.stdout + run.stderr
    report = json.loads((installed[1] / "doctor.json").read_text())
    assert (report["verdict"], report["exit_status"], report["target"]) == ("pass", 0, "model:build")
    assert report["counts"]["failures"] == 0 and report["counts"]["inside"] >= 3
    assert report["delegation"]["coverage"] > 0 and report["memory"]["arena_bytes"] > 0
    assert run.stdout.splitlines()[1].startswith("verdict: PASS (exit 0)"), run.stdout[:300]


@pytest.mark.timeout(900)
def test_export_doctor_fails_a_specializing_model_with_exit_1(installed):
    run = _doctor(installed, "model:build_flat", "--example", "2x3x16x16", "--dim", "x:0:batch:1:4", "--json",
                  "flat.json", "--quiet")
    assert run.returncode == 1, run.stdout + run.stderr
    report = json.loads((installed[1] / "flat.json").read_text())
    assert report["verdict"] == "fail"
    failed = [s["name"] for s in report["stages"] if s["status"] == "failed"]
    assert failed == ["export"], report["stages"]
    assert report["diagnosis"]["kind"] == "constraint_violation"
    assert report["diagnosis"]["summary"] == "Dim 'batch' was declared dynamic, but forward() only works for the size 2"
