"""The doctor's report as text (stdout), HTML (``--report``), JSON (``--json``) and JUnit XML (``--junit``):
functions that read a :class:`~helpers.doctor.report.DoctorReport` (``to_text(report)``, ...).

JSON schema (``schema_version`` 1; fields are only ever added within a version):

- ``schema_version`` (int), ``tool`` ("export doctor"), ``target``, ``backend``, ``inputs`` (str)
- ``verdict``: "pass" | "fail" | "error"; ``exit_status``: 0 | 1 | 3; ``headline`` (str)
- ``options``: ``strict``, ``min_delegated`` (percent or null), ``max_arena_bytes`` (or null), ``pte`` (path or
  null), ``bundle`` (path or null), ``draft_export`` (bool), ``atol``, ``rtol`` (a number, or a list with one per
  output), ``allow_portable`` (list of
  operators or null), ``max_subgraphs`` (or null), ``max_pte_bytes`` (or null), ``value_ranges`` (``{input:
  [low, high]}``, the integer inputs' values the probes drew from; empty when none was given), ``positions`` (the
  names among them whose probes drew one run of consecutive values: ``--positions``)
- ``stages``: list of ``{name, status, message, seconds}``; name in export, draft_export, lower, load,
  compare, locate (only when a probe diverges), delegation, memory, profile (with --max-portable-time), bundle; status "ok" | "failed" (the model fails it) | "skipped" | "error"
  (the doctor failed there)
- ``diagnosis``: ``{kind, stage, summary, error_type, message, source_line, location, operator,
  suggested_fixes, fix}`` (kind "ok" when everything loaded) or null
- ``internal_error``: ``{stage, type, message}`` or null
- ``contract``: ``{signature, method, inputs, ties, unbounded_dims}`` or null (``inputs``: per input
  ``{name, kind, dtype, axes: [{size, dim, min, max, planned, ...}], value}``)
- ``probes``: list of ``{label, shapes, status, status_words, within_contract, kind, failure, message,
  contract_message, max_abs_diff, max_abs_diff_text}``; status match | diverge | rejected (by the runtime)
  | refused (on the host, before the runtime) | eager_error; kind is the status inside the contract,
  "silent" (outside, run anyway) or "expected" (outside, refused or failing in eager); ``failure`` says
  whether it fails the verdict; ``max_abs_diff`` is null when not computed or not finite (then see
  ``max_abs_diff_text``: "nan", "inf")
- ``counts``: ``{inside, outside, failures, silent, match, diverge, rejected, refused, eager_error, yours}``
  (``yours``: ``{inputs, inside, failures}`` of the user's own inputs, ``--inputs``; each probe's ``source`` is
  "generated" or "yours")
- ``delegation``: ``{source ("lowering" | "pte file"), backend, coverage (0..1), delegated_nodes,
  portable_nodes, delegated_subgraphs, operators: [{op, delegated, portable}], declined: {op: [reason]},
  notes}`` or null
- ``memory``: ``{arena_bytes, pte_bytes}`` or null
- ``checks``: list of ``{name, passed, message, details}``; name in parity, strict: outside the contract,
  strict: bounded Dims, min-delegated, max-arena-bytes, allow-portable, max-subgraphs, max-pte-bytes,
  max-portable-time, bundle, state across calls, state across methods
- ``draft_export``: ``{issues: [{kind, summary, where}], report, error}`` or null
- ``bundle``: ``{path, bytes, test_cases, labels, rtol, atols, verified, failed, left_out, problem, verify}``
  or null (``verify``: Python that checks the bundle with ExecuTorch's bindings)
- ``next_steps``: list of str
- ``method``: the program's method the report is about ("forward" unless ``--spec`` gave several)
- ``profile``: with ``--max-portable-time``, the example's measured run time (ExecuTorch's ETDump profile):
  ``{runs, threads, total_ms, portable_ms, delegate_ms, share (0..1), by_operator: {op: ms}}`` (medians), else null;
  ``options.max_portable_time`` is the percentage asked for
- ``located``: for up to three probes that diverge inside the contract, where each first leaves eager:
  ``{label, first_stage, meaning, stages: [{name, status, max_abs_diff, detail}]}``; stages exported program,
  edge program, portable .pte (unless the examined program is portable), then the examined .pte; ``first_stage``
  is one of those, the examined one read as "delegated .pte" (:mod:`helpers.doctor.locate`)
- ``stateful_buffers``: the buffers the program writes and keeps between calls
- ``sequence``: for a program with state, the probes that matched from the initial state, called again one after
  another with the state carried (its check is "state across calls"): ``[{label, status, max_abs_diff}]`` in call
  order, or null
- ``across_methods``: for methods of one program that share state in eager (prefill and decode of one KV cache),
  each one's matching probes called method after method on one loaded program (its check is "state across
  methods"): ``{methods: [names in call order], share_mutable_buffers, shared_by_chance, places, calls: [{label,
  status, max_abs_diff}]}``, the labels starting with the method's name; ``places``: per method, the ``[arena,
  offset]`` its memory plan gives the buffers the methods share; ``shared_by_chance``: every call matched, in a
  program built without ``share_mutable_buffers`` (the check fails: the methods met only on this host); null
  otherwise (every sharing method's report has the same)

A program of several methods (``--spec`` returning ``{"methods": ...}``) is one object ``{schema_version, tool,
target, verdict, exit_status, methods: [one report as above per method, in order]}`` (:func:`program_to_dict`);
JUnit has one ``testsuite`` per method.
"""

from __future__ import annotations

import html
import json
import math
import xml.etree.ElementTree as ET
from typing import Any

from ..display import error_line
from ..parity import STATUS_WORDS, PositionRange, format_diff
from .report import DoctorReport, ModelRun, program_verdict, runs_verdict

__all__ = ["SCHEMA_VERSION", "row_detail", "to_text", "to_html", "to_dict", "to_json", "to_junit", "runs_to_text",
           "runs_to_dict", "runs_to_json", "runs_to_junit", "runs_to_html", "program_to_text",
           "program_to_html", "program_to_dict", "program_to_json", "program_to_junit"]

SCHEMA_VERSION = 1

_ROW_COLOURS = {"match": "#d9f2d9", "diverge": "#f4b4b4", "rejected": "#fbd49b", "refused": "#f6c9e4",
                "eager_error": "#d6d6d6", "silent": "#e3d3f2", "expected": "#f3f3f3"}
_VERDICT_COLOURS = {"pass": "#2e7d32", "fail": "#c62828", "error": "#6d4c41"}
_STAGE_MARKS = {"ok": "✓", "failed": "✗", "skipped": "–", "error": "!"}


STATEFUL_NOTE = ("state: the program writes {n} buffer(s) that it keeps between calls (a KV cache, a counter); each "
                 "probe started from their initial values, on a fresh copy of the model and the program loaded again")

def _shorten(text: str, limit: int = 150) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[:limit - 1] + "…"


def _failure(report: DoctorReport, row: Any) -> bool:
    """Whether a probe fails the verdict: inside the contract and not matching, or (strict) run silently."""
    if row.within_contract:
        return row.status != "match"
    return report.strict and row.silently_accepted


def row_detail(r: Any) -> str:
    """One probe's result in a line: the difference, the runtime's or the host's refusal, eager's error."""
    if r.status == "diverge":
        diff = f"max |Δ| = {format_diff(r.max_abs_diff)}" if r.max_abs_diff is not None else ""
        text = "; ".join(t for t in (diff, r.runtime_message) if t)
    elif r.status == "rejected":
        text = f"runtime: {r.runtime_message.split('; ')[0]}"
    elif r.status == "refused":
        text = r.runtime_message.split("; ")[0]  # "refused on the host: …"
    elif r.status == "eager_error":
        text = f"eager: {r.eager_message}"
    else:
        text = "matches eager"
    if not r.within_contract and r.silently_accepted:
        text += f" — contract: {r.contract_message}"
    return _shorten(text)


def _stage_line(report: DoctorReport) -> str:
    return " · ".join(f"{s.name} {_STAGE_MARKS.get(s.status, '?')}" + (" (internal error)" if s.status == "error"
                                                                      else "") for s in report.stages)


# ----- text --------------------------------------------------------------------------------------
_GROUPS = [
    (lambda r: r.within_contract and r.status == "diverge", "✗ diverge inside the contract"),
    (lambda r: r.within_contract and r.status == "rejected", "✗ rejected by the runtime inside the contract"),
    (lambda r: r.within_contract and r.status == "refused", "✗ refused on the host inside the contract"),
    (lambda r: r.within_contract and r.status == "eager_error", "✗ eager PyTorch fails inside the contract"),
    (lambda r: r.silently_accepted, None),  # title depends on --strict
    (lambda r: not r.within_contract and r.status == "rejected",
     "· outside the contract and rejected by the runtime (expected)"),
    (lambda r: not r.within_contract and r.status == "refused",
     "· outside the contract and refused on the host (expected)"),
    (lambda r: not r.within_contract and r.status == "eager_error",
     "· outside the contract, and eager PyTorch fails too (expected)"),
]


def _draft_lines(report: DoctorReport) -> list[str]:
    draft = report.draft
    if draft is None:
        return []
    if draft.error:
        return [f"   draft export: torch.export.draft_export raised {draft.error}"]
    if not draft.issues:
        return ["   draft export: no issue found by torch.export.draft_export"]
    lines = [f"   draft export: {len(draft.issues)} issue(s) found by torch.export.draft_export:"]
    for k, issue in enumerate(draft.issues, 1):
        text = f"{issue['kind']}: {issue['summary']}" if issue["summary"] else issue["kind"]
        lines.append(f"     {k}. {_shorten(text, 160)}" + (f"   [{_shorten(issue['where'], 100)}]"
                                                            if issue["where"] else ""))
    if draft.text:
        lines.append("     torch's report (trimmed):")
        lines += [f"       {line}" if line else "" for line in draft.text.splitlines()]
    return lines


def _checks_lines(report: DoctorReport) -> list[str]:
    checks = report.checks
    if len(checks) <= 1:  # parity alone: section 3 says it
        return []
    lines = []
    for k, c in enumerate(checks):
        lead = "6. checks      " if k == 0 else "              "
        lines.append(f"{lead}{'✓' if c.passed else '✗'} {c.name}: {c.message}")
        if not c.passed and c.name != "parity":
            lines += [f"                  - {_shorten(d, 200)}" for d in c.details]
    return lines


def _bundle_lines(report: DoctorReport) -> list[str]:
    b = report.bundle
    if b is None:
        return []
    if b.problem:
        return [f"7. bundle      ✗ {b.problem}"]
    where = b.path or "(in memory)"
    lines = [f"7. bundle      {where}: {len(b.labels)} test case(s) (probes inside the contract that match eager, "
             f"with eager's outputs), {b.nbytes:,} bytes; verified by the runtime here: {len(b.verified)} of "
             f"{len(b.labels)} (rtol {b.rtol:g}, atol {min(b.atols):g} to {max(b.atols):g}: the doctor's "
             "atol scaled by each case's largest expected value)"]
    if b.left_out:
        lines.append(f"              left out: {', '.join(b.left_out)} (non-finite outputs, or outputs the program "
                     "does not return one for one)")
    for label in b.failed:
        lines.append(f"              ✗ {label}: the runtime's output differs from eager's")
    lines.append("              verify it where the .pte runs (Python bindings; a device build calls "
                 "bundled_program's verify_method_outputs in C++):")
    lines += [f"                {line}" for line in b.verify_code(where).splitlines()]
    return lines


def _located_lines(report: DoctorReport) -> list[str]:
    if not report.located:
        return []
    lines = ["   where each diverging probe first leaves eager (each stage run on its input, compared with eager):"]
    for found in report.located:
        lines.append(f"     - {found.label}: {found.line()}")
        lines.append(f"       first at the {found.first or 'no stage'}: {found.meaning}")
    return lines


def to_text(report: DoctorReport) -> str:
    d = report.diagnosis
    lines = [f"export doctor · {report.target} · backend {report.backend}",
             f"verdict: {report.verdict.upper()} (exit {report.exit_code}) — {report.headline}",
             f"inputs: {report.inputs}"]
    if report.value_ranges:
        lines.append("values: " + ", ".join(
            f"{name} {'consecutive ' if isinstance(r, PositionRange) else ''}from {r[0]} to {r[1]}"
            for name, r in report.value_ranges.items()) + " (the probes' integer values)")
    if report.pte_path:
        lines.append(f"shipped: {report.pte_path} (examined as shipped: the file runs, the model is exported only for "
                     "the contract)")
    lines.append("")
    if report.internal_error is not None:
        lines.append(f"stages: {_stage_line(report)}")
        lines.append(f"internal error: {error_line(report.internal_error)}")
        lines.append("The doctor failed before reaching a verdict: this says nothing about the model, whether it "
                     "exports or not.")
    elif not d.ok:
        label = {"export": "1. export      ✗", "lower": "1. export      ✓ torch.export succeeded\n   lowering    ✗",
                 "load": "1. export      ✓ torch.export succeeded\n   loading     ✗"}.get(d.stage, "1. export      ✗")
        lines.append(f"{label} {d.summary}")
        first = d.message.strip().splitlines()[0] if d.message.strip() else ""
        if d.error_type and first:
            lines.append(f"   raised: {_shorten(f'{d.error_type}: {first}', 200)}")
        if d.source_line:
            lines.append(f"   offending line: {d.source_line}" + (f"   [{d.location}]" if d.location else ""))
        if d.operator:
            lines.append(f"   operator: {d.operator}")
        for fix in d.suggested_fixes:
            lines.append(f"   torch suggests: {fix}")
        lines += _draft_lines(report)
        lines.append("   (nothing was run in the runtime, so there is no parity, delegation or memory plan to report)"
                     if d.stage == "load" else
                     "   (nothing was lowered, so there is no parity, delegation or memory plan to report)")
    else:
        if report.pte_path:
            lines.append("1. export      ✓ torch.export succeeded (for the contract); lowering skipped: the shipped "
                         "file loaded in the runtime")
        else:
            lines.append("1. export      ✓ torch.export, lowering and loading in the runtime succeeded")
        lines += _draft_lines(report)
        lines.append(f"2. contract    {report.contract.signature()}")
        for name, axes in report.contract.ties.items():
            if len(axes) > 1:
                lines.append(f"              Dim {name} ties {', '.join(f'{i}[{a}]' for i, a in axes)} (must be equal)")
        for name in report.unbounded_dims:
            lines.append(f"              {'✗' if report.strict else '!'} Dim {name} has no max: the memory plan is "
                         f"sized for {report.contract.dims()[name].planned} (the example), a longer input is rejected")
        lines.append(f"3. parity      {report.parity.summary()}")
        if report.stateful:
            lines.append(f"              {STATEFUL_NOTE.format(n=len(report.stateful))}")
        if report.sequence is not None:
            rows, first = report.sequence.rows, report.first_call_apart
            lines.append(f"              {'✓' if first is None else '✗'} then the {len(rows)} matching probes again, one "
                         "call after another (state carried): " + (
                             "every call matches eager" if first is None else
                             f"call {first + 1} ({rows[first].label}) is the first that differs: {row_detail(rows[first])}"))
        if report.across_methods is not None:
            rows, first = report.across_methods.rows, report.first_across_apart
            ok = first is None and not report.shared_by_accident
            lines.append(f"              {'✓' if ok else '✗'} {report.across_methods.method} one after "
                         f"another ({len(rows)} calls, state carried): " + (
                             ("every call matches eager" + (", on this host only: the program does not share its "
                                                            "mutable buffers (no share_mutable_buffers)"
                                                            if report.shared_by_accident else ""))
                             if first is None else
                             f"call {first + 1} ({rows[first].label}) is the first that differs: {row_detail(rows[first])}"))
        if report.user_inputs:
            mine = report.user_rows
            words = ", ".join(f"{sum(r.status == s for r in mine)} {STATUS_WORDS[s]}" for s in STATUS_WORDS
                              if any(r.status == s for r in mine))
            lines.append(f"              your inputs (--inputs): {len(mine)}, {sum(r.within_contract for r in mine)} "
                         f"inside the contract; {words}; {sum(_failure(report, r) for r in mine)} fail the verdict")
        for test, title in _GROUPS:
            rows = [r for r in report.parity.rows if test(r)]
            if not rows:
                continue
            if title is None:
                title = ("✗ outside the contract, yet the runtime ran them (--strict: a failure)" if report.strict
                         else "! outside the contract, yet the runtime ran them (a device would too)")
            lines.append(f"   {title}:")
            for r in rows:
                lines.append(f"     - {r.label} {r.shapes}: {row_detail(r)}")
        matched = sum(r.status == "match" and r.within_contract for r in report.parity.rows)
        lines.append(f"   ✓ {matched} probe(s) inside the contract match eager")
        lines += _located_lines(report)
        dl = report.delegation
        lines.append(f"4. delegation  {dl.delegated_nodes}/{dl.delegated_nodes + dl.portable_nodes} nodes on "
                     f"{report.backend} ({dl.coverage:.0%}) in {dl.delegated_subgraphs} subgraph(s)"
                     + (f"; portable: {', '.join(dl.portable_ops())}" if dl.portable_nodes else ""))
        if report.backend == "xnnpack":
            for op, reasons in dl.reasons().items():
                lines.append(f"              declined {op}: {'; '.join(reasons) or 'no reason given'}")
        for note in dl.notes:
            lines.append(f"              {note}")
        if report.profile is not None:
            lines.append(f"              measured: {report.profile.summary()}")
        lines.append(f"5. memory      arena {report.arena_bytes:,} bytes (planned for each Dim's max) · "
                     f".pte {report.pte_bytes:,} bytes")
        lines += _checks_lines(report)
        lines += _bundle_lines(report)
    steps = report.next_steps()
    if steps:
        lines.append("")
        lines.append("next steps:")
        lines += [f"  - {s}" for s in steps]
    return "\n".join(lines)


# ----- HTML --------------------------------------------------------------------------------------
def _probes_html(report: DoctorReport) -> str:
    e = html.escape
    legend = {"match": "match", "diverge": "diverges inside the contract", "rejected": "rejected inside the contract",
              "refused": "refused on the host inside the contract", "eager_error": "eager fails",
              "silent": "outside the contract, run anyway", "expected": "outside the contract, refused (expected)"}
    rows = []
    for r in report.parity.rows:
        kind = r.kind
        note = r.message
        if not r.within_contract:
            note = (note + " — " if note else "") + f"contract: {r.contract_message}"
        diff = format_diff(r.max_abs_diff) if r.status in ("match", "diverge") else "—"
        rows.append(f"<tr class='exportlab-probe' data-status='{r.status}' data-kind='{kind}' "
                    f"data-within-contract='{'yes' if r.within_contract else 'no'}' "
                    f"style='background:{_ROW_COLOURS[kind]}' data-failure='{'yes' if _failure(report, r) else 'no'}'>"
                    f"<td>{e(r.label)}</td><td style='white-space:nowrap'>"
                    f"<code>{e(r.shapes)}</code></td><td><b>{e(STATUS_WORDS[r.status])}</b></td>"
                    f"<td>{'yes' if r.within_contract else '<b>no</b>'}</td>"
                    f"<td>{diff}</td><td style='font-size:85%'>{e(_shorten(note, 220))}</td></tr>")
    keys = "".join(f"<span style='background:{_ROW_COLOURS[k]};padding:1px 6px;margin-right:4px'>{e(v)}</span>"
                   for k, v in legend.items())
    return (f"<p style='font-size:85%'>{keys}</p><table class='exportlab-probes'><tr><th>probe</th><th>shapes</th>"
            "<th>status</th><th>in contract</th><th>max |Δ|</th><th>runtime / host / eager / contract message</th></tr>"
            + "".join(rows) + "</table>")


def _delegation_html(report: DoctorReport) -> str:
    e = html.escape
    dl = report.delegation
    body = dl._repr_html_()
    reasons = dl.reasons() if report.backend == "xnnpack" else {}
    if reasons:
        body += ("<p>declined by the partitioner (its own words):</p><ul class='exportlab-declined'>"
                 + "".join(f"<li><code>{e(op)}</code>: {e('; '.join(r) or 'no reason given')}</li>"
                           for op, r in reasons.items()) + "</ul>")
    return body


def _extras_html(report: DoctorReport) -> list[str]:
    e = html.escape
    parts = []
    checks = report.checks
    if len(checks) > 1:
        items = "".join(
            f"<li class='exportlab-check' data-check='{e(c.name)}' data-passed='{'yes' if c.passed else 'no'}'>"
            f"{'✓' if c.passed else '✗'} <b>{e(c.name)}</b>: {e(c.message)}"
            + ("<ul>" + "".join(f"<li>{e(d)}</li>" for d in c.details) + "</ul>" if c.details and not c.passed else "")
            + "</li>" for c in checks)
        parts.append(f"<h4>6 · checks</h4><ul>{items}</ul>")
    b = report.bundle
    if b is not None:
        if b.problem:
            parts.append(f"<h4>7 · bundle</h4><p>✗ {e(b.problem)}</p>")
        else:
            parts.append(f"<h4>7 · bundle</h4><p><code>{e(b.path or '(in memory)')}</code>: {len(b.labels)} test "
                         f"case(s), {b.nbytes:,} bytes; verified by the runtime: {len(b.verified)} of "
                         f"{len(b.labels)}</p><pre>{e(b.verify_code())}"
                         "</pre>")
    return parts


def _draft_html(report: DoctorReport) -> str:
    e = html.escape
    draft = report.draft
    if draft is None:
        return ""
    if draft.error:
        return f"<p>draft export raised <code>{e(draft.error)}</code></p>"
    items = "".join(f"<li><b>{e(i['kind'])}</b>: {e(i['summary'])} <small>{e(i['where'])}</small></li>"
                    for i in draft.issues)
    text = f"<details><summary>torch's report (trimmed)</summary><pre>{e(draft.text)}</pre></details>" \
        if draft.text else ""
    return f"<p>draft export: {len(draft.issues)} issue(s)</p><ul class='exportlab-draft'>{items}</ul>{text}"


def _located_html(report: DoctorReport) -> str:
    if not report.located:
        return ""
    e = html.escape
    items = "".join(f"<li><b>{e(f.label)}</b>: {e(f.line())}<br>first at the <b>{e(f.first or 'no stage')}</b>: "
                    f"{e(f.meaning)}</li>" for f in report.located)
    return f"<p>where each diverging probe first leaves eager:</p><ul class='exportlab-located'>{items}</ul>"


def to_html(report: DoctorReport, document: bool = False) -> str:
    """The report as HTML: a fragment (for a notebook) or, with ``document=True``, a standalone page.

    The verdict is in the element with class ``exportlab-verdict`` (``data-verdict`` pass/fail/error,
    ``data-exit-code``); each probe row has ``data-status`` and ``data-within-contract``.
    """
    e = html.escape
    d = report.diagnosis
    colour = _VERDICT_COLOURS[report.verdict]
    parts = [f"<div class='exportlab-doctor' data-verdict='{report.verdict}' data-exit-code='{report.exit_code}'>",
             f"<div style='font-size:110%'><span class='exportlab-verdict' data-verdict='{report.verdict}' "
             f"data-exit-code='{report.exit_code}' style='background:{colour};color:white;padding:2px 8px;"
             f"border-radius:4px;font-weight:bold'>{report.verdict.upper()} · exit {report.exit_code}</span> "
             f"<b>{e(report.headline)}</b></div>",
             f"<p><code>{e(report.target)}</code> · backend <code>{e(report.backend)}</code> · inputs "
             f"<code>{e(report.inputs)}</code>"
             + (f" · shipped <code>{e(report.pte_path)}</code>" if report.pte_path else "") + "</p>"]
    if report.internal_error is not None:
        parts.append(f"<p class='exportlab-internal-error'>stages: {e(_stage_line(report))}<br>internal error of "
                     f"export doctor: <code>{e(error_line(report.internal_error))}</code>. The doctor failed before "
                     "reaching a verdict: this says nothing about the model.</p>")
    else:
        parts += ["<h4>1 · export</h4>", d._repr_html_(), _draft_html(report)]
        if d.ok:
            parts += ["<h4>2 · input contract of the .pte</h4>", report.contract._repr_html_(),
                      f"<h4>3 · parity with eager</h4><p>{e(report.parity.summary())}</p>", _probes_html(report),
                      _located_html(report),
                      "<h4>4 · delegation</h4>", _delegation_html(report),
                      f"<h4>5 · memory</h4><p>memory-plan arena <b>{report.arena_bytes:,} bytes</b> (planned for each "
                      f"Dim's max) · .pte {report.pte_bytes:,} bytes</p>"]
            parts += _extras_html(report)
    steps = report.next_steps()
    if d is not None and not d.ok and report.internal_error is None:
        steps = steps[1:]  # a failed export's fix is already in the table above
    if steps:
        parts.append("<h4>next steps</h4><ul>" + "".join(f"<li>{e(s)}</li>" for s in steps) + "</ul>")
    parts.append("</div>")
    body = "".join(parts)
    if not document:
        return body
    return ("<!doctype html><html><head><meta charset='utf-8'>"
            f"<title>export doctor: {e(report.target)} — {report.verdict}</title>"
            "<style>body{font-family:sans-serif;max-width:70em;margin:1em auto}table{border-collapse:collapse}"
            "td,th{border:1px solid #ccc;padding:2px 6px;text-align:left}</style></head><body>"
            f"<h2>export doctor</h2>{body}</body></html>\n")


# ----- JSON --------------------------------------------------------------------------------------
def _tolerance(value: Any) -> float | list[float]:
    return float(value) if isinstance(value, (int, float)) else [float(v) for v in value]


def _number(value: float | None) -> float | None:
    return value if value is not None and math.isfinite(value) else None


def to_dict(report: DoctorReport) -> dict[str, Any]:
    d = report.diagnosis
    out: dict[str, Any] = {
        "schema_version": SCHEMA_VERSION, "tool": "export doctor", "target": report.target,
        "backend": report.backend, "inputs": report.inputs, "verdict": report.verdict,
        "exit_status": report.exit_code, "headline": report.headline,
        "options": {"strict": report.strict, "min_delegated": report.min_delegated,
                    "max_arena_bytes": report.arena_limit, "pte": report.pte_path,
                    "bundle": report.bundle.path if report.bundle else None,
                    "draft_export": report.draft is not None, "atol": _tolerance(report.atol),
                    "rtol": _tolerance(report.rtol),
                    "allow_portable": None if report.allow_portable is None else list(report.allow_portable),
                    "max_subgraphs": report.max_subgraphs, "max_pte_bytes": report.pte_limit,
                    "max_portable_time": report.max_portable_time,
                    "value_ranges": {name: list(r) for name, r in report.value_ranges.items()},
                    "positions": [name for name, r in report.value_ranges.items() if isinstance(r, PositionRange)]},
        "stages": [{"name": s.name, "status": s.status, "message": s.message, "seconds": s.seconds}
                   for s in report.stages],
        "diagnosis": None if d is None else {
            "kind": d.kind, "stage": d.stage, "summary": d.summary, "error_type": d.error_type,
            "message": d.message, "source_line": d.source_line, "location": d.location, "operator": d.operator,
            "suggested_fixes": list(d.suggested_fixes), "fix": d.fix},
        "internal_error": None if report.internal_error is None else {
            "stage": report.internal_stage, "type": type(report.internal_error).__name__,
            "message": str(report.internal_error)},
        "contract": None, "probes": [], "counts": None, "delegation": None, "memory": None,
        "checks": [{"name": c.name, "passed": c.passed, "message": c.message, "details": list(c.details)}
                   for c in report.checks],
        "draft_export": None, "bundle": None, "next_steps": report.next_steps(), "method": report.method,
        "profile": None if report.profile is None else {
            "runs": report.profile.runs, "threads": report.profile.threads, "total_ms": report.profile.total_ms,
            "portable_ms": report.profile.portable_ms, "delegate_ms": report.profile.delegate_ms,
            "share": report.profile.share, "by_operator": report.profile.by_operator},
        "located": [{"label": f.label, "first_stage": f.first, "meaning": f.meaning,
                     "stages": [{"name": s.name, "status": s.status, "max_abs_diff": _number(s.max_abs_diff),
                                 "detail": s.detail} for s in f.stages]} for f in report.located],
        "stateful_buffers": list(report.stateful),
        "sequence": None if report.sequence is None else [
            {"label": r.label, "status": r.status, "max_abs_diff": _number(r.max_abs_diff)}
            for r in report.sequence.rows],
        "across_methods": None if report.across_methods is None else {
            "methods": report.across_methods.method.split(" then "),
            "share_mutable_buffers": report.share_mutable_buffers,
            "shared_by_chance": report.shared_by_accident,
            "places": {name: [list(place) for place in places] for name, places in report.shared_places.items()},
            "calls": [{"label": r.label, "status": r.status, "max_abs_diff": _number(r.max_abs_diff)}
                      for r in report.across_methods.rows]},
    }
    if report.contract is not None:
        data = report.contract.to_dict()
        out["contract"] = {"signature": report.contract.signature(), "method": data["method"],
                           "inputs": data["inputs"], "ties": data["ties"], "unbounded_dims": report.unbounded_dims}
    if report.parity is not None:
        rows = report.parity.rows
        yours = len(rows) - report.user_inputs
        out["probes"] = [{
            "source": "yours" if i >= yours else "generated",
            "label": r.label, "shapes": r.shapes, "status": r.status, "status_words": STATUS_WORDS[r.status],
            "within_contract": r.within_contract, "kind": r.kind, "failure": _failure(report, r),
            "message": r.message, "contract_message": r.contract_message, "max_abs_diff": _number(r.max_abs_diff),
            "max_abs_diff_text": format_diff(r.max_abs_diff) if r.max_abs_diff is not None else None,
        } for i, r in enumerate(rows)]
        counts = report.parity.counts()
        out["counts"] = {"inside": sum(r.within_contract for r in rows),
                         "outside": sum(not r.within_contract for r in rows),
                         "failures": sum(_failure(report, r) for r in rows),
                         "silent": len(report.silent_rows), **counts,
                         "yours": {"inputs": report.user_inputs,
                                   "inside": sum(r.within_contract for r in report.user_rows),
                                   "failures": sum(_failure(report, r) for r in report.user_rows)}}
    if report.delegation is not None:
        dl = report.delegation
        out["delegation"] = {
            "source": "pte file" if report.pte_path else "lowering", "backend": report.backend,
            "coverage": round(dl.coverage, 6), "delegated_nodes": dl.delegated_nodes,
            "portable_nodes": dl.portable_nodes, "delegated_subgraphs": dl.delegated_subgraphs,
            "operators": [{"op": op, "delegated": n_d, "portable": n_p} for op, (n_d, n_p) in dl.by_op().items()],
            "declined": dl.reasons() if report.backend == "xnnpack" else {}, "notes": list(dl.notes)}
    if report.arena_bytes is not None:
        out["memory"] = {"arena_bytes": report.arena_bytes, "pte_bytes": report.pte_bytes}
    if report.draft is not None:
        out["draft_export"] = {"issues": report.draft.issues, "report": report.draft.text, "error": report.draft.error}
    if report.bundle is not None:
        b = report.bundle
        out["bundle"] = {"path": b.path, "bytes": b.nbytes, "test_cases": len(b.labels), "labels": b.labels,
                         "rtol": b.rtol, "atols": b.atols, "verified": b.verified, "failed": b.failed,
                         "left_out": b.left_out, "problem": b.problem,
                         "verify": b.verify_code()
                         if b.labels else None}
    return out


def to_json(report: DoctorReport) -> str:
    return json.dumps(to_dict(report), indent=2, ensure_ascii=False, allow_nan=False, default=str) + "\n"


# ----- JUnit -------------------------------------------------------------------------------------
def _case(suite: ET.Element, classname: str, name: str, seconds: float | None = None) -> ET.Element:
    case = ET.SubElement(suite, "testcase", classname=classname, name=name)
    case.set("time", f"{seconds or 0:.3f}")
    return case


def to_junit(report: DoctorReport) -> str:
    """One ``testsuite``: the model stages (export, lower, load), one testcase per probe and one per check
    beyond parity. A probe inside the contract that does not match is a ``failure`` (with the reason);
    outside the contract, a refusal passes, and a silent run is ``skipped`` with a message (a ``failure``
    under --strict). The doctor's own failure is an ``error``."""
    return program_to_junit([report])


def program_to_junit(reports: list[DoctorReport]) -> str:
    """JUnit XML with one ``testsuite`` per report (per method of a program), each as :func:`to_junit` makes it."""
    root = ET.Element("testsuites", name="export doctor")
    for report in reports:
        _junit_suite(root, report)
    return _junit_document(root)


def _junit_document(root: ET.Element) -> str:
    """The ``testsuites`` root with the sums of its suites' counts and times, as an XML document."""
    suites = root.findall("testsuite")
    for key in ("tests", "failures", "errors", "skipped"):
        root.set(key, str(sum(int(suite.get(key, "0")) for suite in suites)))
    root.set("time", f"{sum(float(suite.get('time', '0')) for suite in suites):.3f}")
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


def _junit_suite(root: ET.Element, report: DoctorReport, name: str | None = None) -> tuple[dict[str, int], float]:
    suite = ET.SubElement(root, "testsuite", name=name or f"export doctor: {report.target}")
    props = ET.SubElement(suite, "properties")
    for key, value in (("verdict", report.verdict), ("exit_status", str(report.exit_code)),
                       ("backend", report.backend), ("inputs", report.inputs),
                       ("contract", report.contract.signature() if report.contract else ""),
                       ("schema_version", str(SCHEMA_VERSION))):
        ET.SubElement(props, "property", name=key, value=value)
    for stage in report.stages:
        if stage.name not in ("export", "lower", "load", "draft_export", "bundle") and stage.status != "error":
            continue
        case = _case(suite, "export_doctor.stages", stage.name, stage.seconds)
        if stage.status == "error":
            err = ET.SubElement(case, "error", message=stage.message, type="internal error of export doctor")
            err.text = (f"{error_line(report.internal_error)}\nThis is the doctor's own failure, not a finding about "
                        "the model: rerun with --traceback." if report.internal_error is not None else stage.message)
        elif stage.status == "failed" and stage.name in ("export", "lower", "load"):
            d = report.diagnosis
            failure = ET.SubElement(case, "failure", message=_shorten(stage.message, 300),
                                    type=d.kind if d is not None else "failed")
            failure.text = (f"{d}\n\n{d.error_type}: {d.message.strip()[:4000]}" if d is not None and d.message
                            else str(d) if d is not None else stage.message)
        elif stage.status == "skipped":
            ET.SubElement(case, "skipped", message=stage.message)
        elif stage.name == "draft_export" and report.draft is not None:
            out = ET.SubElement(case, "system-out")
            out.text = report.draft.text or stage.message
    if report.parity is not None:
        for r in report.parity.rows:
            case = _case(suite, "export_doctor.probes", f"{r.label} {r.shapes}")
            side = "inside the contract" if r.within_contract else "outside the contract"
            reason = row_detail(r) if r.status != "match" else "matches eager"
            if _failure(report, r):
                why = (f"{STATUS_WORDS[r.status]} {side}" if r.within_contract else
                       f"outside the contract, yet the runtime ran it (--strict): {r.contract_message}")
                failure = ET.SubElement(case, "failure", message=_shorten(f"{why}: {reason}", 300), type=r.status)
                where = next((f"where it first leaves eager: {f.line()}\nfirst at the {f.first}: {f.meaning}"
                              for f in report.located if f.label == r.label), "")
                failure.text = f"{why}\n{r.message}\n{r.contract_message}\n{where}".strip()
            elif r.silently_accepted:
                ET.SubElement(case, "skipped", message=_shorten(
                    f"outside the contract, yet the runtime ran it ({r.status}; a device would too): "
                    f"{r.contract_message}", 300))
            else:
                out = ET.SubElement(case, "system-out")
                out.text = f"{STATUS_WORDS[r.status]} {side}: {reason}"
    for c in report.checks:
        if c.name == "parity":
            continue
        case = _case(suite, "export_doctor.checks", c.name)
        if not c.passed:
            failure = ET.SubElement(case, "failure", message=_shorten(c.message, 300), type=c.name)
            failure.text = "\n".join([c.message, *c.details])
    cases = suite.findall("testcase")
    counts = {"tests": len(cases), "failures": sum(c.find("failure") is not None for c in cases),
              "errors": sum(c.find("error") is not None for c in cases),
              "skipped": sum(c.find("skipped") is not None for c in cases)}
    seconds = sum(s.seconds or 0 for s in report.stages)
    for key, value in counts.items():
        suite.set(key, str(value))
    suite.set("time", f"{seconds:.3f}")
    return counts, seconds


# ----- a program of several methods --------------------------------------------------------------
def program_to_text(reports: list[DoctorReport], target: str) -> str:
    """Each method's report, then one line with the program's verdict."""
    verdict, code = program_verdict(reports)
    each = ", ".join(f"{r.method} {r.verdict.upper()}" for r in reports)
    return "\n\n".join(to_text(r).rstrip("\n") for r in reports) + (
        f"\n\nexport doctor · {target} · {len(reports)} methods: {each} → {verdict.upper()} (exit {code})\n")


def program_to_dict(reports: list[DoctorReport], target: str) -> dict[str, Any]:
    verdict, code = program_verdict(reports)
    return {"schema_version": SCHEMA_VERSION, "tool": "export doctor", "target": target, "verdict": verdict,
            "exit_status": code, "methods": [to_dict(r) for r in reports]}


def program_to_json(reports: list[DoctorReport], target: str) -> str:
    return json.dumps(program_to_dict(reports, target), indent=2, ensure_ascii=False, allow_nan=False,
                      default=str) + "\n"


def program_to_html(reports: list[DoctorReport], target: str) -> str:
    """A standalone page: the program's verdict, then each method's report."""
    e = html.escape
    verdict, code = program_verdict(reports)
    colour = _VERDICT_COLOURS[verdict]
    head = (f"<p><span class='exportlab-verdict exportlab-program' data-verdict='{verdict}' data-exit-code='{code}' "
            f"style='background:{colour};color:white;padding:2px 8px;border-radius:4px;font-weight:bold'>"
            f"{verdict.upper()} · exit {code}</span> <code>{e(target)}</code> · {len(reports)} methods</p>")
    body = head + "".join(f"<h3>method <code>{e(r.method)}</code></h3>{to_html(r)}" for r in reports)
    return ("<!doctype html><html><head><meta charset='utf-8'>"
            f"<title>export doctor: {e(target)} — {verdict}</title>"
            "<style>body{font-family:sans-serif;max-width:70em;margin:1em auto}table{border-collapse:collapse}"
            "td,th{border:1px solid #ccc;padding:2px 6px;text-align:left}</style></head><body>"
            f"<h2>export doctor</h2>{body}</body></html>\n")


# ----- several models (--config) -----------------------------------------------------------------
def _run_error(run: ModelRun) -> str:
    return (f"internal error of export doctor itself, not a finding about the model: "
            f"{error_line(run.error) if run.error is not None else ''}")


def runs_to_text(runs: list[ModelRun], config: str) -> str:
    """Each model's report under its name, then one line with the run's verdict."""
    parts = []
    for run in runs:
        if run.error is not None:
            body = f"export doctor · {run.target}\nverdict: ERROR (exit 3) — {_run_error(run)}"
        else:
            body = program_to_text(run.reports, run.target) if run.program else to_text(run.reports[0])
        parts.append(f"══ model {run.name} ══\n{body.rstrip()}")
    verdict, code = runs_verdict(runs)
    each = ", ".join(f"{r.name} {r.verdict.upper()}" for r in runs)
    return "\n\n".join(parts) + (f"\n\nexport doctor · {config} · {len(runs)} model(s): {each} → {verdict.upper()} "
                                 f"(exit {code})\n")


def runs_to_dict(runs: list[ModelRun], config: str) -> dict[str, Any]:
    """``{schema_version, tool, config, verdict, exit_status, models: [{name, ...one report or one program}]}``."""
    verdict, code = runs_verdict(runs)
    models = []
    for run in runs:
        if run.error is not None:
            body: dict[str, Any] = {"target": run.target, "verdict": "error", "exit_status": run.exit_code,
                                    "internal_error": {"stage": None, "type": type(run.error).__name__,
                                                       "message": str(run.error)}}
        else:
            body = program_to_dict(run.reports, run.target) if run.program else to_dict(run.reports[0])
        models.append({"name": run.name, **body})
    return {"schema_version": SCHEMA_VERSION, "tool": "export doctor", "config": config, "verdict": verdict,
            "exit_status": code, "models": models}


def runs_to_json(runs: list[ModelRun], config: str) -> str:
    return json.dumps(runs_to_dict(runs, config), indent=2, ensure_ascii=False, allow_nan=False, default=str) + "\n"


def runs_to_junit(runs: list[ModelRun]) -> str:
    """One ``testsuite`` per model (``export doctor: NAME``; per method of a program, ``NAME · method M``)."""
    root = ET.Element("testsuites", name="export doctor")
    for run in runs:
        if run.error is not None:
            suite = ET.SubElement(root, "testsuite", name=f"export doctor: {run.name}", tests="1", failures="0",
                                  errors="1", skipped="0", time="0.000")
            err = ET.SubElement(_case(suite, "export_doctor.stages", "examine"), "error",
                                message=_shorten(_run_error(run), 300), type="internal error of export doctor")
            err.text = f"{_run_error(run)}\nRerun with --traceback."
            continue
        for report in run.reports:
            _junit_suite(root, report, f"export doctor: {run.name}" + (f" · method {report.method}" if run.program
                                                                        else ""))
    return _junit_document(root)


def runs_to_html(runs: list[ModelRun], config: str) -> str:
    """A standalone page: the run's verdict, then each model's report (each method's, for a program)."""
    e = html.escape
    verdict, code = runs_verdict(runs)
    head = (f"<p><span class='exportlab-verdict exportlab-run' data-verdict='{verdict}' data-exit-code='{code}' "
            f"style='background:{_VERDICT_COLOURS[verdict]};color:white;padding:2px 8px;border-radius:4px;"
            f"font-weight:bold'>{verdict.upper()} · exit {code}</span> <code>{e(config)}</code> · {len(runs)} "
            "model(s)</p>")
    sections = []
    for run in runs:
        if run.error is not None:
            body = f"<p class='exportlab-internal-error'>{e(_run_error(run))}</p>"
        elif run.program:
            body = "".join(f"<h4>method <code>{e(r.method)}</code></h4>{to_html(r)}" for r in run.reports)
        else:
            body = to_html(run.reports[0])
        sections.append(f"<h3>model <code>{e(run.name)}</code> · <code>{e(run.target)}</code></h3>{body}")
    return ("<!doctype html><html><head><meta charset='utf-8'>"
            f"<title>export doctor: {e(config)} — {verdict}</title>"
            "<style>body{font-family:sans-serif;max-width:70em;margin:1em auto}table{border-collapse:collapse}"
            "td,th{border:1px solid #ccc;padding:2px 6px;text-align:left}</style></head><body>"
            f"<h2>export doctor</h2>{head}{''.join(sections)}</body></html>\n")
