"""``--max-portable-time`` (issue 20 §3): the portable operators' share of the measured run time, from ExecuTorch's
own per-operator profile (ETDump read by ``executorch.devtools.Inspector``).

Lesson 08's segmenter is 83 % delegated by node count; its one portable operator, the bilinear upsample XNNPACK
declines for its dynamic output size, is measured here. The assertions hold whatever the machine's speed: a model
with a portable operator spends some time in it (a 0 % budget fails and names it), any model is within 100 %, and a
fully delegated model has no portable call at all (0 ms, so a 0 % budget passes).
"""

from __future__ import annotations

import json

import pytest

from helpers.doctor import main

SEGMENTER = ["helpers.lessons.shapes:TinySegmenter", "--example", "1x3x64x64", "--dim", "x:2:h:32:128",
             "--dim", "x:3:w:32:128"]
SPECS = "tests/doctor_specs.py"


def _run(tmp_path, capsys, *argv: str) -> tuple[int, str, dict]:
    code = main([*argv, "--json", str(tmp_path / "d.json"), "--quiet"])
    out, _ = capsys.readouterr()
    return code, out, json.loads((tmp_path / "d.json").read_text())


def test_the_segmenters_portable_upsample_is_measured_and_a_zero_budget_fails(tmp_path, capsys):
    code, out, data = _run(tmp_path, capsys, *SEGMENTER, "--max-portable-time", "0")
    assert code == 1
    profile = data["profile"]
    assert profile["runs"] == 7 and profile["threads"] >= 1
    assert list(profile["by_operator"]) == ["upsample_bilinear2d.vec_out"]  # the operator XNNPACK declined
    assert 0 < profile["portable_ms"] < profile["total_ms"] and profile["delegate_ms"] > 0
    assert 0 < profile["share"] < 1
    check = next(c for c in data["checks"] if c["name"] == "max-portable-time")
    assert not check["passed"] and check["details"][0].startswith("upsample_bilinear2d.vec_out: ")
    assert [s["status"] for s in data["stages"] if s["name"] == "profile"] == ["failed"]
    assert data["delegation"]["coverage"] > 0.8  # what a node count says
    assert "              measured: portable operators " in out
    assert any("a high delegated share by node count does not say this" in s for s in data["next_steps"])


def test_every_model_is_within_a_whole_budget(tmp_path, capsys):
    code, _, data = _run(tmp_path, capsys, *SEGMENTER, "--max-portable-time", "100")
    assert code == 0 and data["options"]["max_portable_time"] == 100.0


def test_a_fully_delegated_model_spends_no_time_in_portable_kernels(tmp_path, capsys):
    code, _, data = _run(tmp_path, capsys, "helpers.models:ConfigBranch", "--example", "2x4",
                         "--max-portable-time", "0")
    assert code == 0
    assert data["profile"]["portable_ms"] == 0 and data["profile"]["by_operator"] == {}


def test_without_the_flag_nothing_is_measured(tmp_path, capsys):
    _, out, data = _run(tmp_path, capsys, "helpers.models:ConfigBranch", "--example", "2x4")
    assert data["profile"] is None and "profile" not in [s["name"] for s in data["stages"]]
    assert "measured:" not in out


@pytest.mark.parametrize("argv, message", [
    (["helpers.models:ConfigBranch", "--example", "2x4", "--max-portable-time", "101"],
     "--max-portable-time 101: a percentage from 0 to 100"),
    (["--spec", f"{SPECS}:buckets", "--max-portable-time", "50"],
     "has several methods; --max-portable-time examine(s) one method"),
])
def test_bad_budgets_are_one_line_and_exit_2(capsys, argv, message):
    assert main([*argv, "--quiet"]) == 2
    _, err = capsys.readouterr()
    assert message in err
