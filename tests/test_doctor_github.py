"""``--github`` (issue 20 §5): what a pull request shows, read back from what the command wrote.

The annotations are workflow commands on stdout (``::error file=…,line=…,title=…::message``), parsed here the
way the runner reads them (properties and message unescaped); the job summary is the Markdown appended to
``$GITHUB_STEP_SUMMARY``. Each case runs the real doctor through ``main()`` on models the other doctor tests lower
too (their programs are cached): a divergence inside the contract, an export failure in a file of the repository
(annotated on its line) and outside it, gates that pass and fail, a program of two methods, an internal error.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from test_doctor import USER_MODEL  # its Gate: `if x.mean() > 0:` on line 13

from helpers.doctor import main
from helpers.doctor.github import PER_KIND, escape_data, escape_property, workflow_commands

SPECS = Path(__file__).resolve().parent / "doctor_specs.py"
SHAPE_BRANCH = ["helpers.models:ShapeBranch", "--example", "2x8x4", "--dim", "x:1:frames:1:32"]
def _unescape(text: str) -> str:
    return text.replace("%0D", "\r").replace("%0A", "\n").replace("%3A", ":").replace("%2C", ",").replace("%25", "%")


def parse_commands(out: str) -> list[dict[str, str]]:
    """Every workflow command in ``out`` as the runner reads it: ``{kind, message, <property>: value}``."""
    found = []
    for line in out.splitlines():
        m = re.fullmatch(r"::(error|warning|notice)( [^:]*)?::(.*)", line)
        if m:
            props = dict(p.split("=", 1) for p in (m.group(2) or "").strip().split(",") if p)
            found.append({"kind": m.group(1), "message": _unescape(m.group(3)),
                          **{k: _unescape(v) for k, v in props.items()}})
    return found


def _run(argv: list[str], tmp_path: Path, capsys, monkeypatch, workspace: Path | None = None):
    summary = tmp_path / "summary.md"
    summary.write_text("earlier step's summary\n")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    monkeypatch.setenv("GITHUB_WORKSPACE", str(workspace or tmp_path))
    code = main([*argv, "--github", "--quiet"])
    out, err = capsys.readouterr()
    return code, parse_commands(out), summary.read_text(), out, err


def test_escaping_follows_the_workflow_command_rules():
    assert escape_data("50% done\r\nnext: a, b") == "50%25 done%0D%0Anext: a, b"
    assert escape_property("model.py:build, x") == "model.py%3Abuild%2C x"
    assert _unescape(escape_property("a%:b,\n")) == "a%:b,\n"


def test_a_divergence_is_one_error_per_probe_and_a_table_in_the_summary(tmp_path, capsys, monkeypatch):
    code, commands, summary, out, _ = _run(SHAPE_BRANCH, tmp_path, capsys, monkeypatch)
    assert code == 1
    errors = [c for c in commands if c["kind"] == "error"]
    assert errors and all(c["title"].startswith("export doctor: helpers.models:ShapeBranch: probe ") for c in errors)
    probes = [c["title"].removeprefix("export doctor: helpers.models:ShapeBranch: probe ") for c in errors]
    for probe in probes[:PER_KIND - 1]:
        assert f"- {probe} " in out  # every annotated probe is one the report lists as failing
    assert errors[0] == {"kind": "error", "title": "export doctor: helpers.models:ShapeBranch: probe frames = 1 (min)",
                         "message": "frames = 1 (min) (2, 1, 4): diverge inside the input contract — max |Δ| = nan; "
                                    "output 0: NaN on one side only (4 NaN from the .pte, 0 in eager). First leaves "
                                    "eager at the exported program: the export recorded another computation than eager "
                                    "for this input (a Python decision on a size, a flag or a value taken once): fix "
                                    "the model."}
    assert "file" not in errors[0]  # a divergence has no line to point at
    assert not [c for c in commands if c["kind"] == "notice"]
    assert summary.startswith("earlier step's summary\n")  # appended, not overwritten
    assert "### ❌ export doctor · `helpers.models:ShapeBranch` · FAIL (exit 1)" in summary
    assert re.search(r"\| parity inside the input contract \| \d+ of \d+ probes match eager \| all \| ❌ \|", summary)
    assert "| frames = 1 (min) | (2, 1, 4) | diverge | max \\|Δ\\| = nan; output 0: NaN on one side only" in summary
    assert "<summary>next steps</summary>" in summary and "torch.where" in summary


def test_an_export_failure_is_annotated_on_its_line_inside_the_repository(tmp_path, capsys, monkeypatch):
    project = tmp_path / "project"
    (project / "models").mkdir(parents=True)
    (project / "models" / "gate.py").write_text(USER_MODEL)
    argv = [f"{project}/models/gate.py:Gate", "--example", "2x4"]
    code, commands, summary, _, _ = _run(argv, tmp_path, capsys, monkeypatch, workspace=project)
    assert code == 1
    (error,) = commands
    assert (error["kind"], error["file"], error["line"]) == ("error", "models/gate.py", "13")
    assert error["title"].endswith("gate.py:Gate: export failed")
    assert "the export failed: data dependent (stage: export)" in error["message"]
    assert "Offending line: forward(): if x.mean() > 0: [models/gate.py:13]" in error["message"]
    assert "torch.cond" in error["message"]  # the fix
    assert "**export failed** (data dependent)" in summary
    assert "Offending line: `forward(): if x.mean() > 0:` (models/gate.py:13)" in summary
    assert summary.count("torch.where(cond, a, b)") == 1  # the fix, once: the first of the next steps

    # The same file outside the checked-out repository: no file to point at, the line is in the message.
    code, commands, _, _, _ = _run(argv, tmp_path, capsys, monkeypatch, workspace=tmp_path / "elsewhere")
    (error,) = commands
    assert "file" not in error and "line" not in error and "[gate.py:13]" in error["message"]


def test_gates_in_the_table_and_each_failed_one_an_error(tmp_path, capsys, monkeypatch):
    argv = ["--spec", f"{SPECS}:tracker", "--allow-portable", "aten_mean_dim", "--max-subgraphs", "2",
            "--max-arena-bytes", "1"]
    code, commands, summary, _, _ = _run(argv, tmp_path, capsys, monkeypatch)
    assert code == 1
    titles = {c["title"].rsplit(": ", 1)[-1]: c for c in commands if c["kind"] == "error"}
    assert set(titles) == {"allow-portable", "max-arena-bytes"}, commands
    assert re.search(r"aten_sum_dim_int_list \(\d+ node\(s\)\): XNNPACK has no rule for this operator",
                     titles["allow-portable"]["message"])  # the partitioner's reason
    assert re.search(r"\| operators on portable kernels \| aten_sum_dim_int_list \(\d+\) \| only aten_mean_dim \| ❌ \|",
                     summary)
    assert "| delegated subgraphs | 2 | ≤ 2 | ✅ |" in summary
    assert re.search(r"\| memory plan arena \| [\d,]+ bytes \| ≤ 1 \| ❌ \|", summary)
    assert re.search(r"\| \.pte size \| [\d,]+ bytes \| — \|  \|", summary)  # measured, no gate asked for

    code, commands, summary, _, _ = _run(["--spec", f"{SPECS}:tracker"], tmp_path, capsys, monkeypatch)
    assert code == 0
    assert [c["kind"] for c in commands] == ["warning", "notice"]
    assert commands[0]["title"].endswith("tracker: outside the contract, run anyway")
    assert re.fullmatch(r"\d+ probe\(s\) outside the input contract ran on the runtime without an error \(a device "
                        r"would run them too; check inputs on the host\): steps = 17 \(max\+1, outside\).*",
                        commands[0]["message"]), commands[0]
    assert commands[1]["message"].startswith("pass (exit 0) — all ") and "match eager" in commands[1]["message"]
    assert "### ✅ export doctor" in summary and "❌" not in summary


def test_a_program_names_each_method_and_why_it_failed(tmp_path, capsys, monkeypatch):
    argv = ["--spec", f"{SPECS}:buckets_and_a_chunked_method"]
    code, commands, summary, _, _ = _run(argv, tmp_path, capsys, monkeypatch, workspace=SPECS.parent.parent)
    assert code == 1
    by_method = {re.search(r" · method (\w+)", c["title"]).group(1): c for c in commands}
    assert set(by_method) == {"short", "chunks"}
    assert by_method["chunks"]["title"].endswith("· method chunks: export failed")
    assert "export added a guard on dynamic dimension 't'" in by_method["chunks"]["message"]
    assert "file" not in by_method["chunks"]  # torch names no line of forward() for this guard
    assert by_method["short"]["title"].endswith("· method short: not lowered")
    assert by_method["short"]["message"].startswith("not lowered: method chunks of the program did not export. Fix:")
    assert summary.count("### ❌ export doctor · method `") == 2
    assert f"## ❌ export doctor · `{SPECS}:buckets_and_a_chunked_method` · FAIL (exit 1)" in summary


def test_more_errors_than_github_shows_end_with_how_many_more(tmp_path, capsys, monkeypatch):
    from helpers.doctor import examine
    from helpers.doctor.cli import prepare

    prepared = prepare(SHAPE_BRANCH + ["--quiet"])
    report = examine(prepared.model, prepared.example_args, prepared.dynamic_shapes, **prepared.examine_options())
    copies = PER_KIND + 2  # as if a program had twelve such methods: one failing probe each
    assert len(report.failing_rows) == 1
    commands = parse_commands("\n".join(workflow_commands([report] * copies, prepared.target)))
    assert len(commands) == PER_KIND and all(c["kind"] == "error" for c in commands)
    assert all(c["title"].endswith("ShapeBranch: probe frames = 1 (min)") for c in commands[:-1])
    assert commands[-1]["message"] == (f"{copies - (PER_KIND - 1)} more errors: GitHub shows {PER_KIND} per "
                                       "step; the job summary and the log list them all")


def test_an_internal_error_is_the_doctors_not_the_models(tmp_path, capsys, monkeypatch):
    from helpers.artifact import PteArtifact

    def boom(*_args, **_kwargs):
        raise RuntimeError("boom: a bug inside the library")

    monkeypatch.setattr(PteArtifact, "planned_memory_bytes", boom)
    code, commands, summary, _, _ = _run(["--spec", f"{SPECS}:tracker"], tmp_path, capsys, monkeypatch)
    assert code == 3
    (error,) = commands
    assert error["title"].endswith(": internal error")
    assert error["message"].startswith("internal error of export doctor during stage 'memory', not a finding about "
                                       "the model: RuntimeError: boom")
    assert "### ⚠️ export doctor" in summary and "This says nothing about the model" in summary


def test_without_a_summary_file_it_says_so_and_keeps_the_verdict(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    code = main(["--spec", f"{SPECS}:tracker", "--github"])
    out, err = capsys.readouterr()
    assert code == 0
    assert [c["kind"] for c in parse_commands(out)] == ["warning", "notice"]
    assert "$GITHUB_STEP_SUMMARY is not set (not a GitHub Actions step), so no job summary was written" in err


@pytest.mark.parametrize("bad", ["a folder", "unwritable"])
def test_a_summary_that_cannot_be_written_is_the_tools_failure(tmp_path, capsys, monkeypatch, bad):
    target = tmp_path / "summary-folder"
    target.mkdir()
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(target if bad == "a folder" else target / "missing" / "s.md"))
    code = main(["--spec", f"{SPECS}:tracker", "--github", "--quiet"])
    _, err = capsys.readouterr()
    assert code == 3
    assert "internal error of export doctor itself during stage 'writing the reports'" in err
