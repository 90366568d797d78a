"""The doctor's gates beside parity (issue 20 §3): ``--allow-portable``, ``--max-subgraphs``, ``--max-pte-bytes``.

On ``tests/doctor_specs.py:tracker`` (8 of 11 nodes on XNNPACK in 2 subgraphs; ``aten.sum.dim_IntList`` on
portable kernels, which XNNPACK has no rule for) and on the two-method ``buckets`` program: each gate at its
exact edge passes, one past it fails with the check named, the stage it belongs to marked failed and the reason in
the report; bad values are one line and exit status 2.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from helpers.doctor import UsageError, main, prepare
from helpers.doctor.cli import parse_operators

SPECS = Path(__file__).resolve().parent / "doctor_specs.py"


def _run(tmp_path: Path, capsys: pytest.CaptureFixture[str], spec: str, *flags: str) -> tuple[int, dict]:
    out_json = tmp_path / "doctor.json"
    code = main(["--spec", f"{SPECS}:{spec}", "--json", str(out_json), "--quiet", *flags])
    capsys.readouterr()
    return code, json.loads(out_json.read_text())


def _check(report: dict, name: str) -> dict:
    return next(c for c in report["checks"] if c["name"] == name)


def _stage(report: dict, name: str) -> str:
    return next(s["status"] for s in report["stages"] if s["name"] == name)


@pytest.fixture(scope="module")
def baseline(tmp_path_factory):
    """What the tracker's program is, measured by a run without gates."""
    tmp = tmp_path_factory.mktemp("gates")
    out_json = tmp / "plain.json"
    assert main(["--spec", f"{SPECS}:tracker", "--json", str(out_json), "--quiet"]) == 0
    report = json.loads(out_json.read_text())
    assert report["delegation"]["delegated_subgraphs"] == 2
    assert [o["op"] for o in report["delegation"]["operators"] if o["portable"]] == ["aten_sum_dim_int_list"]
    return report


def test_operator_names_are_read_as_the_delegation_report_writes_them():
    assert parse_operators("aten.sum.dim_IntList, aten_mean_dim") == ("aten_sum_dim_int_list", "aten_mean_dim")
    assert parse_operators("") == ()


def test_every_gate_at_its_edge_passes(baseline, tmp_path, capsys):
    size = baseline["memory"]["pte_bytes"]
    code, report = _run(tmp_path, capsys, "tracker", "--allow-portable", "aten.sum.dim_IntList,aten_mean_dim",
                        "--max-subgraphs", "2", "--max-pte-bytes", str(size))
    assert code == 0, report["checks"]
    assert report["options"]["allow_portable"] == ["aten_sum_dim_int_list", "aten_mean_dim"]
    assert (report["options"]["max_subgraphs"], report["options"]["max_pte_bytes"]) == (2, size)
    allowed = _check(report, "allow-portable")
    assert allowed["passed"] and allowed["message"] == (
        "every operator on portable kernels is allowed (aten_sum_dim_int_list); listed but not on portable kernels: "
        "aten_mean_dim")
    assert _check(report, "max-subgraphs") == {"name": "max-subgraphs", "passed": True, "details": [],
                                               "message": "2 delegated subgraph(s) (≤ --max-subgraphs 2)"}
    assert _check(report, "max-pte-bytes")["passed"]


def test_a_portable_operator_not_allowed_fails_with_the_partitioners_reason(baseline, tmp_path, capsys):
    code, report = _run(tmp_path, capsys, "tracker", "--allow-portable", "")
    assert code == 1 and report["verdict"] == "fail"
    check = _check(report, "allow-portable")
    portable = next(o["portable"] for o in baseline["delegation"]["operators"] if o["op"] == "aten_sum_dim_int_list")
    assert check["details"] == [f"aten_sum_dim_int_list ({portable} node(s)): XNNPACK has no rule for this operator"]
    assert _stage(report, "delegation") == "failed" and _stage(report, "compare") == "ok"
    assert "(not in --allow-portable)" in report["headline"]


def test_one_subgraph_more_than_allowed_fails(tmp_path, capsys):
    code, report = _run(tmp_path, capsys, "tracker", "--max-subgraphs", "1")
    assert code == 1
    assert _check(report, "max-subgraphs")["message"] == "2 delegated subgraph(s) (> --max-subgraphs 1)"
    assert _stage(report, "delegation") == "failed"


def test_one_byte_under_the_pte_fails(baseline, tmp_path, capsys):
    size = baseline["memory"]["pte_bytes"]
    code, report = _run(tmp_path, capsys, "tracker", "--max-pte-bytes", str(size - 1))
    assert code == 1
    assert _check(report, "max-pte-bytes")["message"] == f".pte {size:,} bytes (> --max-pte-bytes {size - 1:,})"
    assert _stage(report, "memory") == "failed" and _stage(report, "delegation") == "ok"


def test_gates_apply_to_each_method_of_a_program(tmp_path, capsys):
    code, program = _run(tmp_path, capsys, "buckets", "--allow-portable", "aten_mean_dim", "--max-subgraphs", "0")
    assert code == 1
    for report in program["methods"]:
        assert _check(report, "allow-portable")["passed"]
        assert not _check(report, "max-subgraphs")["passed"]


@pytest.mark.parametrize(("flags", "expected"), [
    (["--allow-portable", "aten mean"], "'aten mean' is not an operator name such as aten_mean_dim"),
    (["--max-subgraphs", "-1"], "--max-subgraphs must be a non-negative number"),
    (["--max-pte-bytes", "0"], "--max-pte-bytes must be a positive number of bytes"),
    (["--max-subgraphs", "two"], "argument --max-subgraphs: invalid int value: 'two'"),
])
def test_bad_gate_values_are_one_line(flags, expected):
    with pytest.raises(UsageError, match=expected):
        prepare(["--spec", f"{SPECS}:tracker", *flags])


# ----- per-output tolerances ----------------------------------------------------------------------
def test_a_tolerance_per_output_judges_each_output_by_its_own():
    from helpers.parity import difference

    eager = (torch.tensor([1.0, 2.0]), torch.tensor([10.0, 20.0]))
    pte = (torch.tensor([1.0, 2.0]), torch.tensor([10.0, 20.05]))  # the second output is 0.05 off
    assert difference(eager, pte, atol=1e-4, rtol=0)[0] is False
    assert difference(eager, pte, atol=(1e-4, 1e-2), rtol=0)[0] is True  # 1e-2 scaled by 20: 0.2 allowed
    same, _, what = difference(eager, pte, atol=(1e-2, 1e-4), rtol=0)  # the tight one on the wrong output
    assert (same, what) == (False, "output 1 values differ")
    with pytest.raises(ValueError, match="3 atol values for 2 outputs"):
        difference(eager, pte, atol=(1e-4, 1e-4, 1e-4), rtol=0)


def test_the_doctor_takes_one_tolerance_per_output(tmp_path, capsys):
    code, report = _run(tmp_path, capsys, "tracker", "--atol", "1e-4,1e-3,1e-2", "--rtol", "1e-4")
    assert code == 0
    assert (report["options"]["atol"], report["options"]["rtol"]) == ([1e-4, 1e-3, 1e-2], 1e-4)


@pytest.mark.parametrize(("flags", "expected"), [
    (["--atol", "1e-4,1e-2"], "--atol: 2 values, but --spec"),
    (["--rtol", "1e-4,1e-4,1e-4,1e-4"], "--rtol: 4 values"),
    (["--atol=-1e-4"], "tolerances are finite and not negative"),
    (["--atol", "tight"], "expected a number, or one number per output"),
    (["--atol", "1e-4,1e-3,1e-2", "--bundle", "x.bpte"], "--bundle takes one --atol and one --rtol"),
])
def test_bad_tolerances_are_one_line(flags, expected):
    with pytest.raises(UsageError) as caught:
        prepare(["--spec", f"{SPECS}:tracker", *flags])
    assert expected in str(caught.value), str(caught.value)
