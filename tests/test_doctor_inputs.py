"""``export-doctor --inputs FILE.pt``: the user's own inputs beside the generated probes, reported apart (issue 20 §2).

The file is ``torch.save`` of a list: forward()'s positional inputs without ``--spec``; ``args`` or
``{"args", "kwargs"}`` of the spec's structure with ``--spec``; ``{method: [...]}`` for a program of several methods.
Each input is compared after the generated probes, labelled ``your input N``, judged by the same contract (one
outside it is refused or rejected as expected, never a failure by itself), counted apart in ``counts.yours``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from helpers.doctor import UsageError, main, prepare

SPECS = Path(__file__).resolve().parent / "doctor_specs.py"

USER_MODEL = '''
import torch
from torch import nn


def build():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
'''


def _save(path: Path, obj) -> str:
    torch.save(obj, path)
    return str(path)


def _run(argv: list[str], tmp_path: Path, capsys) -> tuple[int, str, dict]:
    out_json = tmp_path / "doctor.json"
    code = main([*argv, "--json", str(out_json), "--quiet"])
    out, _ = capsys.readouterr()
    return code, out, json.loads(out_json.read_text())


def test_positional_inputs_are_probed_after_the_generated_ones(tmp_path, capsys):
    (tmp_path / "user_model.py").write_text(USER_MODEL)
    g = torch.Generator().manual_seed(1)
    inputs = _save(tmp_path / "mine.pt", [torch.randn(3, 4, generator=g), (torch.randn(20, 4, generator=g),)])
    code, out, report = _run([f"{tmp_path}/user_model.py:build", "--example", "2x4", "--dim", "0:0:batch:1:16",
                              "--inputs", inputs], tmp_path, capsys)
    assert code == 0, out
    mine = [p for p in report["probes"] if p["source"] == "yours"]
    assert [p["label"] for p in mine] == ["your input 0", "your input 1"]
    assert report["probes"][-2:] == mine  # after every generated probe
    assert (mine[0]["status"], mine[0]["within_contract"]) == ("match", True)
    assert mine[0]["shapes"] == "(3, 4)"
    assert not mine[1]["within_contract"] and not mine[1]["failure"]  # batch 20 > 16: outside, not a finding
    assert report["counts"]["yours"] == {"inputs": 2, "inside": 1, "failures": 0}
    assert "your inputs (--inputs): 2, 1 inside the contract;" in out


def test_spec_inputs_of_the_specs_structure(tmp_path, capsys):
    g = torch.Generator().manual_seed(2)
    item = {"args": (torch.randn(5, 7, 4, generator=g), (torch.randn(5, 4, generator=g), torch.randn(5, 4, generator=g))),
            "kwargs": {"mask": torch.ones(5, 7, 1)}}
    inputs = _save(tmp_path / "mine.pt", [item])
    code, out, report = _run(["--spec", f"{SPECS}:tracker", "--inputs", inputs], tmp_path, capsys)
    assert code == 0, out
    mine = report["probes"][-1]
    assert (mine["source"], mine["label"], mine["status"]) == ("yours", "your input 0", "match")
    assert mine["shapes"] == "(5, 7, 4), (5, 4), (5, 4), (5, 7, 1)"


def test_each_method_of_a_program_takes_its_own_inputs(tmp_path, capsys):
    inputs = _save(tmp_path / "mine.pt", {"long": [(torch.zeros(1, 32, 4),), (torch.ones(1, 32, 4),)]})
    code, out, program = _run(["--spec", f"{SPECS}:buckets", "--inputs", inputs], tmp_path, capsys)
    assert code == 0, out
    short, long = program["methods"]
    assert short["counts"]["yours"]["inputs"] == 0
    assert long["counts"]["yours"] == {"inputs": 2, "inside": 2, "failures": 0}


@pytest.mark.parametrize(("make", "spec", "expected"), [
    (lambda d: str(d / "missing.pt"), None, "no such file"),
    (lambda d: (d / "text.pt").write_text("not a pickle") and str(d / "text.pt"), None, "torch.load (weights_only) cannot read it"),
    (lambda d: _save(d / "e.pt", []), None, "expected a non-empty list of inputs, got a list"),
    (lambda d: _save(d / "t.pt", torch.ones(2, 4)), None, "expected a non-empty list of inputs, got a Tensor"),
    (lambda d: _save(d / "two.pt", [(torch.ones(2, 4), torch.ones(2, 4))]), None, "item 0 is not 1 tensor(s)"),
    (lambda d: _save(d / "s.pt", [(torch.ones(3, 5, 4),)]), "tracker", "item 0: its structure"),
    (lambda d: _save(d / "m.pt", [(torch.ones(1, 8, 4),)]), "buckets", "the file holds a dict {method: [inputs]}"),
    (lambda d: _save(d / "u.pt", {"medium": [(torch.ones(1, 16, 4),)]}), "buckets", "no method 'medium' in the spec"),
])
def test_a_wrong_inputs_file_is_one_line(make, spec, expected, tmp_path):
    (tmp_path / "user_model.py").write_text(USER_MODEL)
    path = make(tmp_path)
    target = ["--spec", f"{SPECS}:{spec}"] if spec else [f"{tmp_path}/user_model.py:build", "--example", "2x4"]
    with pytest.raises(UsageError, match=None) as caught:
        prepare([*target, "--inputs", path])
    assert expected in str(caught.value), str(caught.value)
