"""The doctor's output for CI systems: --json, --junit, --min-delegated, --max-arena-bytes, --strict, --pte,
--bundle and --draft-export, each through ``main()`` in this process (the command's code path, written
files included) on real lowered programs.

Lesson 08's regression is the delegation test: ``TinySegmenter`` is fully delegated at a static 64×64,
and with a dynamic height and width XNNPACK declines the bilinear upsample ("dynamic output sizes are
not supported").
"""

from __future__ import annotations

import contextlib
import copy
import io
import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

SEGMENTER = ["helpers.lessons.shapes:TinySegmenter", "--example", "1x3x64x64"]
HW = ["--dim", "x:2:height:32:{max}", "--dim", "x:3:width:32:{max}"]
ARENA_AT_128 = 655_424  # TinySegmenter's arena with height, width ≤ 128 (lesson 08)

JSON_KEYS = {"schema_version", "tool", "target", "backend", "inputs", "verdict", "exit_status", "headline", "options",
             "stages", "diagnosis", "internal_error", "contract", "probes", "counts", "delegation", "memory", "checks",
             "draft_export", "bundle", "next_steps", "method", "located", "profile", "stateful_buffers", "sequence", "across_methods"}
PROBE_KEYS = {"label", "shapes", "status", "status_words", "within_contract", "kind", "failure", "message",
              "contract_message", "max_abs_diff", "max_abs_diff_text", "source"}
NESTED_KEYS = {  # the documented schema of the nested objects (README, helpers/doctor/render.py)
    "options": {"strict", "min_delegated", "max_arena_bytes", "pte", "bundle", "draft_export", "atol", "rtol",
                "allow_portable", "max_subgraphs", "max_pte_bytes", "max_portable_time", "value_ranges",
                "positions"},
    "stages": {"name", "status", "message", "seconds"},
    "diagnosis": {"kind", "stage", "summary", "error_type", "message", "source_line", "location", "operator",
                  "suggested_fixes", "fix"},
    "contract": {"signature", "method", "inputs", "ties", "unbounded_dims"},
    "counts": {"inside", "outside", "failures", "silent", "match", "diverge", "rejected", "refused", "eager_error",
               "yours"},
    "delegation": {"source", "backend", "coverage", "delegated_nodes", "portable_nodes", "delegated_subgraphs",
                   "operators", "declined", "notes"},
    "memory": {"arena_bytes", "pte_bytes"},
    "checks": {"name", "passed", "message", "details"},
    "bundle": {"path", "bytes", "test_cases", "labels", "rtol", "atols", "verified", "failed", "left_out", "problem",
               "verify"},
}


def run(argv: list[str]) -> tuple[int, str, str]:
    """``main(argv)`` with stdout and stderr captured: (exit status, stdout, stderr)."""
    from helpers.doctor import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(argv + ["--quiet"])
    return code, out.getvalue(), err.getvalue()


def hw(top: int) -> list[str]:
    return [a.replace("{max}", str(top)) for a in HW]


@pytest.fixture(scope="module")
def tmp(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("doctor_ci")


@pytest.fixture(scope="module")
def static(tmp):
    argv = SEGMENTER + ["--min-delegated", "100", "--max-arena-bytes", str(ARENA_AT_128),
                        "--json", str(tmp / "static.json"), "--junit", str(tmp / "static.xml")]
    return run(argv), json.loads((tmp / "static.json").read_text()), ET.parse(tmp / "static.xml").getroot()


@pytest.fixture(scope="module")
def dynamic(tmp):
    """Dynamic height/width ≤ 128: delegation below 100 %, arena within budget; strict, bundled."""
    argv = SEGMENTER + hw(128) + ["--min-delegated", "100", "--max-arena-bytes", str(ARENA_AT_128), "--strict",
                                  "--bundle", str(tmp / "seg.bpte"), "--json", str(tmp / "dynamic.json"),
                                  "--junit", str(tmp / "dynamic.xml"), "--report", str(tmp / "dynamic.html")]
    return run(argv), json.loads((tmp / "dynamic.json").read_text()), ET.parse(tmp / "dynamic.xml").getroot()


# ----- --min-delegated and --max-arena-bytes: lesson 08's regression ---------------------------------------
def test_static_segmenter_is_fully_delegated_and_passes(static):
    (code, out, err), data, _ = static
    assert code == 0, out + err
    assert "✓ min-delegated: 100% of the nodes delegated to xnnpack (≥ --min-delegated 100%)" in out
    assert data["delegation"]["coverage"] == 1.0 and data["delegation"]["declined"] == {}
    assert [c["passed"] for c in data["checks"]] == [True, True, True]


def test_dynamic_segmenter_fails_min_delegated_naming_the_declined_operator(dynamic):
    (code, out, err), data, _ = dynamic
    assert code == 1, out + err
    assert "✗ min-delegated: 83% of the nodes delegated to xnnpack (< --min-delegated 100%)" in out
    assert "- aten_upsample_bilinear2d_vec (1 node(s)): dynamic output sizes are not supported" in out
    assert "83% delegated (--min-delegated 100%)" in out.splitlines()[1]  # the verdict line says why
    checks = {c["name"]: c for c in data["checks"]}
    assert not checks["min-delegated"]["passed"]
    assert checks["min-delegated"]["details"] == [
        "aten_upsample_bilinear2d_vec (1 node(s)): dynamic output sizes are not supported"]
    assert checks["max-arena-bytes"]["passed"]  # 655,424 bytes is exactly the budget
    assert data["delegation"]["declined"] == {"aten_upsample_bilinear2d_vec": ["dynamic output sizes are not supported"]}
    assert [s["status"] for s in data["stages"] if s["name"] == "delegation"] == ["failed"]
    assert "XNNPACK declined an operator because of a dynamic size" in out.split("next steps:")[1]


def test_raising_the_max_breaks_the_arena_budget():
    code, out, _ = run(SEGMENTER + hw(256) + ["--max-arena-bytes", str(ARENA_AT_128)])
    assert code == 1
    assert "✗ max-arena-bytes: arena 2,621,504 bytes (> --max-arena-bytes 655,424)" in out
    assert "parity: 15 of 15 probes inside the input contract match eager" in out  # only the budget fails


# ----- --json --------------------------------------------------------------------------------------------
def test_json_has_the_documented_schema(dynamic):
    from helpers.doctor import SCHEMA_VERSION, STAGE_NAMES

    _, data, _ = dynamic
    assert set(data) == JSON_KEYS and data["schema_version"] == SCHEMA_VERSION == 1
    for key, fields in NESTED_KEYS.items():
        for item in data[key] if isinstance(data[key], list) else [data[key]]:
            assert set(item) == fields, key
    assert (data["verdict"], data["exit_status"]) == ("fail", 1)
    assert [s["name"] for s in data["stages"]] == ["export", "lower", "load", "compare", "delegation", "memory",
                                                   "bundle"]
    assert all(s["name"] in STAGE_NAMES and s["status"] in ("ok", "failed", "skipped", "error") for s in data["stages"])
    assert data["options"] == {"strict": True, "min_delegated": 100.0, "max_arena_bytes": ARENA_AT_128, "pte": None,
                               "bundle": data["bundle"]["path"], "draft_export": False, "atol": 1e-4, "rtol": 1e-4,
                               "allow_portable": None, "max_subgraphs": None, "max_pte_bytes": None,
                               "max_portable_time": None, "value_ranges": {}, "positions": []}
    assert data["contract"]["signature"] == "forward(x: float32[1, 3, height∈[32,128], width∈[32,128]])"
    assert data["contract"]["unbounded_dims"] == []
    assert all(set(p) == PROBE_KEYS for p in data["probes"]) and len(data["probes"]) == 23
    inside = [p for p in data["probes"] if p["within_contract"]]
    assert len(inside) == data["counts"]["inside"] == 15 and all(p["status"] == "match" for p in inside)
    assert all(isinstance(p["max_abs_diff"], float) for p in inside)
    assert data["counts"]["silent"] == 5 and data["counts"]["failures"] == 5  # --strict: the silent runs fail
    assert data["memory"] == {"arena_bytes": ARENA_AT_128, "pte_bytes": data["memory"]["pte_bytes"]}
    assert data["delegation"]["source"] == "lowering" and data["delegation"]["delegated_subgraphs"] == 2


def test_json_of_a_failed_export(tmp_path):
    code, _, _ = run(["helpers.models:ScaleOrShift", "--example", "3x4", "--json", str(tmp_path / "r.json")])
    data = json.loads((tmp_path / "r.json").read_text())
    assert code == data["exit_status"] == 1 and set(data) == JSON_KEYS
    assert data["diagnosis"]["kind"] == "data_dependent" and data["diagnosis"]["source_line"] == \
        "forward(): if x.sum() > 0:"
    assert [(s["name"], s["status"]) for s in data["stages"]] == [
        ("export", "failed"), ("lower", "skipped"), ("load", "skipped"), ("compare", "skipped"),
        ("delegation", "skipped"), ("memory", "skipped")]
    assert data["probes"] == [] and data["contract"] is None and data["internal_error"] is None


# ----- --junit -------------------------------------------------------------------------------------------
def _cases(root: ET.Element, classname: str) -> list[ET.Element]:
    return [c for c in root.iter("testcase") if c.get("classname") == classname]


def test_junit_one_testcase_per_probe_and_per_check(dynamic, static):
    (_, _, _), data, root = dynamic
    suite = root.find("testsuite")
    assert root.tag == "testsuites" and suite is not None
    probes = _cases(root, "export_doctor.probes")
    assert len(probes) == len(data["probes"])
    for case, probe in zip(probes, data["probes"]):
        assert case.get("name") == f"{probe['label']} {probe['shapes']}"
        failure, skipped = case.find("failure"), case.find("skipped")
        assert (failure is not None) == probe["failure"]
        assert skipped is None  # --strict: a silent run is a failure, not a skip
        if not probe["within_contract"] and probe["failure"]:
            assert "outside the contract, yet the runtime ran it (--strict)" in failure.get("message")
    checks = {c.get("name"): c for c in _cases(root, "export_doctor.checks")}
    assert set(checks) == {"strict: outside the contract", "strict: bounded Dims", "min-delegated",
                           "max-arena-bytes", "bundle"}
    assert "dynamic output sizes are not supported" in checks["min-delegated"].find("failure").text
    assert checks["max-arena-bytes"].find("failure") is None
    counts = {k: int(suite.get(k)) for k in ("tests", "failures", "errors", "skipped")}
    assert counts == {"tests": len(suite.findall("testcase")), "failures": 5 + 2, "errors": 0, "skipped": 0}
    assert {p.get("name"): p.get("value") for p in suite.iter("property")}["verdict"] == "fail"
    # without --strict, the same kind of silent run is a skipped testcase with a message (static: none exist)
    (_, _, _), static_data, static_root = static
    assert int(static_root.find("testsuite").get("failures")) == 0
    assert len(_cases(static_root, "export_doctor.probes")) == len(static_data["probes"])


def test_junit_failure_inside_the_contract_and_skip_outside_it(tmp_path):
    code, _, _ = run(["helpers.models:ShapeBranch", "--example", "2x8x4", "--dim", "x:1:frames:2:32",
                      "--junit", str(tmp_path / "ok.xml")])
    assert code == 0
    (silent,) = [c for c in ET.parse(tmp_path / "ok.xml").getroot().iter("testcase") if c.find("skipped") is not None]
    assert silent.get("name").startswith("frames = 1 (min-1, outside)")
    assert "outside the contract, yet the runtime ran it (diverge; a device would too)" in silent.find("skipped").get(
        "message")
    code, _, _ = run(["helpers.models:ShapeBranch", "--example", "2x8x4", "--dim", "x:1:frames:1:32",
                      "--junit", str(tmp_path / "bad.xml")])
    root = ET.parse(tmp_path / "bad.xml").getroot()
    (failed,) = [c for c in root.iter("testcase") if c.find("failure") is not None]
    assert code == 1 and failed.get("name").startswith("frames = 1 (min)")
    assert failed.find("failure").get("type") == "diverge"
    assert failed.find("failure").get("message").startswith("diverge inside the contract: max |Δ| = nan")


# ----- --strict ------------------------------------------------------------------------------------------
def test_strict_fails_silent_runs_and_an_unbounded_dim():
    shape_branch = ["helpers.models:ShapeBranch", "--example", "2x8x4"]
    code, out, _ = run(shape_branch + ["--dim", "x:1:frames:2:"])
    assert code == 0, out  # without --strict: reported, not failed
    assert "! Dim frames has no max: the memory plan is sized for 8 (the example), a longer input is rejected" in out
    assert "Dim frames has no max, so the memory plan reserves the example's size" in out.split("next steps:")[1]
    code, out, _ = run(shape_branch + ["--dim", "x:1:frames:2:", "--strict"])
    assert code == 1
    assert "✗ strict: bounded Dims: Dim frames has no max" in out
    assert "✗ strict: outside the contract: 1 probe(s) outside the contract run silently by the runtime" in out
    assert "- frames = 1 (min-1, outside): diverge" in out
    code, out, _ = run(shape_branch + ["--dim", "x:1:frames:2:32", "--strict"])
    assert code == 1 and "✓ strict: bounded Dims: every Dim has a max" in out
    assert "✗ outside the contract, yet the runtime ran them (--strict: a failure):" in out


# ----- --bundle ------------------------------------------------------------------------------------------
def test_bundle_is_written_and_every_test_case_verifies(dynamic):
    from executorch.extension.pybindings.portable_lib import _load_bundled_program_from_buffer

    (_, out, _), data, _ = dynamic
    b = data["bundle"]
    assert b["problem"] is None and b["test_cases"] == 15 and b["failed"] == [] and len(b["verified"]) == 15
    assert b["labels"] == [p["label"] for p in data["probes"] if p["within_contract"] and p["status"] == "match"]
    bundle = _load_bundled_program_from_buffer(Path(b["path"]).read_bytes())
    for i, atol in enumerate(b["atols"]):
        bundle.verify_result_with_bundled_expected_output("forward", i, rtol=b["rtol"], atol=atol)
    assert "verify_result_with_bundled_expected_output('forward', i, rtol=0.0001, atol=atol)" in out
    assert b["verify"] in out.replace("                ", "")  # the snippet, as printed


def test_a_tampered_expectation_fails_verification(tmp_path):
    """Bundle the same probes with one of eager's outputs changed: the runtime's check refuses that case
    (in the doctor's own verification and with ExecuTorch's bindings), and passes the others."""
    import torch
    from executorch.extension.pybindings.portable_lib import _load_bundled_program_from_buffer

    from helpers.doctor import examine, prepare
    from helpers.doctor.bundle import write_bundle

    p = prepare(SEGMENTER + hw(128))
    report = examine(p.model, p.example_args, p.dynamic_shapes)
    parity = copy.copy(report.parity)
    parity.rows = [copy.copy(r) for r in report.parity.rows]
    parity.rows[0].eager_output = tuple(t + 0.5 for t in parity.rows[0].eager_output)
    info = write_bundle(report.diagnosis.artifact, p.model, report.probes, parity, path=tmp_path / "t.bpte",
                        atol=1e-4, rtol=1e-4)
    assert info.failed == ["example"] and len(info.verified) == 14 and not info.ok
    bundle = _load_bundled_program_from_buffer((tmp_path / "t.bpte").read_bytes())
    with pytest.raises(RuntimeError, match="verification failed"):
        bundle.verify_result_with_bundled_expected_output("forward", 0, rtol=1e-4, atol=info.atols[0])
    bundle.verify_result_with_bundled_expected_output("forward", 1, rtol=1e-4, atol=info.atols[1])
    assert isinstance(parity.rows[0].eager_output[0], torch.Tensor)


# ----- --pte ---------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def shipped(tmp):
    """TinyVision (seed 0) lowered at 64×64, and TinySegmenter with dynamic height/width, saved as .pte files."""
    import torch

    import helpers
    from helpers import models as M
    from helpers.lessons.shapes import segmenter_program

    vision = helpers.lower(M.TinyVision(), (torch.randn(1, 3, 64, 64),)).save(tmp / "vision.pte")
    segmenter = segmenter_program(max_side=128)[1].save(tmp / "segmenter.pte")
    return vision, segmenter


def test_pte_against_its_own_model_passes(shipped, tmp):
    vision, _ = shipped
    code, out, _ = run(["helpers.models:TinyVision", "--example", "1x3x64x64", "--pte", str(vision),
                        "--json", str(tmp / "pte.json")])
    data = json.loads((tmp / "pte.json").read_text())
    assert code == 0, out
    assert f"shipped: {vision}" in out and "lowering skipped: the shipped file loaded in the runtime" in out
    assert [(s["name"], s["status"]) for s in data["stages"][:3]] == [("export", "ok"), ("lower", "skipped"),
                                                                      ("load", "ok")]
    assert data["delegation"]["source"] == "pte file" and data["delegation"]["coverage"] == 1.0
    assert data["memory"]["pte_bytes"] == vision.stat().st_size


def test_pte_against_another_model_diverges(shipped):
    vision, _ = shipped
    code, out, _ = run(["helpers.models:TinyVision", "--arg", "seed=1", "--example", "1x3x64x64", "--pte", str(vision)])
    assert code == 1
    assert "9 of 9 probes inside the input contract do not match eager: 9 diverge" in out.splitlines()[1]
    assert "The shipped .pte computes something else than this eager model" in out


def test_pte_delegation_is_read_from_the_file(shipped):
    _, segmenter = shipped
    code, out, _ = run(SEGMENTER + hw(128) + ["--pte", str(segmenter), "--min-delegated", "100"])
    assert code == 1
    assert "2 subgraph(s); portable: aten::upsample_bilinear2d.vec_out" in out
    assert "declined aten::upsample_bilinear2d.vec_out: not known from a .pte file: the partitioner's reasons exist " \
           "only while lowering" in out
    assert "✓ parity: 15 of 15 probes" in out and "✗ min-delegated" in out


def test_pte_with_another_input_signature_is_reported_clearly(shipped):
    vision, _ = shipped
    code, out, err = run(["helpers.models:ShapeBranch", "--example", "2x8x4", "--pte", str(vision)])
    assert code == 1 and err == ""
    assert out.splitlines()[1] == (
        "verdict: FAIL (exit 1) — the shipped .pte cannot run these inputs (stage: load): the file's "
        "forward(float32[1, 3, 64, 64]), --example forward(float32[2, 8, 4]): x: rank 4 in the file, 3 here")
    code, out, _ = run(["helpers.models:TinyVision", "--example", "1x3x32x32", "--pte", str(vision)])
    assert code == 1 and "x axis 2: 64 in the file, 32 here; x axis 3: 64 in the file, 32 here" in out


def test_pte_that_is_not_a_program_is_a_usage_error(tmp_path):
    (tmp_path / "notes.pte").write_text("not a program")
    code, out, err = run(["helpers.models:TinyVision", "--example", "1x3x64x64", "--pte", str(tmp_path / "notes.pte")])
    assert code == 2 and out == "" and "not an ExecuTorch program" in err


# ----- --draft-export ------------------------------------------------------------------------------------
TWO_PROBLEMS = '''
import torch


class TwoProblems(torch.nn.Module):
    def forward(self, x):
        if x.sum() > 0:
            x = x * 2
        n = int(x.max().item())
        return x + n
'''


def test_draft_export_lists_every_issue(tmp_path):
    (tmp_path / "two_problems.py").write_text(TWO_PROBLEMS)
    code, out, _ = run([f"{tmp_path}/two_problems.py:TwoProblems", "--example", "3x4", "--draft-export",
                        "--json", str(tmp_path / "r.json")])
    data = json.loads((tmp_path / "r.json").read_text())
    assert code == 1
    assert "1. export      ✗ data-dependent" in out  # the first error, as export raised it
    issues = data["draft_export"]["issues"]
    assert [i["kind"] for i in issues].count("Data dependent error") >= 2  # ... and every issue draft export saw
    assert any("x.sum() > 0" in i["where"] for i in issues) and any(".item()" in i["where"] for i in issues)
    assert f"draft export: {len(issues)} issue(s) found by torch.export.draft_export:" in out
    assert "torch's report (trimmed):" in out and "framework stacktrace" not in out
    assert [s["status"] for s in data["stages"] if s["name"] == "draft_export"] == ["failed"]


def test_draft_export_of_a_clean_model():
    code, out, _ = run(["helpers.models:TinyVision", "--example", "1x3x64x64", "--draft-export"])
    assert code == 0 and "   draft export: no issue found by torch.export.draft_export" in out
