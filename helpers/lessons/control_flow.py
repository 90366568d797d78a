"""Lessons 01–02, control flow under export: silent specialization and loud failures.

What lives here (and only here):

- :func:`source_and_graph` shows a model's ``forward()`` next to the graph export recorded;
- the few models only these lessons need (:class:`CountedMean`, :class:`MedianCenter`,
  :class:`BatchGate`, :class:`SortValues`, :class:`Triage`), each a trap the lesson springs;
- :func:`show_export_error` / :func:`quiet_lower`: the real error or the real program, with
  nothing machine-specific printed (see the module-level note below);
- (lesson 01's widget, the divergence explorer, lives in its lesson module: ``course.lesson(1)``.)

Note on noise: a failed ``torch.export`` prints its partial graph (with absolute file paths) to
``sys.stderr``, and ``torch.export._trace`` logs an ERROR line with a timestamp for some
failures; loading a program with a Python-scalar input makes the runtime log a line the first
time. None of that is information for a learner, and it changes between machines, so this
module keeps it out of notebook outputs.
"""

from __future__ import annotations

import contextlib
import html
import inspect
import io
import re
import textwrap
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

import helpers
from helpers import models as M
from helpers.artifact import PteArtifact
from helpers.models import seeded
from helpers.parity import ParityRow, Probe

__all__ = [
    "quiet_lower", "quiet_lower_methods", "show_export_error", "tidy_graph", "forward_source", "source_and_graph", "SourceAndGraph",
    "CountedMean", "CountedMeanVectorized", "BatchLoopVectorized", "MedianCenter", "BatchGate", "BatchGateCond",
    "SortValues", "Triage", "ValidMean", "ValidMeanChecked", "ScaleOrShiftChecked", "value_probes", "shifted",
    "CompileVsExport", "compile_vs_export", "DraftExportResult", "draft_export_decisions", "verdict_line", "branch_sides",
]


@contextlib.contextmanager
def _no_stderr() -> Iterator[io.StringIO]:
    buffer = io.StringIO()
    with contextlib.redirect_stderr(buffer):
        yield buffer


def quiet_lower(model: nn.Module, example_args: Any, **kwargs: Any) -> PteArtifact:
    """:func:`helpers.lower`, without the runtime's one-off log line for non-tensor inputs.

    The progress line (stdout in a notebook) is kept; only ``sys.stderr`` is captured.
    """
    with _no_stderr():
        return helpers.lower(model, example_args, **kwargs)


def quiet_lower_methods(methods: dict[str, Any], **kwargs: Any) -> PteArtifact:
    """:func:`helpers.lower_methods`, without the runtime's one-off log line for non-tensor inputs."""
    with _no_stderr():
        return helpers.lower_methods(methods, **kwargs)


def show_export_error(fn: Callable[..., Any], *args: Any, max_lines: int = 8, **kwargs: Any) -> BaseException | None:
    """:func:`helpers.show_error`, with what torch prints to stderr on a failed export captured."""
    with _no_stderr():
        return helpers.show_error(fn, *args, max_lines=max_lines, **kwargs)


# ----- source next to graph ------------------------------------------------------------------------
_DEAD_NAMES = re.compile(r";\s+(?:\w+ = )+None")


def tidy_graph(code: str) -> str:
    """The recorded graph as code, without the ``x = None`` bookkeeping torch appends to each line."""
    return "\n".join(_DEAD_NAMES.sub("", line).rstrip() for line in code.splitlines())


def forward_source(model: nn.Module) -> str:
    return textwrap.dedent(inspect.getsource(type(model).forward)).strip()


@dataclass(frozen=True)
class SourceAndGraph:
    """``forward()`` as written, next to the graph export recorded (HTML side by side; text stacked)."""

    title: str
    source: str
    graph: str

    def __repr__(self) -> str:
        return (f"{self.title}\n── forward() as written ──\n{self.source}\n"
                f"── the graph export recorded ──\n{self.graph}")

    def _repr_html_(self) -> str:
        cell = ("<td style='vertical-align:top;text-align:left;padding:4px 10px'><b>{}</b>"
                "<pre style='font-size:85%;margin:4px 0'>{}</pre></td>")
        return (f"<div><b>{html.escape(self.title)}</b><table><tr>"
                + cell.format("forward() as written", html.escape(self.source))
                + cell.format("the graph export recorded", html.escape(self.graph))
                + "</tr></table></div>")


def source_and_graph(model: nn.Module, artifact: PteArtifact, title: str = "", method: str = "forward"
                     ) -> SourceAndGraph:
    """Put the model's ``forward()`` source next to ``artifact.graph()`` (tidied)."""
    return SourceAndGraph(title or type(model).__name__, forward_source(model), tidy_graph(artifact.graph(method)))


# ----- models only these lessons need ------------------------------------------------------------
class CountedMean(M._Lesson):
    """Averages the first ``n`` items of ``x``, with ``n`` a Python int passed alongside (a loop over
    ``range(n)``)."""

    def __init__(self, features: int = 4, seed: int = 0):
        super().__init__()
        with seeded(seed):
            self.item = nn.Linear(features, features)
        self.finish()

    def forward(self, x: torch.Tensor, n: int) -> torch.Tensor:
        total = torch.zeros(x.shape[1])
        for i in range(n):
            total = total + torch.tanh(self.item(x[i]))
        return total / n


class CountedMeanVectorized(CountedMean):
    """The fix for :class:`CountedMean`: average over the rows the tensor actually has (no Python int)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # type: ignore[override]
        return torch.tanh(self.item(x)).mean(dim=0)


class BatchLoopVectorized(M.BatchLoop):
    """The fix for ``BatchLoop``: one batched op instead of a Python loop over rows (same weights)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        weights = torch.arange(1, x.shape[0] + 1, dtype=x.dtype).unsqueeze(1)
        return torch.tanh(self.item(x)) * weights


class MedianCenter(M._Lesson):
    """Centres the input on its median (``torch.median``)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x - torch.median(x)


class SortValues(M._Lesson):
    """Sorts a vector (``torch.sort``) and returns the sorted values."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.sort(x)[0]


class BatchGate(M._Lesson):
    """Large batches take a cheaper path: a Python ``if`` on the batch size."""

    def __init__(self, features: int = 4, seed: int = 0):
        super().__init__()
        with seeded(seed):
            self.fast = nn.Linear(features, features)
            self.precise = nn.Linear(features, features)
        self.finish()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.shape[0] > 4:
            return self.fast(x)
        return self.precise(x)


class BatchGateCond(BatchGate):
    """The fix for :class:`BatchGate`: ``torch.cond`` on the size keeps both paths for every batch."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cond(x.shape[0] > 4, self.fast, self.precise, (x,))


class Triage(M._Lesson):
    """Three kinds of branch a real ``forward()`` collects: training-only noise, an input check, and a
    choice between two layers (lesson 02 diagnoses it; exercise ``02.triage`` fixes it)."""

    def __init__(self, features: int = 4, seed: int = 0):
        super().__init__()
        with seeded(seed):
            self.bright = nn.Linear(features, features)
            self.dark = nn.Linear(features, features)
        self.finish()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.training:
            x = x + 0.01 * torch.randn_like(x)  # noise as augmentation: training only
        if torch.isnan(x).any():
            raise ValueError("NaN in the input")
        if x.mean() > 0:
            return self.bright(x)
        return self.dark(x)


class ValidMean(M._Lesson):
    """Averages the first ``n`` frames, ``n`` read from a tensor the app sends (``.item()``); zeros when
    ``n`` is 0."""

    def forward(self, x: torch.Tensor, n: torch.Tensor) -> torch.Tensor:
        k = n.item()
        if k == 0:  # nothing valid: avoid a mean over no frames
            return torch.zeros(x.shape[0])
        return x[:, :k].mean(dim=1)


class ValidMeanChecked(ValidMean):
    """:class:`ValidMean` with the app's promise stated: ``1 <= n <= frames`` (``torch._check``)."""

    def forward(self, x: torch.Tensor, n: torch.Tensor) -> torch.Tensor:
        k = n.item()
        torch._check(k >= 1)  # the app never sends an empty clip
        torch._check(k <= x.shape[1])  # nor more valid frames than it sends
        if k == 0:  # now decidable: False for every k the promise allows
            return torch.zeros(x.shape[0])
        return x[:, :k].mean(dim=1)


class ScaleOrShiftChecked(M.ScaleOrShift):
    """``ScaleOrShift`` with a promise stated first: ``torch._check(x.sum() > 0)``."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        total = x.sum().item()
        torch._check(total > 0)  # "the sum is always positive": a promise about data, not a fact
        if total > 0:
            return self.a(x)
        return self.b(x)


def value_probes(example_args: Any, seed: int = 0) -> list[Probe]:
    """:func:`helpers.probe_inputs` without the shape nudges: every probe has the example's shapes.

    A table about a *branch* should vary values, not sizes (rows the runtime rejects for their shape
    say nothing about the branch).
    """
    example = example_args if isinstance(example_args, tuple) else (example_args,)
    shapes = [tuple(a.shape) if isinstance(a, torch.Tensor) else None for a in example]
    return [p for p in helpers.probe_inputs(example, seed=seed)
            if [tuple(a.shape) if isinstance(a, torch.Tensor) else None for a in p.args] == shapes]


def shifted(x: torch.Tensor, shifts: tuple[float, ...] = (-2.0, 2.0)) -> list[Probe]:
    """``x + s`` for each shift: inputs pushed to one side of a sign test."""
    return [Probe(f"shifted {s:+}", (x + s,)) for s in shifts]


# ----- export vs torch.compile, draft_export --------------------------------------------------------
@dataclass(frozen=True)
class CompileVsExport:
    """What ``torch.compile`` and ``torch.export`` each do with the same model."""

    graphs: int
    graph_breaks: int
    break_reasons: tuple[str, ...]
    compiled_matches: dict[str, bool]
    export_error: str

    def __repr__(self) -> str:
        lines = [f"torch._dynamo.explain: {self.graphs} graphs, {self.graph_breaks} graph break(s)"]
        lines += [f"  break: {r}" for r in self.break_reasons]
        lines += [f"torch.compile on {k}: {'matches eager' if v else 'DIFFERS from eager'}"
                  for k, v in self.compiled_matches.items()]
        lines.append(f"torch.export: {self.export_error}")
        return "\n".join(lines)


def compile_vs_export(model: nn.Module, inputs: dict[str, torch.Tensor]) -> CompileVsExport:
    """Count Dynamo's graphs and graph breaks, run ``torch.compile`` on each input, then try export."""
    import torch._dynamo as dynamo

    from helpers.display import error_excerpt

    example = next(iter(inputs.values()))
    dynamo.reset()
    explained = dynamo.explain(model)(example)
    reasons = tuple(sorted({re.sub(r"\s+", " ", str(b.reason)).strip()[:120] for b in explained.break_reasons}))
    dynamo.reset()
    compiled = torch.compile(model, backend="eager")  # Dynamo's capture, no code generation: quick
    matches = {}
    with torch.no_grad():
        for label, x in inputs.items():
            matches[label] = bool(torch.allclose(compiled(x), model(x)))
    dynamo.reset()
    try:
        with _no_stderr():
            torch.export.export(model, (example,))
        error = "exports"
    except Exception as exc:  # noqa: BLE001 - the error is the lesson
        error = error_excerpt(exc).splitlines()[0]
    return CompileVsExport(explained.graph_count, explained.graph_break_count, reasons, matches, error)


@dataclass(frozen=True)
class DraftExportResult:
    """``torch.export.draft_export``'s report: every issue (kind and line), and the decisions it took instead."""

    issues: tuple[tuple[str, str], ...]  # (kind, the user's line), in the report's order
    advice: str  # what the report tells you to do about them
    decisions: tuple[tuple[str, str], ...]  # (source line, the assertion export recorded)
    graph_ops: tuple[str, ...]

    def __repr__(self) -> str:
        lines = [f"draft_export: {len(self.issues)} issue(s) in one report"]
        lines += [f"  {i}. {kind} at `{line}`" for i, (kind, line) in enumerate(self.issues, 1)]
        if self.advice:
            lines.append(f"  torch's advice for each: {self.advice}")
        lines.append(f"what it did instead: decided each from the example's values, kept as runtime assertions "
                     f"({len(self.decisions)}):")
        lines += [f"  {line}   →  {expr}" for line, expr in self.decisions]
        return "\n".join(lines)


_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def draft_export_decisions(model: nn.Module, example_args: tuple[Any, ...]) -> DraftExportResult:
    """Run ``torch.export.draft_export`` quietly: its issues (from its report) and its decisions (from the graph)."""
    from helpers._quiet import draft_export_trace

    with draft_export_trace(), _no_stderr(), contextlib.redirect_stdout(io.StringIO()):
        ep = torch.export.draft_export(model, example_args)
    text = _ANSI.sub("", str(ep._report))  # type: ignore[attr-defined]  # draft_export attaches its report
    issues = []
    for block in re.split(r"\n(?=\d+\. )", text)[1:]:
        kind = block.split("\n", 1)[0].split(". ", 1)[1].rstrip(".")
        after = block.split("user stacktrace:", 1)[1] if "user stacktrace:" in block else ""
        line = next((t.strip() for t in after.splitlines() if t.strip() and not t.strip().startswith("File ")), "?")
        issues.append((kind, line))
    advice = next((t.strip() for t in text.splitlines() if t.strip().startswith("Please add")), "")
    decisions = []
    for node in ep.graph.nodes:
        if node.op == "call_function" and node.target is torch.ops.aten._assert_scalar.default:
            expr = str(node.args[1]).replace("Runtime assertion failed for expression ", "").split(" on node")[0]
            trace = node.meta.get("stack_trace") or ""
            code = [line.strip() for line in trace.splitlines() if line.strip() and not line.strip().startswith("File")]
            if expr.startswith(("Eq(", "Ne(")):  # the branch decision (the others only bound a bool to 0..1)
                side = "True" if expr.startswith("Eq(") else "False"
                decisions.append((code[-1] if code else "?", f"{expr}: the condition is assumed {side} for every input"))
    ops = tuple(str(n.target).split(".")[-2] if "." in str(n.target) else str(n.target)
                for n in ep.graph.nodes if n.op == "call_function")
    return DraftExportResult(tuple(issues), advice, tuple(decisions), ops)


def verdict_line(row: ParityRow) -> str:
    """One line for one parity row: the verdict, and the runtime's own words when it refused."""
    text = row.describe()
    if row.status == "rejected" and row.runtime_message:
        reason = row.runtime_message.split(";")[0].strip()
        text += f" — the runtime says: {reason}"
    return text


def branch_sides(probes: list[Probe], predicate: Callable[..., bool]) -> dict[str, int]:
    """How many probes take each side of the original branch (``predicate(*args)``).

    Probes whose inputs break the predicate (e.g. a wrong shape) are counted as ``"n/a"``.
    """
    counts = {"true": 0, "false": 0, "n/a": 0}
    for p in probes:
        try:
            side = bool(predicate(*p.args))
        except Exception:  # noqa: BLE001 - an input the predicate cannot even evaluate
            counts["n/a"] += 1
            continue
        counts["true" if side else "false"] += 1
    return counts
