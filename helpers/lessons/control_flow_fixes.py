"""Lessons 03–05, control flow under export: the three fixes (``torch.cond``, ``torch.where``, hoisting).

- ``torch.cond``'s rules, each as a tiny model that breaks exactly one of them, and
  :func:`check_cond_rules`, which exports every one and reports what torch says (lesson 03);
- :func:`which_branch_ran`: per input, which branch the ``.pte`` actually took at run time;
- the cost of computing both sides: :class:`HeavyWhere` / :class:`HeavyCond` (an expensive
  subnetwork on one side), timed with :func:`helpers.timing.latency_spread` (lesson 04);
- hoisting: :class:`StraightLinearB` (the other half of ``helpers.models.CondLinear``),
  :func:`app_pick` / :func:`app_run` (plain Python standing in for the app) and
  :func:`hoisted_parity` (lesson 05).
"""

from __future__ import annotations

import html
import re
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from helpers import models as M
from helpers.artifact import PteArtifact
from helpers.lessons.control_flow import _no_stderr
from helpers.models import seeded
from helpers.parity import ParityReport, Probe, check_one

__all__ = [
    "CondOperandsMismatch", "CondOutputCount", "CondOutputDtype", "CondOutputShape", "CondMutatesInput",
    "CondClosure", "CondClosureMutates", "CondBranchNotExportable", "CondPythonPredicate", "COND_RULES",
    "CondRuleResult", "CondRuleTable", "check_cond_rules", "cond_error_line", "which_branch_ran", "Instructions",
    "instructions", "node_counts",
    "HeavyWhere", "HeavyCond", "Router", "GatedProj", "ScaleOrShiftA", "ScaleOrShiftB", "StraightLinearB", "app_pick", "app_run",
    "hoisted_parity",
]


# ----- lesson 03: torch.cond's rules, one model per rule ------------------------------------------
class _TwoLayers(M._Lesson):
    """Two small layers to branch between (weights from a fixed seed)."""

    def __init__(self, features: int = 4, seed: int = 0):
        super().__init__()
        with seeded(seed):
            self.a = nn.Linear(features, features)
            self.b = nn.Linear(features, features)
        self.register_buffer("calls", torch.zeros(()))
        self.finish()


class CondOperandsMismatch(_TwoLayers):
    """Rule: both branches take exactly the operands given to cond."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        def true_fn(h):
            return self.a(h)

        def false_fn(h, scale):  # one operand too many
            return self.b(h) * scale

        return torch.cond(x.sum() > 0, true_fn, false_fn, (x,))


class CondOutputCount(_TwoLayers):
    """Rule: both branches return the same number of outputs."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        def true_fn(h):
            return self.a(h), self.b(h)  # two outputs

        def false_fn(h):
            return self.b(h)  # one output

        return torch.cond(x.sum() > 0, true_fn, false_fn, (x,))


class CondOutputDtype(_TwoLayers):
    """Rule: matching outputs have the same dtype."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        def true_fn(h):
            return self.a(h)  # float32

        def false_fn(h):
            return self.b(h) > 0  # bool

        return torch.cond(x.sum() > 0, true_fn, false_fn, (x,))


class CondOutputShape(_TwoLayers):
    """Rule: matching outputs have compatible shapes."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        def true_fn(h):
            return self.a(h)  # [batch, 4]

        def false_fn(h):
            return self.b(h).sum(dim=0)  # [4]: one dimension fewer

        return torch.cond(x.sum() > 0, true_fn, false_fn, (x,))


class CondMutatesInput(_TwoLayers):
    """Rule: a branch must not mutate its inputs."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        def true_fn(h):
            h.mul_(2)  # in place, on an operand
            return self.a(h)

        def false_fn(h):
            return self.b(h)

        return torch.cond(x.sum() > 0, true_fn, false_fn, (x.clone(),))


class CondClosure(_TwoLayers):
    """A branch that *reads* a tensor from outside ``operands`` (``offset``): torch 2.13 lifts it into an operand."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        offset = self.b(x)  # a tensor computed outside the branches

        def true_fn(h):
            return self.a(h) + offset  # closes over it

        def false_fn(h):
            return h - offset

        return torch.cond(x.sum() > 0, true_fn, false_fn, (x,))


class CondClosureMutates(_TwoLayers):
    """A branch that writes to a tensor it closes over (a buffer counting calls)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        def true_fn(h):
            self.calls.add_(1)  # mutates a closed-over tensor
            return self.a(h)

        def false_fn(h):
            return self.b(h)

        return torch.cond(x.sum() > 0, true_fn, false_fn, (x,))


class CondBranchNotExportable(_TwoLayers):
    """Rule: each branch must itself be exportable (no data-dependent Python inside)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        def true_fn(h):
            if h.max() > 1:  # data-dependent Python control flow inside a branch
                return self.a(h)
            return h

        def false_fn(h):
            return self.b(h)

        return torch.cond(x.sum() > 0, true_fn, false_fn, (x,))


class CondPythonPredicate(_TwoLayers):
    """The predicate must be a boolean tensor or a symbolic size condition: a Python ``bool`` picks one branch."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cond(x.shape[0] > 2, self.a, self.b, (x,))  # static shape: a plain bool


COND_RULES: dict[str, type[nn.Module]] = {
    "both branches take the same operands": CondOperandsMismatch,
    "same number of outputs": CondOutputCount,
    "matching dtypes": CondOutputDtype,
    "compatible shapes": CondOutputShape,
    "no mutation of inputs": CondMutatesInput,
    "reading a tensor from outside operands (lifted)": CondClosure,
    "no mutating what a branch closes over": CondClosureMutates,
    "each branch must be exportable": CondBranchNotExportable,
    "predicate: a bool tensor or a SymBool": CondPythonPredicate,
}


def cond_error_line(exc: BaseException) -> str:
    """The decisive sentence of a ``torch.cond`` export error (torch wraps it in a lot of text)."""
    text = str(exc)
    inner = re.search(r"got RuntimeError\((['\"])(.+?)\1\)", text, re.S)
    if inner:
        return re.sub(r"\s+", " ", inner.group(2).replace("\\n", " ")).strip()
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    title = ""
    if "Got graph break/error:" in text:
        idx = next(i for i, line in enumerate(lines) if "Got graph break/error:" in line)
        title = lines[idx + 1] if idx + 1 < len(lines) else ""
    explanation = next((line.split("Explanation:", 1)[1].strip() for line in lines if line.startswith("Explanation:")),
                       "")
    explanation = re.sub(r" Found in <bound method.*", "", explanation)
    if title and explanation:
        return f"{title}: {explanation}"
    return title or explanation or (lines[0] if lines else type(exc).__name__)


@dataclass(frozen=True)
class CondRuleResult:
    """What exporting one rule-breaking model did: ``outcome`` is "export error" or "exports"."""

    rule: str
    model: str
    outcome: str
    error_type: str
    message: str


@dataclass(frozen=True)
class CondRuleTable:
    """The results of :func:`check_cond_rules`, as a table."""

    results: tuple[CondRuleResult, ...]

    def __getitem__(self, rule: str) -> CondRuleResult:
        return next(r for r in self.results if r.rule == rule)

    def __repr__(self) -> str:
        lines = []
        for r in self.results:
            what = f"{r.outcome} ({r.error_type})" if r.error_type else r.outcome
            lines.append(f"• {r.rule} — {r.model}: {what}\n    {r.message}")
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        rows = "".join(
            f"<tr><td style='text-align:left'>{html.escape(r.rule)}</td><td><code>{html.escape(r.model)}</code></td>"
            f"<td style='text-align:left'><b>{html.escape(r.outcome)}</b>"
            f"{f' <small>{html.escape(r.error_type)}</small>' if r.error_type else ''}</td>"
            f"<td style='text-align:left;font-size:85%'>{html.escape(r.message)}</td></tr>" for r in self.results)
        return ("<table><tr><th>rule</th><th>model</th><th>outcome</th><th>what torch says</th></tr>"
                f"{rows}</table>")


def check_cond_rules(x: torch.Tensor | None = None, rules: Mapping[str, type[nn.Module]] | None = None
                     ) -> CondRuleTable:
    """Export each rule-breaking model in :data:`COND_RULES` and record what torch says."""
    x = torch.randn(3, 4, generator=torch.Generator().manual_seed(0)) if x is None else x
    results = []
    for rule, cls in (rules or COND_RULES).items():
        model = cls()
        with _no_stderr(), warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                ep = torch.export.export(model, (x,))
            except Exception as exc:  # noqa: BLE001 - the error is the lesson
                results.append(CondRuleResult(rule, cls.__name__, "export error", type(exc).__name__,
                                              cond_error_line(exc)))
                continue
        warned = [str(w.message) for w in caught if "cond" in str(w.message)]
        has_cond = any(n.op == "call_function" and "cond" in str(n.target) for n in ep.graph.nodes)
        if warned:
            message = f"warning: {warned[0]}"
        elif has_cond and cls is CondClosure:
            message = ("exports on this torch: export lifted the tensor the branches read (and the weights they use) "
                       "into extra operands of the cond")
        elif has_cond:
            message = "both branches in the graph"
        else:
            message = "only one branch in the graph"
        results.append(CondRuleResult(rule, cls.__name__, "exports" + (", specialised" if not has_cond else ""),
                                      "", message))
    return CondRuleTable(tuple(results))


def which_branch_ran(model: nn.Module, artifact: PteArtifact, x: torch.Tensor, true_fn: Callable[..., Any],
                     false_fn: Callable[..., Any], atol: float = 1e-5) -> str:
    """Run the ``.pte`` on ``x`` and say which branch's result it returned: "true", "false" or "neither"."""
    (out,) = artifact.run(x)
    with torch.no_grad():
        if torch.allclose(out, true_fn(x), atol=atol):
            return "true"
        if torch.allclose(out, false_fn(x), atol=atol):
            return "false"
    return "neither"


@dataclass(frozen=True)
class Instructions:
    """A method's instruction stream as the runtime walks it: ``(kind, operator or jump target)`` per step."""

    method: str
    steps: tuple[tuple[str, str], ...]

    def counts(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for kind, _ in self.steps:
            out[kind] = out.get(kind, 0) + 1
        return out

    def __repr__(self) -> str:
        lines = [f"{self.method}: {len(self.steps)} instructions — "
                 + ", ".join(f"{n} {k}" for k, n in sorted(self.counts().items()))]
        lines += [f"  {i:>2}  {kind:<13} {detail}" for i, (kind, detail) in enumerate(self.steps)]
        return "\n".join(lines)


def instructions(artifact: PteArtifact, method: str = "forward") -> Instructions:
    """The instructions of ``method`` (kernel calls, delegate calls, jumps, moves), read from the serialized
    ``.pte`` (:meth:`PteArtifact.instructions`)."""
    return Instructions(method, tuple(artifact.instructions(method)))


def node_counts(delegation: Any) -> dict[str, int]:
    """Delegated nodes, nodes on portable kernels, and control-flow nodes (a ``cond`` is jumps, not a kernel)."""
    return {"delegated": delegation.delegated_nodes, "portable kernels": delegation.portable_nodes,
            "control flow": delegation.control_flow}


# ----- lesson 04: what computing both sides costs ------------------------------------------------
class _CheapOrHeavy(M._Lesson):
    """An expensive subnetwork (``depth`` × Linear+ReLU) and a cheap elementwise alternative."""

    def __init__(self, features: int = 128, depth: int = 6, seed: int = 0):
        super().__init__()
        with seeded(seed):
            self.heavy = nn.Sequential(*[layer for _ in range(depth)
                                         for layer in (nn.Linear(features, features), nn.ReLU())])
        self.finish()

    def cheap(self, x: torch.Tensor) -> torch.Tensor:
        return x * 0.5


class HeavyWhere(_CheapOrHeavy):
    """``torch.where`` on ``x.mean() > 0`` between an expensive subnetwork and a cheap scale."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.where(x.mean() > 0, self.heavy(x), self.cheap(x))


class HeavyCond(_CheapOrHeavy):
    """``torch.cond`` on ``x.mean() > 0`` between the same two."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cond(x.mean() > 0, self.heavy, self.cheap, (x,))


class Router(M._Lesson):
    """Exercise 03.cond_rewrite: a projection, then *either* a two-layer block *or* a cheap scale-and-flip.

    The decision depends on an intermediate value (``h.sum()``), so the app cannot make it; the two
    sides are different computations, so a real runtime branch is wanted.
    """

    def __init__(self, features: int = 8, hidden: int = 16, seed: int = 0):
        super().__init__()
        with seeded(seed):
            self.pre = nn.Linear(features, features)
            self.big1 = nn.Linear(features, hidden)
            self.big2 = nn.Linear(hidden, features)
        self.finish()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.pre(x)
        if h.sum() > 0:
            return self.big2(torch.relu(self.big1(h)))
        return -h * 0.5


class GatedProj(M._Lesson):
    """Exercise 04.where_rewrite: one projection, then ``relu`` or a damping factor, by the sign of the sum."""

    def __init__(self, features: int = 4, seed: int = 0):
        super().__init__()
        with seeded(seed):
            self.proj = nn.Linear(features, features)
        self.finish()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.sum() > 0:
            return torch.relu(self.proj(x))
        return self.proj(x) * 0.1


# ----- lesson 05: hoisting the decision into the app ----------------------------------------------
class ScaleOrShiftA(M.ScaleOrShift):
    """Lesson 05: ``ScaleOrShift``'s true side alone, for the app to call."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.a(x)


class ScaleOrShiftB(M.ScaleOrShift):
    """Lesson 05: ``ScaleOrShift``'s false side alone."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.b(x)


class StraightLinearB(M.CondLinear):
    """``CondLinear`` with the decision hoisted out: always branch ``b`` (the other half of ``StraightLinear``)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.b(torch.relu(self.pre(x)))


def app_pick(x: torch.Tensor) -> str:
    """The app's decision, in plain Python (Kotlin/Swift on a phone): which method to call."""
    return "positive" if float(x.mean()) > 0 else "negative"


def app_run(artifact: PteArtifact, x: torch.Tensor) -> torch.Tensor:
    """What the app does: decide, then call one straight-line method."""
    (out,) = artifact.run(x, method=app_pick(x))
    return out


def hoisted_parity(model: nn.Module, artifact: PteArtifact, probes: list[Probe],
                   pick: Callable[[torch.Tensor], str] = app_pick) -> ParityReport:
    """Eager ``model`` (with its branch) vs the app's pick of a method, over ``probes``.

    Rows are labelled with the method the app chose, so both sides can be seen to be covered.
    """
    report = ParityReport("app: pick a method, then run it")
    for probe in probes:
        (x,) = probe.args
        try:
            method = pick(x)
        except Exception:  # noqa: BLE001 - e.g. an empty tensor: fall back to one method
            method = sorted(artifact.methods)[0]
        report.rows.append(check_one(model, artifact, probe.args, method=method, label=f"{probe.label} → {method}"))
    return report
