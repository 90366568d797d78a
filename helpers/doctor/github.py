"""The doctor's findings where a pull request shows them (``--github``): GitHub Actions annotations and a job summary.

- :func:`workflow_commands`: workflow commands printed on stdout, which the runner turns into annotations on the pull
  request and the run. One ``::error`` per finding that fails the verdict — the export, lowering or loading
  failure (with ``file=``/``line=`` on the offending line when it is inside the repository), each failed check
  (``--min-delegated``, ``--allow-portable``, …), each probe inside the input contract that does not match eager,
  each named with the model, the method and the probe; a ``::warning`` for probes outside the contract that the
  runtime ran anyway (when ``--strict`` does not make them errors); one ``::notice`` for a pass. An internal error
  of the doctor is an ``::error`` that says it is the tool's, not the model's.
- :func:`step_summary`: Markdown for ``$GITHUB_STEP_SUMMARY`` (shown on the job's page): the verdict, every gate
  with its value and limit, the failing probes, and the next steps (the partitioner's reasons among them).

GitHub shows at most 10 annotations of each kind per step (actions/toolkit, docs/problem-matchers.md): past that,
the last one shown says how many more there are, and the summary and the log have them all.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

from ..display import error_line
from ..parity import STATUS_WORDS
from .render import row_detail
from .report import DoctorReport, ModelRun, program_verdict, runs_verdict

__all__ = ["workflow_commands", "step_summary", "runs_workflow_commands", "runs_step_summary", "escape_data", "escape_property", "PER_KIND"]

PER_KIND = 10  # annotations of one kind (error, warning, notice) GitHub shows per step
_MARK = {"pass": "✅", "fail": "❌", "error": "⚠️"}


def escape_data(text: str) -> str:
    """A workflow command's message: ``%``, CR and LF escaped."""
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(text: str) -> str:
    """A workflow command's property value (``title=``, ``file=``): also ``:`` and ``,``."""
    return escape_data(text).replace(":", "%3A").replace(",", "%2C")


def _command(kind: str, title: str, message: str, file: str | None = None, line: int | None = None) -> str:
    props = ([f"file={escape_property(file)}"] if file else []) + ([f"line={line}"] if file and line else [])
    props.append(f"title={escape_property(title)}")
    return f"::{kind} {','.join(props)}::{escape_data(message)}"


def _repository_path(path: str | None) -> str | None:
    """``path`` relative to the repository the job checked out (``$GITHUB_WORKSPACE``, else the current folder),
    or None when it lies outside it (an annotation can only point at the repository's files)."""
    if not path:
        return None
    root = Path(os.environ.get("GITHUB_WORKSPACE") or Path.cwd()).resolve()
    try:
        return Path(path).resolve().relative_to(root).as_posix()
    except ValueError:
        return None


def _where(d: object) -> str:
    """Where the offending line is: its path in the repository when it is there, else the diagnosis's location."""
    path = _repository_path(getattr(d, "path", None))
    return f"{path}:{getattr(d, 'line', None)}" if path else str(getattr(d, "location", ""))


def _title(report: DoctorReport, what: str = "") -> str:
    """``export doctor: <target>: <what>`` (a method's report's target names the method: ``… · method prefill``)."""
    return f"export doctor: {report.target}" + (f": {what}" if what else "")


def _findings(report: DoctorReport) -> Iterator[tuple[str, str, str, str | None, int | None]]:
    """(kind, title, message, file, line) of one report, errors first."""
    if report.internal_error is not None:
        yield ("error", _title(report, "internal error"),
               f"{report.headline}. Rerun with --traceback; the model was not judged.", None, None)
        return
    d = report.diagnosis
    if not d.ok:
        where = f" Offending line: {d.source_line} [{_where(d)}]." if d.source_line else ""
        what = "not lowered" if d.summary.startswith("not lowered:") else f"{d.stage} failed"
        said = report.headline if report.headline == d.summary else f"{report.headline}. {d.summary}"
        yield ("error", _title(report, what), f"{said.rstrip('.')}.{where} Fix: {d.fix}", _repository_path(d.path),
               d.line)
        return
    for check in report.checks:
        if check.name != "parity" and not check.passed:
            details = f" — {'; '.join(check.details)}" if check.details else ""
            yield "error", _title(report, check.name), check.message + details, None, None
    located = {f.label: f for f in report.located}
    for r in report.failing_rows:
        where = f" First leaves eager at the {located[r.label].first}: {located[r.label].meaning}." \
            if r.label in located else ""
        yield ("error", _title(report, f"probe {r.label}"),
               f"{r.label} {r.shapes}: {STATUS_WORDS[r.status]} inside the input contract — {row_detail(r)}.{where}",
               None, None)
    if report.parity is not None and not report.inside_rows:
        yield ("error", _title(report, "parity unproven"),
               "no probe fell inside the input contract, so parity with eager is unproven", None, None)
    silent = report.silent_rows
    if silent and not report.strict:
        yield ("warning", _title(report, "outside the contract, run anyway"),
               f"{len(silent)} probe(s) outside the input contract ran on the runtime without an error (a device "
               f"would run them too; check inputs on the host): {', '.join(r.label for r in silent)}", None, None)


def _capped(found: dict[str, list[tuple[str, str, str | None, int | None]]], target: str) -> list[str]:
    lines: list[str] = []
    for kind, items in found.items():
        shown = items if len(items) <= PER_KIND else items[:PER_KIND - 1]
        lines += [_command(kind, *item) for item in shown]
        if len(items) > PER_KIND:
            lines.append(_command(kind, f"export doctor: {target}",
                                  f"{len(items) - len(shown)} more {kind}s: GitHub shows {PER_KIND} per step; the job "
                                  "summary and the log list them all"))
    return lines


def _found(reports: list[DoctorReport]) -> dict[str, list[tuple[str, str, str | None, int | None]]]:
    found: dict[str, list[tuple[str, str, str | None, int | None]]] = {"error": [], "warning": []}
    for report in reports:
        for kind, title, message, file, line in _findings(report):
            found[kind].append((title, message, file, line))
    return found


def workflow_commands(reports: list[DoctorReport], target: str) -> list[str]:
    """The workflow commands for one report, or one per method of the program ``target``: errors and warnings as
    found (at most :data:`PER_KIND` of each, the last one shown counting the rest), one notice when all passed."""
    lines = _capped(_found(reports), target)
    verdict, code = program_verdict(reports)
    if verdict == "pass":
        headline = reports[0].headline if len(reports) == 1 else f"{len(reports)} methods pass"
        lines.append(_command("notice", f"export doctor: {target}", f"pass (exit {code}) — {headline}"))
    return lines


def runs_workflow_commands(runs: list[ModelRun], config: str) -> list[str]:
    """The same for every model of a ``--config`` run (the limit is GitHub's, per step: it counts them all)."""
    found = _found([r for run in runs for r in run.reports])
    found["error"] += [(f"export doctor: {run.name}: internal error",
                        f"internal error of export doctor itself, not a finding about {run.target}: "
                        f"{error_line(run.error)}. Rerun with --traceback; the model was not judged.", None, None)
                       for run in runs if run.error is not None]
    lines = _capped(found, config)
    verdict, code = runs_verdict(runs)
    if verdict == "pass":
        lines.append(_command("notice", f"export doctor: {config}",
                              f"pass (exit {code}) — {len(runs)} model(s): {', '.join(run.name for run in runs)}"))
    return lines


# ----- the job summary ---------------------------------------------------------------------------------
def _cell(text: object) -> str:
    return " ".join(str(text).split()).replace("|", "\\|")


def _gates(report: DoctorReport) -> list[tuple[str, str, str, bool | None]]:
    """(gate, value, limit, passed: None when no limit was asked for) for the table."""
    checks = {c.name: c for c in report.checks}
    inside = report.inside_rows
    bad = report.failing_rows
    rows: list[tuple[str, str, str, bool | None]] = [
        ("parity inside the input contract", f"{len(inside) - len(bad)} of {len(inside)} probes match eager",
         "all", checks["parity"].passed)]
    if report.strict:
        rows.append(("outside the contract (--strict)", f"{len(report.silent_rows)} run silently", "0",
                     checks["strict: outside the contract"].passed))
        rows.append(("Dims with a max (--strict)", ", ".join(report.unbounded_dims) or "all bounded", "all",
                     checks["strict: bounded Dims"].passed))
    dl = report.delegation
    if dl is not None:
        share = f"{dl.coverage:.0%} ({dl.delegated_nodes} of {dl.delegated_nodes + dl.portable_nodes} nodes)"
        gate = checks.get("min-delegated")
        rows.append((f"delegated to {report.backend}", share,
                     f"≥ {report.min_delegated:g}%" if report.min_delegated is not None else "—",
                     gate.passed if gate else None))
        gate = checks.get("max-subgraphs")
        rows.append(("delegated subgraphs", str(dl.delegated_subgraphs),
                     f"≤ {report.max_subgraphs}" if report.max_subgraphs is not None else "—",
                     gate.passed if gate else None))
        portable = {op: n for op, (_d, n) in dl.by_op().items() if n}
        gate = checks.get("allow-portable")
        rows.append(("operators on portable kernels",
                     ", ".join(f"{op} ({n})" for op, n in sorted(portable.items())) or "none",
                     ("only " + (", ".join(report.allow_portable) or "none")) if report.allow_portable is not None
                     else "—", gate.passed if gate else None))
    if report.profile is not None:
        gate = checks.get("max-portable-time")
        rows.append(("portable operators' share of the run time",
                     f"{report.profile.share:.0%} ({report.profile.portable_ms:.3f} of {report.profile.total_ms:.3f} ms, "
                     f"median of {report.profile.runs})",
                     f"≤ {report.max_portable_time:g}%" if report.max_portable_time is not None else "—",
                     gate.passed if gate else None))
    if report.arena_bytes is not None:
        gate = checks.get("max-arena-bytes")
        rows.append(("memory plan arena", f"{report.arena_bytes:,} bytes",
                     f"≤ {report.arena_limit:,}" if report.arena_limit is not None else "—",
                     gate.passed if gate else None))
    if report.pte_bytes is not None:
        gate = checks.get("max-pte-bytes")
        rows.append((".pte size", f"{report.pte_bytes:,} bytes",
                     f"≤ {report.pte_limit:,}" if report.pte_limit is not None else "—", gate.passed if gate else None))
    if "bundle" in checks:
        rows.append(("bundled test cases verified", checks["bundle"].message, "all", checks["bundle"].passed))
    return rows


MAX_PROBE_ROWS = 30


def _report_markdown(report: DoctorReport, several: bool) -> list[str]:
    title = f"method `{report.method}`" if several else f"`{report.target}`"
    lines = [f"### {_MARK[report.verdict]} export doctor · {title} · {report.verdict.upper()} (exit {report.exit_code})",
             "", _cell(report.headline), ""]
    if report.internal_error is not None:
        lines += [f"The doctor itself failed{f' during {report.internal_stage}' if report.internal_stage else ''}: "
                  f"`{_cell(error_line(report.internal_error))}`. This says nothing about the model; rerun with "
                  "`--traceback`.", ""]
        return lines
    d = report.diagnosis
    if not d.ok:
        what = "not lowered" if d.summary.startswith("not lowered:") else f"{d.stage} failed"
        lines += [f"**{what}** ({d.kind.replace('_', ' ')}): {_cell(d.summary)}", ""]
        if d.source_line:
            lines += [f"Offending line: `{_cell(d.source_line)}` ({_cell(_where(d))})", ""]
        return lines  # the fix is the first of the next steps
    lines += [f"Inputs: `{_cell(report.inputs)}`", "", "| gate | value | limit | |", "|---|---|---|---|"]
    for gate, value, limit, passed in _gates(report):
        mark = "" if passed is None else "✅" if passed else "❌"
        lines.append(f"| {_cell(gate)} | {_cell(value)} | {_cell(limit)} | {mark} |")
    lines.append("")
    bad = report.failing_rows
    if bad:
        lines += [f"**Probes inside the contract that do not match eager** ({len(bad)}):", "",
                  "| probe | shapes | result | detail |", "|---|---|---|---|"]
        for r in bad[:MAX_PROBE_ROWS]:
            lines.append(f"| {_cell(r.label)} | {_cell(r.shapes)} | {STATUS_WORDS[r.status]} | {_cell(row_detail(r))} |")
        if len(bad) > MAX_PROBE_ROWS:
            lines.append(f"| … {len(bad) - MAX_PROBE_ROWS} more (the log lists them all) | | | |")
        lines.append("")
    if report.located:
        lines += ["**Where each first leaves eager** (the probe's input run through every stage):", ""]
        lines += [f"- {_cell(f.label)}: {_cell(f.line())} — first at the **{f.first or 'no stage'}**: "
                  f"{_cell(f.meaning)}" for f in report.located]
        lines.append("")
    silent = report.silent_rows
    if silent:
        lines += [f"{'❌' if report.strict else '⚠️'} {len(silent)} probe(s) outside the contract ran on the runtime "
                  f"anyway: {_cell(', '.join(r.label for r in silent))}", ""]
    return lines


def step_summary(reports: list[DoctorReport], target: str) -> str:
    """Markdown for ``$GITHUB_STEP_SUMMARY``: one section per report (per method of a program), then next steps."""
    several = len(reports) > 1
    lines: list[str] = []
    if several:
        verdict, code = program_verdict(reports)
        lines += [f"## {_MARK[verdict]} export doctor · `{target}` · {verdict.upper()} (exit {code})", ""]
    for report in reports:
        lines += _report_markdown(report, several)
        steps = report.next_steps()
        if steps and report.verdict != "pass":
            lines += ["<details><summary>next steps</summary>", ""] + [f"- {_cell(s)}" for s in steps]
            lines += ["", "</details>", ""]
    return "\n".join(lines).rstrip("\n") + "\n"


def runs_step_summary(runs: list[ModelRun], config: str) -> str:
    """Markdown for a ``--config`` run: the run's verdict, then each model's section."""
    verdict, code = runs_verdict(runs)
    each = ", ".join(f"{run.name} {run.verdict.upper()}" for run in runs)
    lines = [f"## {_MARK[verdict]} export doctor · `{config}` · {verdict.upper()} (exit {code}) — {each}", ""]
    for run in runs:
        if run.error is not None:
            lines += [f"### ⚠️ model `{run.name}` · ERROR (exit 3)", "",
                      f"The doctor itself failed on `{_cell(run.target)}`: `{_cell(error_line(run.error))}`. This says "
                      "nothing about the model; rerun with `--traceback`.", ""]
            continue
        lines += [f"### model `{run.name}`", "", step_summary(run.reports, run.target)]
    return "\n".join(lines).rstrip("\n") + "\n"
