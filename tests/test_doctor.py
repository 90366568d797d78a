"""`python -m helpers.doctor` as a CI job would run it: a subprocess, real export, real runtime.

The subprocesses (a good and a broken model from the lessons, the four bad-argument cases of the
issue) start together in one fixture so their seconds of imports overlap; each test reads its own
run. Further cases call ``main()`` in this process: the same code path, without the imports.
Exit codes, key report lines and the HTML report's verdict are asserted; the good model's run also
writes the JSON and JUnit reports (their contents are tested in tests/test_doctor_ci.py). An
internal error of the doctor (a library function made to raise) exits 3 and is never reported as
the model's failure.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from html.parser import HTMLParser
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

USER_MODEL = '''
import torch
from torch import nn


class Gate(nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.proj = nn.Linear(4, 4)

    def forward(self, x):
        if x.mean() > 0:
            return self.proj(x)
        return x


def build():
    return nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
'''

# name -> (arguments after `python -m helpers.doctor`, writes an HTML report?)
GOOD_AND_BROKEN = {
    "token_pool": ["helpers.models:TokenPool", "--example", "1x16:int64", "--example", "1x16",
                   "--dim", "ids:1:seq:2:64", "--dim", "mask:1:seq:2:64"],
    "shape_branch": ["helpers.models:ShapeBranch", "--example", "2x8x4", "--dim", "x:1:frames:1:32"],
}

# The four bad-argument cases of the issue, each as a subprocess ...
BAD_ARGUMENTS = {
    "missing module": (["no_such_package.models:Net", "--example", "2x4"],
                       "cannot import 'no_such_package.models': no module named 'no_such_package'"),
    "factory is not a module": (["helpers.cache:cache_dir", "--example", "2x4"],
                                "returned a PosixPath, not a torch.nn.Module"),
    "malformed --dim": (["helpers.models:ShapeBranch", "--example", "2x8x4", "--dim", "x:one:frames:1:32"],
                        "AXIS must be an integer"),
    "shape contradicts the model": (["helpers.models:ShapeBranch", "--example", "2x8x5"],
                                    "mat1 and mat2 shapes cannot be multiplied"),
}

# ... and more of them through main() in this process (same code path, without 2 s of imports each).
MORE_BAD_ARGUMENTS = {
    "class is not a module": (["{tmp}/user_model.py:torch.Generator", "--example", "2x4"],
                              "is a class but not a torch.nn.Module subclass"),
    "missing factory": (["{tmp}/user_model.py:Missing", "--example", "2x4"],
                        "has no attribute 'Missing'; candidates: Gate, build"),
    "missing file": (["{tmp}/nowhere.py:build", "--example", "2x4"], "no such file"),
    "no separator": (["helpers.models.TinyVision", "--example", "1x3x8x8"], "expected MODULE_OR_FILE:FACTORY"),
    "--dim on an unknown input": (["helpers.models:ShapeBranch", "--example", "2x8x4", "--dim", "y:1:frames:1:32"],
                                  "no input named 'y'; forward() takes x"),
    "--dim axis beyond the rank": (["helpers.models:ShapeBranch", "--example", "2x8x4", "--dim", "x:3:f:1:32"],
                                   "x has rank 3, so there is no axis 3"),
    "--dim with MAX <= MIN": (["helpers.models:ShapeBranch", "--example", "2x8x4", "--dim", "x:1:frames:8:8"],
                              "MAX must be greater than MIN"),
    "example outside the --dim range": (["helpers.models:ShapeBranch", "--example", "2x8x4",
                                         "--dim", "x:1:frames:10:32"], "outside [10, 32]"),
    "example of size 1 on a dynamic axis": (["helpers.models:ShapeBranch", "--example", "2x1x4",
                                             "--dim", "x:1:frames:1:32"], "must be at least 2"),
    "shared Dim with two ranges": (["helpers.models:TokenPool", "--example", "1x16:int64", "--example", "1x16",
                                    "--dim", "ids:1:seq:2:64", "--dim", "mask:1:seq:2:32"],
                                   "Dim 'seq' is already declared with range [2, 64]"),
    "shared Dim, examples disagree": (["helpers.models:TokenPool", "--example", "1x16:int64", "--example", "1x15",
                                       "--dim", "ids:1:seq:2:64", "--dim", "mask:1:seq:2:64"],
                                      "the examples must agree on it (16 vs 15)"),
    "malformed --example": (["helpers.models:ShapeBranch", "--example", "2by8"], "expected SHAPE[:DTYPE[:HIGH]]"),
    "unknown dtype": (["helpers.models:ShapeBranch", "--example", "2x8x4:float8"], "unknown dtype 'float8'"),
    "too few examples": (["helpers.models:TokenPool", "--example", "1x16:int64"],
                         "forward(ids, mask) takes 2 input(s), but 1 --example were given"),
    "no example": (["helpers.models:TinyVision"], "give one --example per input of forward(x)"),
    "--value-range without a colon": (["helpers.models:TokenPool", "--example", "1x16:int64", "--example", "1x16",
                                       "--value-range", "ids=0"], "expected NAME=LOW:HIGH"),
    "--value-range LOW above HIGH": (["helpers.models:TokenPool", "--example", "1x16:int64", "--example", "1x16",
                                      "--value-range", "ids=9:3"], "LOW (9) is above HIGH (3)"),
    "--value-range on a float input": (["helpers.models:TokenPool", "--example", "1x16:int64", "--example", "1x16",
                                        "--value-range", "mask=0:1"],
                                       "no integer input is named 'mask' (integer inputs: ids)"),
    "--positions without a colon": (["helpers.models:TokenPool", "--example", "1x16:int64", "--example", "1x16",
                                     "--positions", "ids=0"], "--positions 'ids=0': expected NAME=LOW:HIGH"),
    "--positions on a float input": (["helpers.models:TokenPool", "--example", "1x16:int64", "--example", "1x16",
                                      "--positions", "mask=0:15"],
                                     "--positions mask=…: no integer input is named 'mask' (integer inputs: ids)"),
    "one input with two ranges": (["helpers.models:TokenPool", "--example", "1x16:int64", "--example", "1x16",
                                   "--value-range", "ids=0:15", "--positions", "ids=0:15"],
                                  "'ids' already has a range (--value-range ids=0:15): give one per input"),
    "bad factory argument": (["helpers.models:ConfigBranch", "--arg", "colour=1", "--example", "2x4"],
                             "unexpected keyword argument 'colour'"),
    "unknown flag": (["helpers.models:ShapeBranch", "--example", "2x8x4", "--frobnicate"],
                     "unrecognized arguments: --frobnicate"),
}


class _Verdicts(HTMLParser):
    """Collects the verdict element's attributes and every probe row's attributes."""

    def __init__(self) -> None:
        super().__init__()
        self.verdicts: list[dict[str, str | None]] = []
        self.probes: list[dict[str, str | None]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        classes = (a.get("class") or "").split()
        if "exportlab-verdict" in classes:
            self.verdicts.append(a)
        if "exportlab-probe" in classes:
            self.probes.append(a)


def parse_report(path: Path) -> _Verdicts:
    parser = _Verdicts()
    parser.feed(path.read_text(encoding="utf-8"))
    return parser


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Start every doctor run at once; return {name: (returncode, stdout, stderr, report path)}."""
    tmp = tmp_path_factory.mktemp("doctor")
    (tmp / "user_model.py").write_text(USER_MODEL)
    env = {**os.environ, "EXPORTLAB_CACHE_DIR": os.environ.get("EXPORTLAB_CACHE_DIR",
                                                                 str(ROOT / ".cache" / "exportlab"))}
    jobs = {}
    plans = {name: (argv, True) for name, argv in GOOD_AND_BROKEN.items()}
    plans.update({name: (argv, False) for name, (argv, _) in BAD_ARGUMENTS.items()})
    for name, (argv, html) in plans.items():
        args = [a.replace("{tmp}", str(tmp)) for a in argv]
        report = tmp / f"{name.replace(' ', '_')}.html"
        if html:
            args += ["--report", str(report), "--json", str(report.with_suffix(".json")),
                     "--junit", str(report.with_suffix(".xml"))]
        proc = subprocess.Popen([sys.executable, "-m", "helpers.doctor", *args], cwd=ROOT, env=env,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        jobs[name] = (proc, report)
    out = {}
    for name, (proc, report) in jobs.items():
        stdout, stderr = proc.communicate(timeout=600)
        out[name] = (proc.returncode, stdout, stderr, report)
    return out


def test_good_model_passes_with_a_shared_dim(runs):
    code, out, err, report = runs["token_pool"]
    assert code == 0, out + err
    lines = out.splitlines()
    assert lines[1].startswith("verdict: PASS (exit 0) — all 12 probes inside the input contract match eager")
    assert "Dim seq ties ids[1], mask[1] (must be equal)" in out
    assert "seq = 1 (min-1, outside)" in out  # run silently by the device: reported, not failed
    assert "maximum capacity of 64 elements" in out
    assert "4. delegation" in out and "5. memory      arena 4,432 bytes" in out
    assert "[doctor" in err and "torch.export" in err and "Traceback" not in err  # progress on stderr
    parsed = parse_report(report)
    assert [v["data-verdict"] for v in parsed.verdicts] == ["pass"]
    assert parsed.verdicts[0]["data-exit-code"] == "0"
    inside = [p for p in parsed.probes if p["data-within-contract"] == "yes"]
    assert len(inside) == 12 and all(p["data-status"] == "match" for p in inside)


def test_refusals_on_the_host_and_by_the_runtime_are_counted_apart_everywhere(runs):
    code, out, _, report = runs["token_pool"]
    assert code == 0
    # text: the summary and two separate groups
    assert "1 rejected by the runtime, 4 refused on the host" in out
    def group(title: str) -> list[str]:
        lines = out.split(f"   · outside the contract and {title} (expected):\n")[1].splitlines()
        return [line for line in lines[:next(i for i, t in enumerate(lines) if not t.startswith("     - "))]]

    (rejected,) = group("rejected by the runtime")
    assert rejected.startswith("     - seq = 65 (max+1, outside)") and "maximum capacity of 64 elements" in rejected
    refused = group("refused on the host")
    assert len(refused) == 4 and all(": refused on the host: " in line for line in refused)
    # HTML: each row says which
    statuses = [p["data-status"] for p in parse_report(report).probes]
    assert statuses.count("refused") == 4 and statuses.count("rejected") == 1
    # JSON: counts and per-probe status
    data = json.loads(report.with_suffix(".json").read_text())
    assert (data["counts"]["refused"], data["counts"]["rejected"]) == (4, 1)
    assert sorted(p["status_words"] for p in data["probes"] if p["status"] in ("refused", "rejected")) == \
        ["refused on the host"] * 4 + ["rejected by the runtime"]
    # JUnit: outside the contract they pass, each saying which refusal it was
    suite = ET.parse(report.with_suffix(".xml")).getroot().find("testsuite")
    said = [c.findtext("system-out") or "" for c in suite.iter("testcase")]
    assert sum(t.startswith("refused on the host outside the contract") for t in said) == 4
    assert sum(t.startswith("rejected by the runtime outside the contract") for t in said) == 1


def test_delegation_hints_come_from_the_partitioner(runs):
    _, out, _, _ = runs["shape_branch"]
    steps = out.split("next steps:")[1]
    assert "mean.dim only supports averaging 4D tensors" in out.split("5. memory")[0]  # the delegation section
    assert "mean.dim only supports averaging 4D tensors" in steps
    delegation_steps = [line for line in steps.splitlines() if "portable" in line or "XNNPACK" in line]
    assert delegation_steps and not any("torch.cond" in line or "dynamic" in line for line in delegation_steps)
    assert "a dynamic axis or a torch.cond region" not in out  # the old guess: ShapeBranch has neither cause


def test_divergence_inside_the_contract_fails(runs):
    code, out, err, report = runs["shape_branch"]
    assert code == 1, out + err
    assert out.splitlines()[1] == ("verdict: FAIL (exit 1) — 1 of 12 probes inside the input contract does not "
                                   "match eager: 1 diverges")
    assert "✗ diverge inside the contract:" in out
    assert "- frames = 1 (min) (2, 1, 4): max |Δ| = nan; output 0: NaN on one side only" in out
    parsed = parse_report(report)
    assert parsed.verdicts[0]["data-verdict"] == "fail"
    failing = [p for p in parsed.probes if p["data-kind"] == "diverge"]
    assert len(failing) == 1 and failing[0]["data-within-contract"] == "yes"


def test_the_command_prints_the_report_examine_builds(runs):
    from helpers.doctor import to_text
    from helpers.lessons.doctor import report_for

    _, out, _, _ = runs["shape_branch"]
    argv = GOOD_AND_BROKEN["shape_branch"]
    assert out.rstrip("\n") == to_text(report_for(argv))


def test_a_warm_run_loads_the_cached_program_without_the_compiler(runs):
    """Run again once the fixture's run has built the program: the doctor reads the cached .pte with the compiled
    runtime alone and never imports ``executorch.exir`` (≈3 s of a warm run), and says the same."""
    code, out, _, _ = runs["token_pool"]
    script = ("import sys; from helpers.doctor.cli import main; "
              f"code = main({GOOD_AND_BROKEN['token_pool']!r}); "
              "print('compiler imported:', 'executorch.exir' in sys.modules, code)")
    env = {**os.environ, "EXPORTLAB_CACHE_DIR": os.environ.get("EXPORTLAB_CACHE_DIR",
                                                                 str(ROOT / ".cache" / "exportlab"))}
    again = subprocess.run([sys.executable, "-c", script], cwd=ROOT, env=env, capture_output=True, text=True,
                           timeout=300)
    *report, last = again.stdout.rstrip("\n").splitlines()
    assert last == f"compiler imported: False {code}", again.stdout[-2000:] + again.stderr[-2000:]
    assert "\n".join(report) == out.rstrip("\n")


def test_export_failure_names_the_offending_line(tmp_path, capsys):
    from helpers.doctor import main

    report = tmp_path / "report.html"
    code = main(["helpers.models:ScaleOrShift", "--example", "3x4", "--report", str(report)])
    out, err = capsys.readouterr()
    assert code == 1, out + err
    assert "verdict: FAIL (exit 1) — the export failed: data dependent (stage: export)" in out
    assert "offending line: forward(): if x.sum() > 0:   [helpers/models.py:" in out
    assert "torch.cond" in out and "torch.where" in out
    assert "export failed (data_dependent)" in err  # progress
    assert parse_report(report).verdicts[0]["data-verdict"] == "fail"


def test_a_factory_function_in_a_file(tmp_path, capsys):
    from helpers.doctor import main

    (tmp_path / "user_model.py").write_text(USER_MODEL)
    report = tmp_path / "report.html"
    code = main([f"{tmp_path}/user_model.py:build", "--example", "2x4", "--dim", "0:0:batch:1:16",
                 "--report", str(report), "--quiet"])
    out, err = capsys.readouterr()
    assert code == 0, out + err
    assert "user_model.py:build" in out.splitlines()[0]
    assert "forward(input: float32[batch∈[1,16], 4])" in out
    assert "100%" in out  # linear/relu/linear: all on XNNPACK
    assert err == ""  # --quiet
    assert parse_report(report).verdicts[0]["data-verdict"] == "pass"


def test_a_data_dependent_branch_in_a_user_file_is_located(tmp_path, capsys):
    from helpers.doctor import main

    (tmp_path / "user_model.py").write_text(USER_MODEL)
    code = main([f"{tmp_path}/user_model.py:Gate", "--example", "2x4", "--quiet"])
    out, _ = capsys.readouterr()
    assert code == 1
    assert "offending line: forward(): if x.mean() > 0:   [user_model.py:13]" in out


@pytest.mark.parametrize("case", sorted(BAD_ARGUMENTS))
def test_bad_arguments_give_one_clear_line_and_exit_2(runs, case):
    code, out, err, _ = runs[case]
    expected = BAD_ARGUMENTS[case][1]
    errors = [line for line in err.splitlines() if line and not line.startswith("[doctor")]
    assert code == 2, out + err
    assert out == ""
    assert len(errors) == 1 and errors[0].startswith("export doctor: error: "), err
    assert expected in errors[0]
    assert "Traceback" not in err


@pytest.mark.parametrize("case", sorted(MORE_BAD_ARGUMENTS))
def test_more_bad_arguments_in_process(tmp_path, capsys, case):
    from helpers.doctor import main

    (tmp_path / "user_model.py").write_text(USER_MODEL)
    argv, expected = MORE_BAD_ARGUMENTS[case]
    code = main([a.replace("{tmp}", str(tmp_path)) for a in argv] + ["--quiet"])
    out, err = capsys.readouterr()
    assert code == 2 and out == ""
    assert len(err.splitlines()) == 1 and err.startswith("export doctor: error: ")
    assert expected in err, err


# ----- internal errors: the doctor's own failure is exit 3, never the model's ------------------------------
TOKEN_POOL = GOOD_AND_BROKEN["token_pool"] + ["--quiet"]


def _boom(*_args, **_kwargs):
    raise RuntimeError("boom: a bug inside the library")


@pytest.mark.parametrize("where", ["memory plan", "contract check"])
def test_an_internal_error_exits_3_and_is_not_the_models_failure(tmp_path, capsys, monkeypatch, where):
    from helpers.artifact import PteArtifact
    from helpers.contract import InputContract
    from helpers.doctor import main

    if where == "memory plan":
        monkeypatch.setattr(PteArtifact, "planned_memory_bytes", _boom)
        stage = "memory"
    else:
        monkeypatch.setattr(InputContract, "violations", _boom)
        stage = "compare"
    code = main(TOKEN_POOL + ["--json", str(tmp_path / "r.json"), "--junit", str(tmp_path / "r.xml"),
                              "--report", str(tmp_path / "r.html")])
    out, err = capsys.readouterr()
    assert code == 3, out + err
    (line,) = err.splitlines()
    assert line.startswith(f"export doctor: internal error of export doctor itself during stage '{stage}', not a "
                           "finding about helpers.models:TokenPool: RuntimeError: boom: a bug inside the library")
    assert "rerun with --traceback" in line and "Traceback" not in err
    assert out.splitlines()[1].startswith(f"verdict: ERROR (exit 3) — internal error of export doctor during stage "
                                          f"'{stage}', not a finding about the model")
    assert "the export failed" not in out and "✗ diverge" not in out and "lowering failed" not in out
    data = json.loads((tmp_path / "r.json").read_text())
    assert (data["verdict"], data["exit_status"]) == ("error", 3)
    assert data["internal_error"] == {"stage": stage, "type": "RuntimeError", "message": "boom: a bug inside the library"}
    assert [s["status"] for s in data["stages"] if s["name"] == stage] == ["error"]
    assert all(s["status"] != "failed" for s in data["stages"])  # nothing is blamed on the model
    suite = ET.parse(tmp_path / "r.xml").getroot().find("testsuite")
    assert suite.get("errors") == "1" and suite.get("failures") == "0"
    assert parse_report(tmp_path / "r.html").verdicts[0]["data-verdict"] == "error"


def test_an_internal_error_while_preparing_the_inputs_exits_3(capsys, monkeypatch):
    from helpers.doctor import cli, main

    monkeypatch.setattr(cli, "build_dynamic_shapes", _boom)
    assert main(TOKEN_POOL) == 3
    out, err = capsys.readouterr()
    assert out == "" and err.startswith("export doctor: internal error of export doctor itself during stage "
                                        "'preparing the inputs', not a finding about helpers.models:TokenPool")


def test_traceback_shows_where_the_internal_error_is(capsys, monkeypatch):
    from helpers.artifact import PteArtifact
    from helpers.doctor import main

    monkeypatch.setattr(PteArtifact, "planned_memory_bytes", _boom)
    assert main(TOKEN_POOL + ["--traceback"]) == 3
    err = capsys.readouterr().err
    assert "Traceback (most recent call last)" in err and "in _boom" in err


def test_an_internal_error_in_the_export_stage_is_not_an_export_failure(capsys, monkeypatch):
    """An exception without a stage raised while exporting (here: inside the library's export step, not by
    torch) is the doctor's; the same model with a genuine export problem is the model's (exit 1)."""
    from helpers import lowering
    from helpers.doctor import main

    monkeypatch.setattr(lowering, "export_methods", _boom)
    assert main(TOKEN_POOL) == 3
    out, err = capsys.readouterr()
    assert "during stage 'export'" in err and "the export failed" not in out
    monkeypatch.undo()
    assert main(["helpers.models:ScaleOrShift", "--example", "3x4", "--quiet"]) == 1
    out, err = capsys.readouterr()
    assert "the export failed: data dependent (stage: export)" in out and err == ""


def test_a_genuine_lowering_failure_is_the_models_and_exits_1(capsys):
    from helpers.doctor import main

    code = main(["helpers.lessons.doctor:MedianCenter", "--example", "3x4", "--quiet"])
    out, err = capsys.readouterr()
    assert code == 1 and err == ""
    assert "verdict: FAIL (exit 1) — lowering failed: unsupported operator (stage: lower)" in out
    assert "offending line: forward(): return self.proj(x - x.median())   [helpers/lessons/doctor.py:" in out
    assert "internal error" not in out


def test_a_write_export_lifted_as_a_constant_says_how_the_doctor_exports_strict(capsys):
    """The diagnosis's fix says "export with strict=True"; in the doctor that is the spec's "strict": True, and its
    --strict flag is something else (a gate on the probes): the next steps say so. Exported strict, it lowers."""
    from test_diagnose import STATE_ARGS, HeldStart

    from helpers.doctor import examine, main

    code = main(["test_diagnose:HeldStart", "--example", "1x4", "--example", "1:int64", "--quiet",
                 "--backend", "portable"])
    out, err = capsys.readouterr()
    assert code == 1 and err == ""
    assert "writes in place to `lifted_tensor_0`" in out, out
    assert "offending line: forward(): self.holder.start.copy_(pos[0])   [tests/test_diagnose.py:" in out
    assert '"strict": True' in out and "the --strict flag is a gate on the probes, not the export mode" in out
    assert examine(HeldStart(), STATE_ARGS, backend="portable", strict_export=True).diagnosis.ok
