"""``--config`` (issue 20 §3): several models from ``[tool.export-doctor]`` in a ``pyproject.toml``, one run.

A throwaway ``pyproject.toml`` names four models the other doctor tests lower too (their programs are cached): the
tracker spec (passes), lesson 01's ShapeBranch (diverges inside its contract), the two-method bucket program, and
ConfigBranch built with a keyword from a TOML table. One real run checks them all; the text, JSON, JUnit (one suite
per model, per method for the program) and ``--github`` output are read back. Then every wrong configuration is one
line and exit status 2 before anything runs, and the doctor's own failure on one model is exit 3 while the others
still get their verdict.
"""

from __future__ import annotations

import contextlib
import io
import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from helpers.doctor import main

SPECS = Path(__file__).resolve().parent / "doctor_specs.py"

CONFIG = f"""
[project]
name = "their-app"

[tool.export-doctor]
max-subgraphs = 4          # every model, unless its table says otherwise

[tool.export-doctor.models.tracker]
spec = "{SPECS}:tracker"
allow-portable = ["aten.sum.dim_IntList"]

[tool.export-doctor.models.frames]
target = "helpers.models:ShapeBranch"
example = ["2x8x4"]
dim = ["x:1:frames:1:32"]

[tool.export-doctor.models.buckets]
spec = "{SPECS}:buckets"
max-subgraphs = 1

[tool.export-doctor.models.plain]
target = "helpers.models:ConfigBranch"
example = "2x4"
arg = {{use_residual = false}}
max-arena-bytes = 100000
"""


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """One run of the whole configuration, with every output asked for (stdout and stderr kept: capsys is per test)."""
    tmp = tmp_path_factory.mktemp("config")
    (tmp / "pyproject.toml").write_text(CONFIG)
    summary = tmp / "summary.md"
    mp = pytest.MonkeyPatch()
    mp.setenv("GITHUB_STEP_SUMMARY", str(summary))
    mp.setenv("GITHUB_WORKSPACE", str(tmp))
    out, err = io.StringIO(), io.StringIO()
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(["--config", str(tmp / "pyproject.toml"), "--json", str(tmp / "d.json"), "--junit",
                         str(tmp / "d.xml"), "--report", str(tmp / "d.html"), "--github"])
    finally:
        mp.undo()
    return {"code": code, "out": out.getvalue(), "err": err.getvalue(), "json": json.loads((tmp / "d.json").read_text()),
            "junit": ET.parse(tmp / "d.xml").getroot(), "html": (tmp / "d.html").read_text(),
            "summary": summary.read_text(), "tmp": tmp}


def test_every_model_is_examined_and_the_run_fails_on_the_one_that_does(run):
    assert run["code"] == 1, run["out"][-2000:] + run["err"][-2000:]
    assert [(m["name"], m["verdict"]) for m in run["json"]["models"]] == [
        ("tracker", "pass"), ("frames", "fail"), ("buckets", "pass"), ("plain", "pass")]
    assert (run["json"]["verdict"], run["json"]["exit_status"], run["json"]["config"]) == (
        "fail", 1, str(run["tmp"] / "pyproject.toml"))
    text = run["out"].split("\n::", 1)[0]  # the report; the workflow commands (--github) follow it
    assert text.rstrip().splitlines()[-1] == (
        f"export doctor · {run['tmp'] / 'pyproject.toml'} · 4 model(s): tracker PASS, frames FAIL, buckets PASS, "
        "plain PASS → FAIL (exit 1)")
    assert [line for line in run["out"].splitlines() if line.startswith("══ model ")] == [
        "══ model tracker ══", "══ model frames ══", "══ model buckets ══", "══ model plain ══"]


def test_each_table_gives_its_options_and_the_shared_key_applies_unless_overridden(run):
    tracker, frames, buckets, plain = run["json"]["models"]
    assert tracker["options"]["allow_portable"] == ["aten_sum_dim_int_list"]
    assert tracker["options"]["max_subgraphs"] == frames["options"]["max_subgraphs"] == 4  # the shared key
    assert [m["options"]["max_subgraphs"] for m in buckets["methods"]] == [1, 1]  # the table's own value wins
    assert frames["inputs"] == "x: float32[2, frames∈[1,32] (example 8), 4]"
    assert plain["target"] == "helpers.models:ConfigBranch" and plain["options"]["max_arena_bytes"] == 100000
    assert plain["contract"]["inputs"][0]["dtype"] == "float32"
    checks = {c["name"]: c["passed"] for c in plain["checks"]}
    assert checks == {"parity": True, "max-arena-bytes": True, "max-subgraphs": True}


def test_the_keyword_from_a_toml_table_built_the_model(run):
    """ConfigBranch(use_residual=False) has no residual add: its graph is the projection and the relu only."""
    ops = {o["op"] for o in run["json"]["models"][3]["delegation"]["operators"]}
    assert "aten_add_tensor" not in ops and "aten_relu_default" in ops, ops


def test_junit_has_one_suite_per_model_and_per_method_of_the_program(run):
    suites = {s.get("name"): s for s in run["junit"].findall("testsuite")}
    assert list(suites) == ["export doctor: tracker", "export doctor: frames", "export doctor: buckets · method short",
                            "export doctor: buckets · method long", "export doctor: plain"]
    assert suites["export doctor: frames"].get("failures") == "1"
    assert all(s.get("failures") == "0" for name, s in suites.items() if "frames" not in name)
    assert run["junit"].get("failures") == "1"


def test_github_annotates_the_failing_model_and_summarises_each(run):
    from test_doctor_github import parse_commands

    commands = parse_commands(run["out"])
    errors = [c for c in commands if c["kind"] == "error"]
    assert [c["title"] for c in errors] == ["export doctor: helpers.models:ShapeBranch: probe frames = 1 (min)"]
    assert not [c for c in commands if c["kind"] == "notice"]  # the run did not pass
    summary = run["summary"]
    assert summary.startswith(f"## ❌ export doctor · `{run['tmp'] / 'pyproject.toml'}` · FAIL (exit 1) — tracker PASS, "
                              "frames FAIL, buckets PASS, plain PASS")
    assert [line for line in summary.splitlines() if line.startswith("### model ")] == [
        "### model `tracker`", "### model `frames`", "### model `buckets`", "### model `plain`"]
    assert "data-verdict='fail'" in run["html"] and run["html"].count("<h3>model <code>") == 4


def _config_error(tmp_path, capsys, text: str | None, *extra: str) -> tuple[int, str, str]:
    path = tmp_path / "pyproject.toml"
    if text is not None:
        path.write_text(text)
    code = main(["--config", str(path), "--quiet", *extra])
    out, err = capsys.readouterr()
    return code, out, err


MODEL = '[tool.export-doctor.models.m]\ntarget = "helpers.models:ShapeBranch"\nexample = ["2x8x4"]\n'
BAD_CONFIGS = {
    "no file": (None, (), "no such file"),
    "not TOML": ("[tool.export-doctor\n", (), "not valid TOML"),
    "no table": ('[project]\nname = "x"\n', (), "no [tool.export-doctor] table"),
    "no models": ("[tool.export-doctor]\nstrict = true\n", (), "[tool.export-doctor] has no models"),
    "unknown key": (MODEL + "tolerance = 1e-3\n", (),
                    "[tool.export-doctor.models.m]: unknown key 'tolerance'; a model's keys are the command's options:"),
    "a run-wide key in a model": (MODEL + 'json = "m.json"\n', (),
                                  "json is set for the whole run, on the command line (--json)"),
    "a model's key shared": ('[tool.export-doctor]\ndim = ["x:1:f:1:32"]\n' + MODEL, (),
                             "[tool.export-doctor]: dim belongs to one model"),
    "a flag that is not a boolean": (MODEL + 'strict = "yes"\n', (), "strict = 'yes': expected true or false"),
    "a bad option in a table": (MODEL.replace('"2x8x4"]', '"2x8x4"]\ndim = ["x:one:f:1:32"]'), (),
                                "[tool.export-doctor.models.m]: --dim 'x:one:f:1:32': AXIS must be an integer"),
    "a table without a model": ("[tool.export-doctor.models.m]\nstrict = true\n", (),
                                "[tool.export-doctor.models.m]: give the model: MODULE_OR_FILE:FACTORY"),
    "an unknown --only": (MODEL, ("--only", "m,other"), "no model 'other' in [tool.export-doctor.models]"),
    "model options on the command line too": (MODEL, ("--dim", "x:1:f:1:32"),
                                              "with --config the models and their options are in"),
    "--only without --config": (MODEL, ("--only",), None),
}


@pytest.mark.parametrize("case", sorted(BAD_CONFIGS))
def test_a_wrong_configuration_is_one_line_and_exit_2_before_anything_runs(tmp_path, capsys, case):
    text, extra, expected = BAD_CONFIGS[case]
    if case == "--only without --config":
        code = main(["helpers.models:ShapeBranch", "--example", "2x8x4", "--only", "m", "--quiet"])
        out, err = capsys.readouterr()
        expected = "--only picks models of --config: give --config too"
    else:
        code, out, err = _config_error(tmp_path, capsys, text, *extra)
    assert code == 2, out + err
    (line,) = err.splitlines()
    assert line.startswith("export doctor: error: ") and expected in line, line
    assert out == ""  # nothing was examined


def test_only_picks_models_in_its_order(tmp_path, capsys):
    (tmp_path / "pyproject.toml").write_text(CONFIG)
    code = main(["--config", str(tmp_path / "pyproject.toml"), "--only", "plain,tracker", "--json",
                 str(tmp_path / "d.json"), "--quiet"])
    capsys.readouterr()
    assert code == 0
    assert [m["name"] for m in json.loads((tmp_path / "d.json").read_text())["models"]] == ["plain", "tracker"]


def test_the_doctors_failure_on_one_model_is_exit_3_and_the_others_keep_their_verdicts(tmp_path, capsys,
                                                                                         monkeypatch):
    from helpers.doctor import cli

    def boom(*_args, **_kwargs):
        raise RuntimeError("boom: a bug inside the library")

    monkeypatch.setattr(cli, "examine_methods", boom)  # only the bucket program has several methods
    (tmp_path / "pyproject.toml").write_text(CONFIG)
    code = main(["--config", str(tmp_path / "pyproject.toml"), "--only", "buckets,plain", "--json",
                 str(tmp_path / "d.json"), "--junit", str(tmp_path / "d.xml"), "--quiet"])
    out, err = capsys.readouterr()
    assert code == 3
    (line,) = err.splitlines()
    assert line.startswith(f"export doctor: internal error of export doctor itself, not a finding about buckets "
                           f"({SPECS}:buckets): RuntimeError: boom")
    data = json.loads((tmp_path / "d.json").read_text())
    assert [(m["name"], m["verdict"]) for m in data["models"]] == [("buckets", "error"), ("plain", "pass")]
    assert data["models"][0]["internal_error"]["message"] == "boom: a bug inside the library"
    suites = ET.parse(tmp_path / "d.xml").getroot().findall("testsuite")
    assert [(s.get("name"), s.get("errors")) for s in suites] == [("export doctor: buckets", "1"),
                                                                  ("export doctor: plain", "0")]
    assert "→ ERROR (exit 3)" in out.rstrip().splitlines()[-1]


def test_value_range_takes_a_list_in_a_table(tmp_path):
    from helpers.doctor.cli import _option_flags, _parser
    from helpers.doctor.config import read_config

    (tmp_path / "pyproject.toml").write_text(
        '[tool.export-doctor.models.step]\nspec = "specs:step"\nvalue-range = ["input_ids=0:255", "cache_position=0:31"]\n')
    (entry,) = read_config(tmp_path / "pyproject.toml", _option_flags(_parser()))
    assert entry.argv == ("--spec", "specs:step", "--value-range", "input_ids=0:255", "--value-range",
                          "cache_position=0:31")
    (tmp_path / "pyproject.toml").write_text(
        '[tool.export-doctor.models.step]\nspec = "specs:step"\npositions = ["cache_position=0:31"]\n')
    (entry,) = read_config(tmp_path / "pyproject.toml", _option_flags(_parser()))
    assert entry.argv == ("--spec", "specs:step", "--positions", "cache_position=0:31")
