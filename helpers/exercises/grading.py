"""What an exercise is, what a grade says, and the checks exercises are built from.

Every check runs the real pipeline (``torch.export`` → lowering → the ExecuTorch runtime) and
compares with the *intended* behaviour: the reference model's eager outputs. Feedback names what
failed and on which input, and gives a hint that points at the idea, not at the answer.
"""

from __future__ import annotations

import ast
import copy
import hashlib
import inspect
import linecache
import re
import textwrap
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import nn
from torch.export import Dim

from ..artifact import PteArtifact
from ..contract import InputContractError
from ..display import error_excerpt, fmt
from ..operators import CONTROL_FLOW
from ..parity import Probe, check_one, format_diff

__all__ = ["Exercise", "Grade", "Verdict", "as_model", "lowered", "parity", "starter_cell", "solution_cell", "SOURCES",
           "base_context", "sided_probes", "has_control_flow", "function_answer",
           "dynamic_shapes_answer", "refused_on_host", "host_run"]

SOURCES = Path(__file__).resolve().parent.parent.parent / "notebooks" / "src"


# ----- verdicts and grades ------------------------------------------------------------------------
@dataclass(frozen=True)
class Verdict:
    """One criterion of a check: passed or not, what happened, and a hint when it failed."""

    criterion: str
    passed: bool
    detail: str = ""
    hint: str = ""


@dataclass
class Grade:
    """The result of :meth:`Exercise.check`: ``passed`` and ``feedback`` (what failed, on which input,
    and a hint that does not give the answer away); ``verdicts`` has every criterion checked."""

    exercise_id: str
    title: str
    verdicts: list[Verdict] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return bool(self.verdicts) and all(v.passed for v in self.verdicts)

    @property
    def failed(self) -> list[Verdict]:
        return [v for v in self.verdicts if not v.passed]

    @property
    def feedback(self) -> str:
        if self.passed:
            return "; ".join(v.detail or v.criterion for v in self.verdicts)
        first = self.failed[0]
        text = f"{first.criterion}: {first.detail}" if first.detail else first.criterion
        return text + (f"\nhint: {first.hint}" if first.hint else "")

    def report(self) -> str:
        """What a learner reads: the verdict first, then each criterion (✓/✗)."""
        head = "✓ passed" if self.passed else "✗ not yet"
        lines = [f"{head} — {self.exercise_id}: {self.title}"]
        for v in self.verdicts:
            mark = "✓" if v.passed else "✗"
            lines.append(f"  {mark} {v.criterion}" + (f": {v.detail}" if v.detail else ""))
            if not v.passed and v.hint:
                lines.append(f"    hint: {v.hint}")
            if not v.passed:
                break  # later criteria depend on this one: fix it first
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.report()

    def __repr__(self) -> str:
        return f"<Grade {self.exercise_id}: {'passed' if self.passed else 'not yet'}>"


# ----- exercises ----------------------------------------------------------------------------------
@dataclass
class Exercise:
    """One exercise: what to submit, how it is graded, its starter (the lesson's cell) and its solution.

    ``grade(answer)`` returns the list of :class:`Verdict` (it stops at the first failed criterion
    that later ones depend on). ``context()`` gives the names the starter cell may use (the lesson's
    reference model, ``torch``, ``nn``, ``Dim``…); the starter assigns the answer to ``answer``.

    ``solve`` is the solution as code: a function of the lesson's module that builds the answer and returns
    it (ruff and the type checker read it, the tests call it). What the solution button shows is its body,
    as a learner would write it in the starter cell: see :func:`solution_cell`.
    """

    id: str
    lesson: str
    title: str
    goal: str
    grade: Callable[[Any], list[Verdict]]
    context: Callable[[], dict[str, Any]]
    solve: Callable[[], Any]
    kind: str = "model"
    revisit: tuple[str, ...] = ()  # lessons that teach what the exercise needs (default: its own lesson)

    @property
    def marker(self) -> str:
        """The comment that starts the starter cell in the lesson."""
        return f"# ✏️ Exercise {self.id}"

    @property
    def starter_source(self) -> str:
        """The starter cell, as the lesson's source file has it (the learner edits this cell)."""
        return starter_cell(self.lesson, self.marker)

    @property
    def starter(self) -> Any:
        """The object the starter cell builds (what a learner who changed nothing submits)."""
        return self.build(self.starter_source)

    @property
    def solution_source(self) -> str:
        """The solution as the learner would type it in the starter cell (it assigns ``answer``)."""
        return solution_cell(self.solve)

    @property
    def solution(self) -> Any:
        """The object the solution builds."""
        return self.solve()

    def build(self, source: str) -> Any:
        """Run ``source`` (a starter, a solution or a test's wrong answer) with :attr:`context`; return ``answer``."""
        namespace = dict(self.context())
        filename = f"<exercise {self.id} {hashlib.sha1(source.encode()).hexdigest()[:8]}>"
        # Registered like a notebook cell, so tracebacks and export errors can quote the answer's lines.
        linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
        exec(compile(source, filename, "exec"), namespace)  # noqa: S102 - the lesson's own code
        if "answer" not in namespace:
            raise ValueError(f"exercise {self.id}: the code must assign the answer to `answer`")
        return namespace["answer"]

    def check(self, answer: Any) -> Grade:
        """Grade ``answer`` with the real pipeline (never raises for a wrong answer)."""
        return Grade(self.id, self.title, list(self.grade(answer)))

    def __repr__(self) -> str:
        return f"<Exercise {self.id} ({self.lesson}): {self.title}>"


def solution_cell(solve: Callable[[], Any]) -> str:
    """The body of ``solve`` as a notebook cell: its docstring dropped, dedented, ``return X`` → ``answer = X``.

    ``solve`` builds the answer inside its body (classes, functions) and ends with ``return <the answer>``."""
    source = textwrap.dedent(inspect.getsource(solve))
    (function,) = ast.parse(source).body
    if not isinstance(function, ast.FunctionDef) or not function.body:
        raise TypeError(f"{solve!r}: a solution is a plain function")
    body = function.body
    start = body[0].lineno
    if isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) and isinstance(body[0].value.value,
                                                                                                  str):
        start = (body[0].end_lineno or body[0].lineno) + 1  # after the docstring; comments below it stay
        body = body[1:]
    last = body[-1] if body else None
    if not isinstance(last, ast.Return) or last.value is None:
        raise TypeError(f"{solve.__qualname__}: a solution ends with `return <the answer>`")
    lines = source.splitlines()
    cell = textwrap.dedent("\n".join(lines[start - 1:function.end_lineno])).strip("\n").splitlines()
    index = len(cell) - 1 - ((function.end_lineno or last.lineno) - last.lineno)
    if not cell[index].lstrip().startswith("return "):
        raise TypeError(f"{solve.__qualname__}: its last statement must start its line with `return`")
    cell[index] = cell[index].replace("return ", "answer = ", 1)
    shift = len("answer = ") - len("return ")  # a return over several lines keeps its continuation lines aligned
    cell[index + 1:] = [" " * shift + line if line.strip() else line for line in cell[index + 1:]]
    return "\n".join(cell) + "\n"


def lesson_cells(lesson: str) -> list[str]:
    """The py:percent cells of ``notebooks/src/<lesson>.py``, in order (markdown cells as their comment lines)."""
    path = SOURCES / f"{lesson}.py"
    if not path.exists():
        raise FileNotFoundError(f"{path} not found: the starter cells are read from the lessons' sources "
                                "(install the repository with `pip install -e .`)")
    return re.split(r"^# %%.*\n", path.read_text(), flags=re.MULTILINE)


def starter_cell(lesson: str, marker: str) -> str:
    """The py:percent cell of ``notebooks/src/<lesson>.py`` whose first line starts with ``marker``."""
    path = SOURCES / f"{lesson}.py"
    cells = lesson_cells(lesson)
    found = [c for c in cells if c.strip().splitlines() and c.strip().splitlines()[0].startswith(marker)]
    if len(found) != 1:
        raise LookupError(f"{path.name}: expected one cell containing {marker!r}, found {len(found)}")
    return found[0].strip() + "\n"


# ----- checks exercises are built from -----------------------------------------------------------
def as_model(answer: Any, reference: nn.Module, *, what: str = "your model") -> tuple[nn.Module | None, Verdict]:
    """``answer`` as an eval-mode copy carrying the reference's weights (so only ``forward()`` is judged), its
    parameters not requiring gradients: an inference program, as an app exports it (torch 2.13's ``scan`` fails to
    export a step that reads a parameter requiring gradients and carries integers, such as token ids; lesson 15).

    Fails when ``answer`` is not an ``nn.Module`` or its parameters are not the reference's (names and
    shapes): the exercise is about the code around the layers, not about retraining them.
    """
    criterion = "an nn.Module with the reference's layers"
    if not isinstance(answer, nn.Module):
        return None, Verdict(criterion, False, f"{what} is a {type(answer).__name__}, not an nn.Module instance",
                             "assign an instance, e.g. `answer = MyModel()` (not the class)")
    model = copy.deepcopy(answer).eval()
    try:
        model.load_state_dict(reference.state_dict(), strict=True)
    except RuntimeError as exc:
        problem = " ".join(str(exc).split())[:300]
        return None, Verdict(criterion, False, f"its parameters differ from the reference's ({problem})",
                             "subclass the reference model and change forward() only, so the layers stay the same")
    model.requires_grad_(False)
    return model, Verdict(criterion, True, "same layers as the reference (its weights are used)")


def lowered(model: nn.Module, example: tuple[Any, ...], dynamic: Any = None, *, backend: str = "xnnpack",
            hint: str = "", criterion: str = "exports, lowers and loads",
            strict: bool = False, recipe: str | None = None) -> tuple[PteArtifact | None, Verdict]:
    """Run the real pipeline on ``model``; a failure becomes a verdict quoting torch's or ExecuTorch's words.

    ``recipe``, when given, names the answer by how it is made (:func:`helpers.lowering.lower_by_recipe`): a
    program built for the same recipe before is loaded without exporting again (a failure is not noted: it
    re-runs, and says the same)."""
    from ..diagnose import diagnose_exception
    from ..lowering import known_by_recipe, lower, remember_recipe, stage_of

    artifact = known_by_recipe(recipe) if recipe else None
    try:
        if artifact is None:
            artifact = lower(model, example, dynamic_shapes=dynamic, backend=backend, strict=strict)
            if recipe:
                remember_recipe(recipe, artifact)
    except Exception as exc:  # noqa: BLE001 - the learner's model may fail in any stage
        stage = stage_of(exc)
        if stage is None:
            raise  # the checker's own failure: never blame the learner for it
        diagnosis = diagnose_exception(exc, stage)  # a lowering failure carries its exported program
        inside_library = (diagnosis.location or "").startswith("helpers/")
        where = f" at `{diagnosis.source_line}`" if diagnosis.source_line and not inside_library else ""
        detail = f"{stage} failed{where} — {diagnosis.summary}"
        if diagnosis.suggested_fixes:
            detail += f" (torch suggests: {'; '.join(diagnosis.suggested_fixes)})"
        return None, Verdict(criterion, False, detail, hint)
    report = artifact.delegation()
    if backend == "portable":
        return artifact, Verdict(criterion, True, f"{report.portable_nodes} nodes on the portable kernels")
    return artifact, Verdict(criterion, True, report.summary().split(": ", 1)[1])


def parity(reference: nn.Module, artifact: PteArtifact, probes: Sequence[Probe], *, method: str = "forward",
           hint: str = "", criterion: str = "matches the reference on every probe",
           run: Callable[[Probe], Any] | None = None, reference_name: str = "the reference") -> Verdict:
    """The answer's ``.pte`` against the reference's *eager* outputs on ``probes`` (the intended behaviour).

    ``run``, when given, maps a probe to the ``.pte``'s outputs (an app-side dispatcher, a host step);
    by default each probe goes straight to ``artifact.run_raw``. ``reference_name`` names the reference in the
    feedback (``"your model in eager"`` when the answer is compared with itself).
    """
    for probe in probes:
        if run is None:
            row = check_one(reference, artifact, probe.args, method=method, label=probe.label)
            if row.status == "match":
                continue
            if row.status in ("rejected", "refused"):
                detail = f"on {probe.label} {probe.shapes()}: the .pte refused it — {row.message.split('. ')[0]}"
            elif row.status == "eager_error":
                raise RuntimeError(f"the reference fails on its own probe {probe.label}: {row.eager_message}")
            else:
                detail = (f"on {probe.label} {probe.shapes()}: the .pte returns {_outputs(row.pte_output)}, "
                          f"{reference_name} {_outputs(row.eager_output)} (max |Δ| {format_diff(row.max_abs_diff)})")
            return Verdict(criterion, False, detail, hint)
        with torch.no_grad():
            expected = reference(*probe.args)
        try:
            got = run(probe)
        except Exception as exc:  # noqa: BLE001 - the learner's app code or the runtime refused
            return Verdict(criterion, False, f"on {probe.label} {probe.shapes()}: {_refusal(exc)}", hint)
        got_t = got[0] if isinstance(got, (tuple, list)) else got
        exp_t = expected[0] if isinstance(expected, (tuple, list)) else expected
        if tuple(got_t.shape) != tuple(exp_t.shape) or not torch.allclose(got_t, exp_t, atol=1e-4, rtol=1e-4,
                                                                           equal_nan=False):
            return Verdict(criterion, False, f"on {probe.label} {probe.shapes()}: the .pte returns {fmt(got_t)}, "
                                             f"{reference_name} {fmt(exp_t)}", hint)
    return Verdict(criterion, True, f"{len(probes)} probes match the reference")


def _refusal(exc: BaseException) -> str:
    """One line saying who refused an input and why."""
    from ..artifact import HostRefusedError, RuntimeRejectedError
    from ..contract import InputContractError

    if isinstance(exc, InputContractError):
        return f"refused by the method's input contract ({exc.contract.signature()}): {exc.violations[0].describe()}"
    if isinstance(exc, HostRefusedError):
        return f"refused on the host: {exc.reason.split('. ')[0]}"
    if isinstance(exc, RuntimeRejectedError):
        return f"refused by the runtime: {exc.reason.split('. ')[0]}"
    return error_excerpt(exc, 2)  # torch's header ("Constraints violated (T)!") and the line that says why


def _outputs(values: tuple[Any, ...] | None) -> str:
    if not values:
        return "nothing"
    return fmt(values[0]) if len(values) == 1 else fmt(values)


# ----- inputs exercises are graded on ------------------------------------------------------------
def base_context() -> dict[str, Any]:
    """The names every starter cell may use: ``torch``, ``nn`` and ``Dim``."""
    return {"torch": torch, "nn": nn, "Dim": Dim}


def sided_probes(score: Callable[[torch.Tensor], torch.Tensor | float], shape: tuple[int, ...], sides: tuple[str, str],
                 per_side: int = 3, seed: int = 0, margin: float = 0.05,
                 extra: tuple[tuple[str, torch.Tensor], ...] = ()) -> list[Probe]:
    """Seeded inputs of ``shape``, ``per_side`` on each side of ``score(x) > 0`` (never on the edge).

    Labels name the side (``sides[0]`` for ``score > 0``), so feedback says which side failed.
    ``extra`` adds hand-picked inputs, labelled with their side too.
    """
    g = torch.Generator().manual_seed(seed)
    found: dict[bool, list[torch.Tensor]] = {True: [], False: []}
    for i in range(400):
        x = torch.randn(shape, generator=g) * (0.5 + (i % 4)) + (i % 7 - 3) * 0.3
        with torch.no_grad():
            value = float(score(x))
        if abs(value) > margin and len(found[value > 0]) < per_side:
            found[value > 0].append(x)
        if all(len(v) == per_side for v in found.values()):
            break
    probes = []
    for positive, name in ((True, sides[0]), (False, sides[1])):
        probes += [Probe(f"{name} #{k + 1}", (x,)) for k, x in enumerate(found[positive])]
    for label, x in extra:
        with torch.no_grad():
            name = sides[0] if float(score(x)) > 0 else sides[1]
        probes.append(Probe(f"{name}: {label}", (x,)))
    return probes


def has_control_flow(artifact: Any, method: str = "forward") -> bool:
    """Whether a lowered program keeps a ``torch.cond`` (or another control-flow operator)."""
    return any(r["op"] in CONTROL_FLOW or r["region"] != "main" for r in artifact.delegation(method).rows)


# ----- answers that are not models -----------------------------------------------------------------
def function_answer(answer: Any, what: str) -> Verdict:
    """Is ``answer`` a function (not a module, not its result)? ``what`` is the function's name in the lesson."""
    if callable(answer) and not isinstance(answer, nn.Module):
        return Verdict(f"{what} is a function", True)
    return Verdict(f"{what} is a function", False, f"the answer is a {type(answer).__name__}",
                   f"assign the function itself: `answer = {what}` (no parentheses)")


def dynamic_shapes_answer(answer: Any, example_names: tuple[str, ...]) -> Verdict:
    """Is ``answer`` a ``dynamic_shapes`` dict keyed by forward()'s argument names (``example_names``)?"""
    criterion = "a dynamic_shapes dict"
    if not isinstance(answer, dict):
        return Verdict(criterion, False, f"the answer is a {type(answer).__name__}",
                       "assign a dict like {'x': {1: Dim(...)}}: forward()'s argument name → {axis: Dim}")
    unknown = sorted(set(answer) - set(example_names))
    if unknown:
        return Verdict(criterion, False, f"it names {unknown}, but forward() takes {list(example_names)}",
                       "key the dict by forward()'s argument names")
    return Verdict(criterion, True)


def refused_on_host(art: Any, args: tuple[Any, ...]) -> tuple[bool, str]:
    """Does ``art.run`` (the host contract check) refuse ``args`` before the runtime? (and its words)."""
    try:
        art.input_contract().check(args)
    except InputContractError as exc:
        return True, exc.violations[0].describe()
    return False, ""


def host_run(art: Any) -> Callable[[Probe], tuple[Any, ...]]:
    """What the app does: check the contract on the host (``art.run``), then run the runtime."""
    return lambda probe: art.run(*probe.args)
