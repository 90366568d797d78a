"""Lesson 14 · values that decide sizes: ``.item()`` as a size, ``torch._check`` as a promise the memory plan keeps
and the device does not check; its predictions, its exercise (``14.bound_positions``) and its interview card."""

from __future__ import annotations

import functools
from typing import Any

import torch
from torch import nn

from helpers.exercises.grading import Exercise, Verdict, as_model, base_context, lowered, parity
from helpers.interview import Card
from helpers.lowering import lower
from helpers.models import seeded_linear
from helpers.parity import Probe
from helpers.questions import Question, Reveal

LESSON = "14_values_that_decide_sizes"
ROWS, WIDTH = 16, 8  # the token table the app sends: 16 rows of 8 features, the prompt's first, padding after


def token_table(seed: int = 0) -> torch.Tensor:
    """A table of :data:`ROWS` token rows (random features, seeded)."""
    return torch.randn(ROWS, WIDTH, generator=torch.Generator().manual_seed(seed))


class AllRows(nn.Module):
    """The app sends a table of 16 token rows (the prompt's, then padding); the layer runs on all of them and the app
    keeps the prompt's rows."""

    def __init__(self) -> None:
        super().__init__()
        self.proj = seeded_linear(14, WIDTH, WIDTH)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.proj(tokens)


class ValidRows(nn.Module):
    """The table and ``n``, how many of its rows are the prompt's: only those go through the layer (the same one)."""

    def __init__(self) -> None:
        super().__init__()
        self.proj = seeded_linear(14, WIDTH, WIDTH)

    def forward(self, tokens: torch.Tensor, n: torch.Tensor) -> torch.Tensor:
        k = n.item()
        return self.proj(tokens[:k])


class ValidRowsChecked(ValidRows):
    """:class:`ValidRows` with two promises about ``n``: never negative, never more than the table's 16 rows."""

    def forward(self, tokens: torch.Tensor, n: torch.Tensor) -> torch.Tensor:
        k = n.item()
        torch._check(k >= 0)
        torch._check(k <= 16)
        return self.proj(tokens[:k])


class Repeat(nn.Module):
    """A row of 8 features repeated ``n`` times."""

    def forward(self, row, n):
        k = n.item()
        return row.expand(k, WIDTH) * torch.ones(k, 1)


class RepeatAtMost12(Repeat):
    """:class:`Repeat` with the promise that bounds it: ``n`` is at most 12."""

    def forward(self, row, n):
        k = n.item()
        torch._check(k >= 0)
        torch._check(k <= 12)
        return row.expand(k, WIDTH) * torch.ones(k, 1)


class ShortOrLong(nn.Module):
    """Short prompts (up to 8 tokens) are doubled as they are; longer ones go through the layer."""

    def __init__(self) -> None:
        super().__init__()
        self.proj = seeded_linear(16, WIDTH, WIDTH)

    def forward(self, tokens: torch.Tensor, n: torch.Tensor) -> torch.Tensor:
        k = n.item()
        if k > 8:
            return self.proj(tokens)
        return tokens * 2


class Positives(nn.Module):
    """The positive values of a vector: a mask decides how many come out."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x[x > 0]


def n(value: int) -> torch.Tensor:
    """``n`` as the app sends it: a 0-d int64 tensor (a Python int would be baked into the program)."""
    return torch.tensor(value)


def lower_valid_rows_checked():
    return lower(ValidRowsChecked(), (token_table(), n(5)))


# ----- predictions --------------------------------------------------------------------------------
@functools.cache
def _valid_rows_diagnosis() -> Any:
    """ValidRows exported and lowered once per process (a failed lowering is not cached on disk; two reveals use it)."""
    from helpers.diagnose import diagnose_export

    return diagnose_export(ValidRows(), (token_table(), n(5)))


def _where_it_stops() -> Reveal:
    d = _valid_rows_diagnosis()
    if d.ok:
        return Reveal("runs", f"it exported, lowered and loaded: {d.summary}", why_not={
            "export fails": "export returned a graph.", "lowering fails": "lowering wrote the program."})
    graph = d.exported.graph_module.code if d.exported is not None else ""
    return Reveal("lowering fails" if d.stage == "lower" else "export fails" if d.stage == "export" else "runs", (
        f"export recorded `n.item()` as a symbol and the slice with it, but lowering stopped ({d.stage}): "
        f"{d.message.splitlines()[0]} It comes from torch's own decomposition of the slice, which ExecuTorch's "
        "lowering runs: it asks whether the end is negative (Python counts a negative end from the back), and "
        "for a value read from data nobody knows."), why_not={
        "export fails": ("export succeeded: its graph holds the slice with the symbol "
                         f"({'item' if 'aten.item' in graph else 'a symbol'} → slice), and asserts that the rows "
                         "are at most 16."),
        "runs": "no program was written: lowering failed before any .pte existed.",
    })


def _broken_promise() -> Reveal:
    art = lower_valid_rows_checked()
    tokens = token_table(1)
    try:
        ValidRowsChecked()(tokens, n(-1))
        eager = "eager ran"
    except RuntimeError as exc:
        eager = f"eager raised ({str(exc).splitlines()[0][:80]})"
    try:
        (out,) = art.run_raw(tokens, n(-1))
    except Exception as exc:  # noqa: BLE001 - the runtime's refusal is an answer too
        return Reveal("refuses it", f"the runtime refused: {str(exc).splitlines()[0]}", why_not={
            "returns rows": "no rows came back.", "returns no rows": "no output came back."})
    rows = out.shape[0]
    same_as_slice = torch.allclose(out, ValidRows()(tokens[:-1], n(ROWS - 1)), atol=1e-5)
    actual = "returns rows" if rows else "returns no rows"
    return Reveal(actual, (
        f"{eager}, but the .pte returned {rows} rows{' — tokens[:-1], every row but the last' if same_as_slice else ''}"
        ": the promise was removed from the program, and a slice to -1 is a valid slice."), why_not={
        "refuses it": ("nothing refused it: the program holds no check of the promise, and its output of "
                       f"{rows} rows fits the plan's capacity of {ROWS}."),
        "returns no rows" if rows else "returns rows": (
            f"it returned {rows} rows: a slice to -1 ends one row before the table's end, it does not empty it."
            if rows else "it returned no rows."),
    })


def _draft_report() -> Reveal:
    from helpers.lessons.control_flow import draft_export_decisions

    issues = draft_export_decisions(ValidRows(), (token_table(), n(5))).issues
    lowering = _valid_rows_diagnosis()
    if issues:
        return Reveal("the slice's guard", f"its report lists {len(issues)} issue(s): {issues[0][0]}.", why_not={
            "no issues": f"it listed {len(issues)} issue(s).",
            "an export error": "it returned a program and a report, as draft_export does instead of raising."})
    return Reveal("no issues", (
        "its report lists 0 issues. draft_export runs export only; the guard that stopped ValidRows is asked later, "
        f"by the lowering ({lowering.stage}: {lowering.summary})."), why_not={
        "the slice's guard": ("the report lists 0 issues: that guard is asked by torch's slice decomposition while "
                              "ExecuTorch lowers the program, after export has finished."),
        "an export error": ("draft_export returned a program and a report; export itself succeeded on ValidRows "
                            "in §1 already."),
    })


# ----- exercise -----------------------------------------------------------------------------------
class Positions(nn.Module):
    """The app sends the token table (16 rows) and ``n``, the prompt's length: 1 to 12 tokens. The model adds a
    position code to each of the prompt's rows and returns only those."""

    def __init__(self) -> None:
        super().__init__()
        self.proj = seeded_linear(15, WIDTH, WIDTH)

    def forward(self, tokens: torch.Tensor, n: torch.Tensor) -> torch.Tensor:
        k = n.item()
        position = torch.arange(k, dtype=torch.float32).unsqueeze(1) / 4.0
        return self.proj(tokens[:k]) + torch.sin(position)


LONGEST_PROMPT = 12


def positions_probes() -> list[Probe]:
    """Prompts across the contract (1 … 12 tokens, both ends), on two different tables."""
    return [Probe(f"n = {k}", (token_table(10 + i), n(k))) for i, k in enumerate((1, 2, 7, 11, LONGEST_PROMPT))] + [
        Probe(f"n = {k}, another table", (token_table(20 + k), n(k))) for k in (LONGEST_PROMPT, 3)]


def _grade_positions(answer: Any) -> list[Verdict]:
    reference = Positions()
    model, verdict = as_model(answer, reference)
    if model is None:
        return [verdict]
    verdicts = [verdict]
    art, verdict = lowered(model, (token_table(), n(5)), hint=(
        "the lowering needs to know what the value read by .item() can be: what is the smallest and the largest "
        "prompt the app sends?"))
    verdicts.append(verdict)
    if art is None:
        return verdicts
    verdicts.append(parity(reference, art, positions_probes(),
                           criterion="matches Positions on prompts of 1 to 12 tokens", hint=(
                               "every prompt length the app sends must run on the device and give Positions' rows")))
    if not verdicts[-1].passed:
        return verdicts
    planned = art.runtime_output_shapes()[0]
    rows = planned[0] if planned else None
    ok = rows == LONGEST_PROMPT
    verdicts.append(Verdict("the output is planned for the longest prompt, no more", ok,
                            f"the .pte plans its output for {rows} rows", "" if ok else (
                                "the memory plan reserves the largest size the promise allows: promise what the app "
                                "sends, not what the table could hold")))
    return verdicts


def solve_bound_positions() -> Any:
    """14.bound_positions: promise the prompt's length, 1 to 12, before it is used as a size."""
    class Bounded(Positions):
        def forward(self, tokens, n):
            k = n.item()
            torch._check(k >= 1)
            torch._check(k <= 12)
            position = torch.arange(k, dtype=torch.float32).unsqueeze(1) / 4.0
            return self.proj(tokens[:k]) + torch.sin(position)


    return Bounded()


QUESTIONS = [
    Question("14.where_it_stops", LESSON,
             "ValidRows reads n with .item() and slices the table with it. Exported, then lowered for XNNPACK: "
             "where does it stop?", ("export fails", "lowering fails", "runs"), _where_it_stops),
    Question("14.draft_report", LESSON,
             "draft_export keeps going where export would stop and reports every issue it meets. Run on ValidRows, "
             "its report lists…", ("the slice's guard", "no issues", "an export error"), _draft_report),
    Question("14.broken_promise", LESSON,
             "The app has a bug and sends n = -1 to ValidRowsChecked's .pte, which promised n >= 0. The .pte…",
             ("refuses it", "returns rows", "returns no rows"), _broken_promise),
]


EXERCISES = [
    Exercise(
        id="14.bound_positions", lesson=LESSON, kind="model",
        title="promise the prompt's length",
        goal=("Make Positions export, lower for XNNPACK and run on the device for every prompt the app sends: "
              "1 to 12 tokens, in a table of 16 rows. Its rows must match Positions in eager mode, and the .pte must "
              "plan its output for the longest prompt (12 rows), no more."),
        grade=_grade_positions, solve=solve_bound_positions,
        context=lambda: {**base_context(), "Positions": Positions}),
]


CARDS = [
    Card(
        id="14.size_promise", lesson=LESSON, topic="data-dependent sizes", kind="constraints",
        question="A model slices a tensor with a count read by .item(). What does torch._check do for it, in eager, "
                 "in the exported program and on the device?",
        answer=("The count becomes an unbacked symbol: export knows nothing about its value. torch._check(k >= 0) "
                "and torch._check(k <= 12) are promises: in eager and in ep.module() they are checked and raise; in "
                "export they bound the symbol, which lets a guard like 'is the end negative?' be decided and gives "
                "the memory planner a finite largest size to reserve. ExecuTorch then removes the asserts "
                "(RemoveGraphAssertsPass), so the device does not check the promise: a value above the bound "
                "overflows a planned buffer and the runtime refuses the call (resize beyond capacity, "
                "InvalidArgument); a value that breaks a promise but fits the plan, like n = -1 in a slice, "
                "returns a wrong answer silently. So the app checks the range itself before the call."),
        points=("an unbacked symbol: export cannot guard on it",
                "torch._check: checked in eager, a bound in export, the memory plan's largest size",
                "the .pte drops the asserts: above the plan refused, inside the plan silent",
                "the app validates the value before calling"),
        follow_ups=(
            ("Why not just promise a huge bound to be safe?",
             "Two costs. The planner reserves the largest size the promise allows for every tensor made from the "
             "value: memory the device never uses. And where the value slices a tensor, a bound past that tensor's "
             "length leaves the question 'is the end past the table?' open, so lowering still fails (lesson 14's "
             "exercise: a bound of 100,000 on a 16-row table)."),
            ("draft_export reported no issues, and lowering still failed. How?",
             "draft_export runs export only. The guard came later: ExecuTorch's lowering turns the slice into a "
             "slice_copy, and working out its size asks whether the end is negative, a question about the value "
             "nothing had bounded. A clean export report is not a program that builds; the check is lowering it."),
        )),
    Card(
        id="14.worst_case_boxes", lesson=LESSON, topic="data-dependent sizes", kind="diagnosis", held_back=True,
        question=("A detector's .pte returns only the boxes that pass a score threshold (scores[scores > 0.5] over "
                  "1,000 candidates). The memory profile on the phone shows its output buffer sized for 1,000 boxes "
                  "even when 3 pass. A reviewer calls it a leak. Is it, and what would you change?"),
        answer=("Not a leak: static memory planning. The number of boxes is a size read from data, and ExecuTorch "
                "plans every buffer once, before any call, at the largest size the tensor can take. A boolean mask "
                "keeps at most every element, so export bounds the count by the 1,000 candidates itself and the "
                "plan reserves all of them; each call fills part of the buffer and the output's shape says how many "
                "boxes came back, so the app reads that shape, not the buffer's capacity. If the worst case is too "
                "much memory, cap the count in the model (the top k by score, or a torch._check(count <= k) before "
                "a tensor made from the count) and have the app handle the cap; the plan then holds k."),
        points=("a data-dependent size is planned at its largest value, once, before any call",
                "a mask is bounded by its input: the plan holds every candidate",
                "each call fills part; the output's shape gives the count",
                "less memory: cap the count in the model (top k, torch._check) and tell the app"),
        follow_ups=(
            ("What if the model built a new tensor from the count, say torch.zeros(count, 4)?",
             "Then nothing bounds it: the count comes from .item() and can be any integer, and ExecuTorch cannot "
             "plan memory for it, so the build stops at memory planning. A torch._check(count <= k) gives the "
             "planner its largest size; above k at run time, the runtime refuses the call (the buffer cannot "
             "grow past its plan)."),
            ("Why must the app still check the count, with that torch._check in the model?",
             "Because the device does not: ExecuTorch removes the graph's asserts when it writes the program (RemoveGraphAssertsPass), so a "
             "value above the promise is refused only if it overflows a planned buffer, and one that fits the plan "
             "returns silently. The app checks the value before the call."),
        )),
]
