"""Small, deterministic ways to show tensors and errors in a lesson.

Notebook outputs are compared strictly in CI, and float noise differs between CPUs, so
tensors are shown rounded; error messages are shown as their first meaningful lines with
machine-specific paths removed.
"""

from __future__ import annotations

import contextlib
import html
import inspect
import io
import re
import textwrap
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

__all__ = ["fmt", "first_sentence", "show_error", "error_excerpt", "error_line", "sanitize", "show_source", "Source"]

_PATHS = [
    (re.compile(r'File "/tmp/ipykernel_\d+/\d+\.py"'), 'File "<notebook cell>"'),
    (re.compile(r"/tmp/ipykernel_\d+/\d+\.py"), "<notebook cell>"),
    (re.compile(r"\S*/site-packages/"), ""),
    (re.compile(r" at 0x[0-9a-f]+"), ""),
]


def sanitize(text: str) -> str:
    """Remove what changes between machines and runs: kernel temp paths, install paths, addresses."""
    from pathlib import Path

    repo = str(Path(__file__).resolve().parent.parent) + "/"
    text = text.replace(repo, "")
    for pattern, repl in _PATHS:
        text = pattern.sub(repl, text)
    return text


def first_sentence(text: str) -> str:
    """The text up to its first full stop (which it keeps)."""
    return text.split(". ")[0].rstrip(".") + "."


def fmt(value: Any, decimals: int = 3) -> str:
    """A tensor (or tuple of tensors) as a short, rounded, deterministic string."""
    if isinstance(value, (tuple, list)):
        return "(" + ", ".join(fmt(v, decimals) for v in value) + ")"
    if not isinstance(value, torch.Tensor):
        return repr(value)
    t = value.detach()
    if t.is_floating_point():
        t = torch.round(t.double() * 10**decimals) / 10**decimals
        t = t + 0.0  # turns -0.0 into 0.0
        items = [f"{v:.{decimals}f}" if v == v else "nan" for v in t.flatten().tolist()]
    else:
        items = [str(v) for v in t.flatten().tolist()]
    if len(items) > 12:
        items = items[:6] + ["…"] + items[-3:]
    shape = "×".join(str(s) for s in t.shape) or "scalar"
    return f"[{', '.join(items)}] ({shape})"


# Lines that are about torch's own debugging, never about the learner's model. torch's remedies
# ("consider using data-dependent friendly APIs", draft_export, torch._check) stay: they are advice.
_NOISE = ("For more information, run with", "TORCH_LOGS", "TORCHDYNAMO_EXTENDED", "For C++ stack trace",
          "For more debugging help", "For extended logs", "If you suspect the guard was triggered from C++")


def error_excerpt(exc: BaseException, max_lines: int = 12) -> str:
    """The lines of an error message a learner should read (type first, noise and paths removed).

    A noise sentence is cut from its line, and a whole sentence before it stays: torch writes
    ``Constraints violated (batch)! For more information, run with TORCH_LOGS=…`` on one line.
    """
    lines = []
    for line in str(exc).splitlines():
        for noise in _NOISE:
            if noise in line:
                line = line[:line.index(noise)]
                if not line.rstrip().endswith(("!", ".", ":")):  # not a whole sentence: nothing to keep
                    line = ""
        if not line.strip():
            continue
        lines.append(sanitize(line.rstrip()))
    if len(lines) > max_lines:
        lines = lines[:max_lines] + [f"… ({len(lines) - max_lines} more lines)"]
    return f"{type(exc).__name__}: " + "\n".join(lines)


def error_line(exc: BaseException) -> str:
    """An error in one line: its type and the first line of its message (for a report's summary)."""
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}".rstrip(": ")


def show_error(fn: Callable[..., Any], *args: Any, max_lines: int = 12, **kwargs: Any) -> BaseException | None:
    """Call ``fn`` expecting it to fail; print the readable part of the error and return the exception.

    A lesson uses this to show a real error without a traceback full of machine-specific paths.
    """
    try:
        # A failed export also logs its partial graph (with this machine's paths) to stderr:
        # the exception carries what matters.
        with contextlib.redirect_stderr(io.StringIO()):
            fn(*args, **kwargs)
    except Exception as exc:  # noqa: BLE001 - showing the error is the point
        print(error_excerpt(exc, max_lines=max_lines))
        return exc
    print("no error raised")
    return None


@dataclass(frozen=True)
class Source:
    """The source code of classes or functions, shown whole (HTML in a notebook, plain text elsewhere)."""

    title: str
    code: str

    def __repr__(self) -> str:
        return f"── {self.title} ──\n{self.code}"

    def _repr_html_(self) -> str:
        return (f"<div><b>{html.escape(self.title)}</b><pre style='font-size:90%;margin:4px 0'>"
                f"{html.escape(self.code)}</pre></div>")


def show_source(*objects: Any, title: str = "") -> Source:
    """The full source of each class or function, so the code a lesson asks about is on the page."""
    parts = [textwrap.dedent(inspect.getsource(obj)).strip() for obj in objects]
    names = ", ".join(getattr(obj, "__name__", type(obj).__name__) for obj in objects)
    return Source(title or names, "\n\n\n".join(parts))

