"""Where a divergence comes from (issue 20 §4): each diverging probe followed through exported program → edge
program → portable ``.pte`` → the examined ``.pte``, on three real divergences.

- lesson 01's ShapeBranch at one frame: the export kept the ``if x.shape[1] > 1`` branch, so the exported program
  itself already diverges (the model's to fix);
- a 2×2 max pool given a camera frame with one dead pixel (NaN) through ``--inputs``: eager propagates the NaN.
  With the NaN first in its pooling window, the portable kernel keeps it and only XNNPACK drops it (the delegate's
  numerics); elsewhere in the window the portable kernel drops it too (ExecuTorch's kernel, not the delegate);
- a shipped ``.pte`` built from other weights (``--pte``): everything built here matches, the shipped file does not.
Each is read from the text report, the JSON, the JUnit failure and the ``--github`` annotation.
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import torch

from helpers.doctor import main

SHAPE_BRANCH = ["helpers.models:ShapeBranch", "--example", "2x8x4", "--dim", "x:1:frames:1:32"]
POOL = '''
import torch
from torch import nn


class Pool(nn.Module):
    def forward(self, x):
        return torch.nn.functional.max_pool2d(x, 2)
'''


def _doctor(tmp_path: Path, capsys, *argv: str) -> tuple[int, str, dict, ET.Element]:
    code = main([*argv, "--json", str(tmp_path / "d.json"), "--junit", str(tmp_path / "d.xml"), "--quiet"])
    out, err = capsys.readouterr()
    assert "Warning:" not in err and "[W" not in err, err  # torch's C++ warnings from the stages stay out
    return code, out, json.loads((tmp_path / "d.json").read_text()), ET.parse(tmp_path / "d.xml").getroot()


def _failure_text(junit: ET.Element, label: str) -> str:
    case = next(c for c in junit.iter("testcase") if c.get("name", "").startswith(label))
    return case.find("failure").text


def test_a_specialization_first_diverges_in_the_exported_program(tmp_path, capsys):
    code, out, data, junit = _doctor(tmp_path, capsys, *SHAPE_BRANCH)
    assert code == 1
    (found,) = data["located"]
    assert found["label"] == "frames = 1 (min)" and found["first_stage"] == "exported program"
    assert [(s["name"], s["status"]) for s in found["stages"]] == [
        ("exported program", "diverge"), ("edge program", "diverge"), ("portable .pte", "diverge"),
        ("xnnpack .pte", "diverge")]
    assert "     - frames = 1 (min): exported program ✗ (max |Δ| = nan) → edge program ✗" in out
    assert "first at the exported program: the export recorded another computation than eager" in out
    assert [s["name"] for s in data["stages"]][:6] == ["export", "lower", "load", "compare", "locate", "delegation"]
    assert "first at the exported program" in _failure_text(junit, "frames = 1 (min)")
    assert any("a Python decision" in step for step in data["next_steps"])  # the model's fix stays first


@pytest.fixture
def pool_project(tmp_path, monkeypatch):
    (tmp_path / "pool.py").write_text(POOL)
    monkeypatch.chdir(tmp_path)

    def frame_with_a_dead_pixel(row: int, col: int) -> str:
        x = torch.randn(1, 3, 8, 8, generator=torch.Generator().manual_seed(0))
        x[0, 1, row, col] = float("nan")
        path = tmp_path / f"frame_{row}_{col}.pt"
        torch.save([x], path)
        return str(path)
    return frame_with_a_dead_pixel


def test_a_nan_only_the_delegate_drops_first_diverges_in_the_delegated_pte(tmp_path, capsys, pool_project,
                                                                             monkeypatch):
    frames = pool_project(2, 2)  # the first element of its 2×2 window
    summary = tmp_path / "summary.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    code, out, data, junit = _doctor(tmp_path, capsys, "pool.py:Pool", "--example", "1x3x8x8", "--inputs", frames,
                                     "--github")
    assert code == 1
    (found,) = data["located"]
    assert found["label"] == "your input 0" and found["first_stage"] == "delegated .pte"
    assert [(s["name"], s["status"]) for s in found["stages"]] == [
        ("exported program", "match"), ("edge program", "match"), ("portable .pte", "match"),
        ("xnnpack .pte", "diverge")]
    assert "only the delegate's kernels compute it differently" in found["meaning"]
    assert data["next_steps"][0].startswith("The exported program matches eager on the diverging probes; they first "
                                            "diverge at the delegated .pte, so the model is not the cause")
    assert not any("a Python decision" in step for step in data["next_steps"])
    assert "first at the delegated .pte" in _failure_text(junit, "your input 0")
    from test_doctor_github import parse_commands

    (error,) = [c for c in parse_commands(out) if c["kind"] == "error"]
    assert error["title"].endswith("pool.py:Pool: probe your input 0")
    assert "First leaves eager at the delegated .pte: only the delegate's kernels" in error["message"]
    assert "first at the **delegated .pte**" in summary.read_text()


def test_a_nan_the_portable_kernel_drops_too_first_diverges_in_the_portable_pte(tmp_path, capsys, pool_project):
    frames = pool_project(2, 3)  # the second element of its window: the portable kernel drops it as well
    code, out, data, _ = _doctor(tmp_path, capsys, "pool.py:Pool", "--example", "1x3x8x8", "--inputs", frames)
    assert code == 1
    (found,) = data["located"]
    assert found["first_stage"] == "portable .pte"
    assert [s["status"] for s in found["stages"]] == ["match", "match", "diverge", "diverge"]
    assert "first at the portable .pte: ExecuTorch's portable kernels" in out


def test_a_portable_program_is_its_own_last_stage(tmp_path, capsys):
    code, out, data, _ = _doctor(tmp_path, capsys, *SHAPE_BRANCH, "--backend", "portable")
    assert code == 1
    (found,) = data["located"]
    assert [s["name"] for s in found["stages"]] == ["exported program", "edge program", "portable .pte"]
    assert found["first_stage"] == "exported program"


def test_a_model_that_matches_is_not_located(tmp_path, capsys):
    code, out, data, _ = _doctor(tmp_path, capsys, "helpers.models:ConfigBranch", "--example", "2x4")
    assert code == 0
    assert data["located"] == [] and "locate" not in [s["name"] for s in data["stages"]]
    assert "where each diverging probe" not in out


def test_a_shipped_pte_built_from_other_weights_first_diverges_in_the_shipped_file(tmp_path, capsys):
    from torch.export import Dim

    import helpers
    from helpers import models

    other = helpers.lower(models.ShapeBranch(seed=1), (torch.randn(2, 8, 4),),
                          dynamic_shapes={"x": {1: Dim("frames", min=2, max=32)}})
    shipped = tmp_path / "shipped.pte"
    shipped.write_bytes(other.pte_bytes)
    code, out, data, _ = _doctor(tmp_path, capsys, "helpers.models:ShapeBranch", "--example", "2x8x4", "--dim",
                                 "x:1:frames:2:32", "--pte", str(shipped))
    assert code == 1
    assert len(data["located"]) == 3  # every probe diverges: the first three are followed
    assert {f["first_stage"] for f in data["located"]} == {"shipped .pte"}
    assert [s["status"] for s in data["located"][0]["stages"]] == ["match", "match", "match", "diverge"]
    assert "it was built from other weights or another version of the code" in out
