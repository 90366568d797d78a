"""``--draft-export``: every issue ``torch.export.draft_export`` finds, beside the first error export raises.

``draft_export`` keeps tracing past a problem (it specializes, inserts an assert, and goes on), and
reports each one through torch's structured trace log. The doctor pauses logging while it examines a
model, so :func:`helpers._quiet.draft_export_trace` switches that log back on while draft_export runs
(or the report would be empty) and sends the log file it writes to a temporary folder.
"""

from __future__ import annotations

import re
from typing import Any

import torch

from .report import DraftFindings

__all__ = ["run_draft_export", "trim_report"]

_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_FILE = re.compile(r"^\s*File (.+?), lineno (\d+), in (\w+)\s*$")
MAX_LINES = 60
_TRACE_DIR = "TORCH_DTRACE"  # torch._logging._internal.DTRACE_ENV_VAR: where draft_export writes its trace log


def _is_framework(path: str) -> bool:
    """torch's own frames (and the doctor's): never where the model's problem is. A library such as
    transformers is the model's code here, so its frames stay."""
    return "/torch/" in path or "/helpers/doctor/" in path or path.endswith(("helpers/lowering.py",
                                                                            "helpers/diagnose.py"))


def trim_report(text: str) -> str:
    """torch's draft-export report without colours, banners, framework stack traces, locals and torch frames."""
    out: list[str] = []
    lines = _ANSI.sub("", text).splitlines()
    skip_block = False  # inside "framework stacktrace", "Locals:" or "Symbols:", until a blank line
    i = 0
    while i < len(lines):
        line = lines[i].rstrip()
        stripped = line.strip()
        i += 1
        if skip_block:
            if not stripped:
                skip_block = False
            continue
        if stripped and set(stripped) <= {"#"}:
            continue
        if stripped.startswith(("And the following framework stacktrace", "Locals:", "Symbols:")):
            skip_block = True
            continue
        if stripped.startswith("Please refer to"):
            continue
        m = _FILE.match(line)
        if m and _is_framework(m.group(1)):
            if i < len(lines) and lines[i].strip() and not _FILE.match(lines[i]):
                i += 1  # the frame's source line
            continue
        out.append(line.replace("::", ":") if line.endswith("::") else line)
    text = re.sub(r"\n{3,}", "\n\n", "\n".join(out).strip("\n"))
    kept = text.splitlines()
    if len(kept) > MAX_LINES:
        kept = kept[:MAX_LINES] + [f"… ({len(kept) - MAX_LINES} more lines)"]
    return "\n".join(kept)


def _where(body: str) -> str:
    """The innermost non-torch frame of one issue's user stack trace: ``file:line in fn(): code``."""
    block = body.split("And the following framework stacktrace")[0]
    lines = block.splitlines()
    found = ""
    for k, line in enumerate(lines):
        m = _FILE.match(line)
        if m and not _is_framework(m.group(1)):
            code = lines[k + 1].strip() if k + 1 < len(lines) and not _FILE.match(lines[k + 1]) else ""
            found = f"{m.group(1).rsplit('/', 1)[-1]}:{m.group(2)} in {m.group(3)}(): {code.rstrip(':')}".rstrip(": ")
    if not found:  # torch sometimes prints the user's source line without its frame
        m = re.search(r"following (?:user )?stacktrace:\s*\n\s*(?!File )(\S.*)", block)
        found = m.group(1).strip().rstrip(":") if m else ""
    return found


def _issues(text: str) -> list[dict[str, str]]:
    clean = _ANSI.sub("", text)
    parts = re.split(r"^(\d+)\. ", clean, flags=re.M)
    issues = []
    for k in range(1, len(parts) - 1, 2):
        body = parts[k + 1]
        head, _, rest = body.partition("\n")
        lines = [line.strip() for line in rest.splitlines() if line.strip()]
        summary = next((line for line in lines if line.startswith("Specifically")), None) or \
            next((line for line in lines if line.startswith("When exporting")), None) or (lines[0] if lines else "")
        summary = re.sub(r", where \{.*$", "", summary).rstrip(".")
        issues.append({"kind": head.strip().rstrip("."), "summary": summary, "where": _where(rest)})
    return issues


def run_draft_export(model: torch.nn.Module, example_args: tuple[Any, ...], dynamic_shapes: Any) -> DraftFindings:
    """Run ``torch.export.draft_export`` and collect every issue (``error`` if draft export itself raised)."""
    from .._quiet import captured_output, draft_export_trace

    try:
        with draft_export_trace(), captured_output(), torch.random.fork_rng(devices=[]):
            ep = torch.export.draft_export(model, example_args, dynamic_shapes=dynamic_shapes)
    except Exception as exc:  # noqa: BLE001 - draft_export raising is a finding about the model, shown as such
        first = str(exc).strip().splitlines()
        return DraftFindings([], "", f"{type(exc).__name__}: {first[0] if first else ''}")
    report = getattr(ep, "_report", None)
    text = str(report) if report is not None else ""
    failures = list(getattr(report, "failures", []) or [])
    issues = _issues(text)
    if len(issues) != len(failures):  # the text's layout changed: fall back on the failure types
        issues = [{"kind": str(getattr(f, "failure_type", "issue")).split(".")[-1].replace("_", " ").lower(),
                   "summary": "", "where": ""} for f in failures]
    return DraftFindings(issues, trim_report(text) if failures else "")
