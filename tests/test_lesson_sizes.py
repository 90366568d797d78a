"""Lesson 14: a size read from data on the device — the promise is a bound in the plan, and it is not checked."""

from __future__ import annotations

import pytest
import torch

from helpers import RuntimeRejectedError, course

SIZES = course.lesson(14)


def test_the_exported_program_checks_the_promise_and_the_pte_does_not():
    tokens = SIZES.token_table(2)
    exported = torch.export.export(SIZES.ValidRowsChecked(), (SIZES.token_table(), SIZES.n(5)))
    with pytest.raises(RuntimeError, match="u0 >= 0"):
        exported.module()(tokens, SIZES.n(-1))
    (out,) = SIZES.lower_valid_rows_checked().run_raw(tokens, SIZES.n(-1))
    assert out.shape == (15, 8)  # tokens[:-1]


def test_the_plan_holds_the_promised_maximum_and_the_runtime_refuses_past_it():
    row = torch.randn(1, 8)
    import helpers

    art = helpers.lower(SIZES.RepeatAtMost12(), (row, SIZES.n(3)))
    assert art.runtime_output_shapes() == [(12, 8)]
    assert torch.equal(art.run_raw(row, SIZES.n(12))[0], row.expand(12, 8))
    with pytest.raises(RuntimeRejectedError, match="maximum capacity of 96 elements to 104 elements"):
        art.run_raw(row, SIZES.n(13))


def test_a_mask_is_planned_for_every_element():
    import helpers

    x = torch.randn(10)
    art = helpers.lower(SIZES.Positives(), (x,))
    assert art.runtime_output_shapes() == [(10,)]
    for values in (x.abs() + 0.1, -x.abs(), x):
        assert torch.equal(art.run_raw(values)[0], values[values > 0])


def test_one_promise_is_not_enough_for_the_slice():
    """The lesson's "both are needed": with n >= 0 alone, lowering stops at the slice's next guard (end > 16)."""
    from helpers.diagnose import diagnose_export

    class NotNegative(SIZES.ValidRows):
        def forward(self, tokens, n):
            k = n.item()
            torch._check(k >= 0)
            return self.proj(tokens[:k])

    d = diagnose_export(NotNegative(), (SIZES.token_table(), SIZES.n(5)))
    assert d.stage == "lower" and "> 16" in d.message.splitlines()[0], d.message[:300]


def test_other_correct_promises_pass_the_exercise():
    """The grade judges behaviour, not the solution's text: an upper bound alone (arange already settles the sign)
    and torch._check_is_size plus the bound both pass."""
    from helpers import exercises

    exercise = exercises.get("14.bound_positions")
    for checks in ("torch._check(k <= 12)", "torch._check_is_size(k)\n        torch._check(k <= 12)"):
        answer = exercise.build(f"""
class Bounded(Positions):
    def forward(self, tokens, n):
        k = n.item()
        {checks}
        position = torch.arange(k, dtype=torch.float32).unsqueeze(1) / 4.0
        return self.proj(tokens[:k]) + torch.sin(position)
answer = Bounded()
""")
        grade = exercise.check(answer)
        assert grade.passed, grade.report()
