"""Lessons 01–02, control flow under export: silent specialization and loud failures.

What lives here (and only here):

- :func:`source_and_graph` shows a model's ``forward()`` next to the graph export recorded;
- the few models only these lessons need (:class:`CountedMean`, :class:`MedianCenter`,
  :class:`BatchGate`, :class:`SortValues`, :class:`Triage`), each a trap the lesson springs;
- :func:`show_export_error` / :func:`quiet_lower`: the real error or the real program, with
  nothing machine-specific printed (see the module-level note below);
- :class:`DivergenceExplorer` and :func:`widget_demo`: lesson 01's widget. Four traps, each
  lowered once (cached); an interaction runs eager and the ``.pte`` and shows the verdict.

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
from torch.export import Dim

import helpers
from helpers import models as M
from helpers.artifact import PteArtifact
from helpers.models import seeded
from helpers.parity import ParityRow, Probe
from helpers.widgets import ParityExplorer

__all__ = [
    "quiet_lower", "quiet_lower_methods", "show_export_error", "tidy_graph", "forward_source", "source_and_graph", "SourceAndGraph",
    "CountedMean", "CountedMeanVectorized", "BatchLoopVectorized", "MedianCenter", "BatchGate", "BatchGateCond",
    "SortValues", "Triage", "ValidMean", "ValidMeanChecked", "ScaleOrShiftChecked", "value_probes", "shifted",
    "CompileVsExport", "compile_vs_export", "DraftExportResult", "draft_export_decisions", "verdict_line", "branch_sides", "DivergenceExplorer", "Trap", "build_traps",
    "widget_demo", "VALUE_KINDS",
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


# ----- lesson 01's widget: a divergence explorer ---------------------------------------------------
VALUE_KINDS = ("positive", "negative", "zeros")


def _values(shape: tuple[int, ...], kind: str) -> torch.Tensor:
    base = torch.randn(shape, generator=torch.Generator().manual_seed(7))
    if kind == "zeros":
        return torch.zeros(shape)
    magnitude = base.abs() + 0.1
    return magnitude if kind == "positive" else -magnitude


@dataclass
class Trap:
    """One silently specialized model, lowered once, and how the controls turn into its inputs."""

    name: str
    model: nn.Module
    artifact: PteArtifact
    exported_as: str
    make_args: Callable[[str, int, int], tuple[Any, ...]]
    explain: Callable[[ParityRow, int, bool, int], str]


FRAMES = Dim("frames", min=1, max=8)


def _explain_shape(row: ParityRow, size: int, flag: bool, scalar: int) -> str:
    if row.status == "diverge":
        return ("frames = 1 is inside the declared range, but export decided `x.shape[1] > 1` once, while "
                "tracing, and kept no guard: the .pte normalises a single frame (its std is NaN); eager skips it.")
    if row.status == "refused":
        return ("an empty clip is below the Dim's min (1). The runtime would not check that, and on a delegated "
                "program with a dynamic axis an empty input is undefined behaviour, so it is refused on the host.")
    if row.status == "rejected":
        return f"frames = {size} is above the Dim's max (8): the memory plan has no room for it."
    if not row.within_contract:
        return f"frames = {size} is below the Dim's min (1); the device runtime does not check min."
    return f"frames = {size}: both sides normalise over time, as the recorded graph does."


def _explain_flag(row: ParityRow, size: int, flag: bool, scalar: int) -> str:
    if row.status == "rejected":
        return f"exported at batch 2, a static size: the runtime refuses batch {size}."
    if row.status == "diverge":
        return ("the app now says use_residual=False, but the .pte was exported with True: the `+ x` is in the "
                "graph for good, and nothing checks the flag.")
    if not flag:
        return ("the flag differs, yet the numbers agree: with x = 0 the residual adds nothing. One sample "
                "proves nothing; try another sign.")
    return "use_residual=True, as at export: eager and the .pte run the same graph."


def _explain_scalar(row: ParityRow, size: int, flag: bool, scalar: int) -> str:
    if row.status == "rejected":
        return (f"steps={scalar}: export baked steps=2 into the program (the loop is unrolled twice); the runtime "
                "compares the scalar you pass with the baked value and refuses another.")
    return "steps=2, the value export baked in."


def _explain_loop(row: ParityRow, size: int, flag: bool, scalar: int) -> str:
    if row.status == "rejected":
        return f"the loop was unrolled for batch 3 and the batch made static: batch {size} is refused."
    return "batch 3: the unrolled loop has exactly one copy per row."


def build_traps() -> dict[str, Trap]:
    """The four traps of lesson 01, each lowered (or loaded from the cache) once."""
    shape = M.ShapeBranch()
    flag = M.ConfigBranch(use_residual=True)
    scalar = M.ScalarRepeat()
    loop = M.BatchLoop()
    return {
        "shape if": Trap(
            "shape if", shape,
            quiet_lower(shape, (_values((1, 4, 4), "positive"),), dynamic_shapes={"x": {1: FRAMES}}),
            "ShapeBranch, x: [1, frames∈[1,8], 4], example frames=4",
            lambda kind, size, steps: (_values((1, size, 4), kind),), _explain_shape),
        "config flag": Trap(
            "config flag", flag, quiet_lower(flag, (_values((2, 4), "positive"),)),
            "ConfigBranch(use_residual=True), x: [2, 4]",
            lambda kind, size, steps: (_values((size, 4), kind),), _explain_flag),
        "Python scalar": Trap(
            "Python scalar", scalar, quiet_lower(scalar, (_values((1, 4), "positive"), 2)),
            "ScalarRepeat, x: [1, 4], steps=2",
            lambda kind, size, steps: (_values((1, 4), kind), steps), _explain_scalar),
        "loop over batch": Trap(
            "loop over batch", loop, quiet_lower(loop, (_values((3, 4), "positive"),)),
            "BatchLoop, x: [3, 4] (loop unrolled 3 times)",
            lambda kind, size, steps: (_values((size, 4), kind),), _explain_loop),
    }


class DivergenceExplorer(ParityExplorer):
    """Pick a trap, vary the input, the app's config flag and the scalar: eager vs the cached ``.pte``.

    Controls: ``trap``, ``values`` (positive / negative / zeros), ``size`` (batch, or frames for
    the shape trap), ``flag`` (``use_residual`` as the app's config says now) and ``steps`` (the
    Python scalar). Every interaction reuses the already-lowered program of the chosen trap.
    """

    def __init__(self, traps: dict[str, Trap] | None = None):
        import ipywidgets as w

        self.traps = traps if traps is not None else build_traps()
        self._flipped = M.ConfigBranch(use_residual=False)  # same seed, same weights, other flag
        self.exported = w.HTML()
        controls = {
            "trap": w.Dropdown(options=list(self.traps), value="shape if", description="trap"),
            "values": w.ToggleButtons(options=list(VALUE_KINDS), value="positive", description="values",
                                      style={"button_width": "auto"}),
            "size": w.IntSlider(value=4, min=0, max=10, description="batch/frames"),
            "flag": w.Checkbox(value=True, description="app config: use_residual"),
            "steps": w.IntSlider(value=2, min=1, max=4, description="steps"),
        }
        first = self.traps["shape if"]
        super().__init__(first.model, first.artifact, self._make_args, controls,
                         title="Divergence explorer: four traps, each exported once", explain=self._explain,
                         model_for=self._model_for)
        self.widget.children = (self.widget.children[0], self.exported) + tuple(self.widget.children[1:])

    def _trap(self, trap: str) -> Trap:
        return self.traps[trap]

    def _make_args(self, trap: str, values: str, size: int, flag: bool, steps: int) -> tuple[Any, ...]:
        return self._trap(trap).make_args(values, size, steps)

    def _model_for(self, trap: str, values: str, size: int, flag: bool, steps: int) -> nn.Module:
        if trap == "config flag" and not flag:
            return self._flipped
        return self._trap(trap).model

    def _explain(self, row: ParityRow, trap: str, values: str, size: int, flag: bool, steps: int) -> str:
        return self._trap(trap).explain(row, size, flag, steps)

    def refresh(self) -> ParityRow:
        trap = self._trap(self.controls["trap"].value)
        self.artifact = trap.artifact
        if hasattr(self, "exported"):
            self.exported.value = f"<small>.pte exported from: <code>{html.escape(trap.exported_as)}</code></small>"
        return super().refresh()


def widget_demo() -> tuple[DivergenceExplorer, list[tuple[dict[str, Any], str]]]:
    """The explorer and interactions a learner might try, with the verdict each must show."""
    explorer = DivergenceExplorer()
    base = {"values": "positive", "size": 4, "flag": True, "steps": 2}

    def at(**values: Any) -> dict[str, Any]:
        return {**base, **values}

    interactions = [
        (at(trap="shape if", size=4), "match"),
        (at(trap="shape if", size=1), "diverge"),
        (at(trap="shape if", size=9), "rejected"),
        (at(trap="config flag", size=2), "match"),
        (at(trap="config flag", size=2, flag=False), "diverge"),
        (at(trap="config flag", size=2, flag=False, values="zeros"), "match"),
        (at(trap="config flag", size=3), "rejected"),
        (at(trap="Python scalar", steps=2, values="negative"), "match"),
        (at(trap="Python scalar", steps=3), "rejected"),
        (at(trap="loop over batch", size=3), "match"),
        (at(trap="loop over batch", size=4), "rejected"),
    ]
    return explorer, interactions
