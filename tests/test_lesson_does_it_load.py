"""Lesson 18: a program that builds can fail to load (OperatorMissing), and two checks catch it in CI."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
import torch

import helpers
from helpers import course, exercises
from helpers._runtime import registered_operators
from helpers.serialized import program_operators

LOADING = course.lesson(18)


def test_the_ci_build_writes_a_program_that_fails_load_method_with_operator_missing():
    example = (LOADING.windows(0),)
    with tempfile.TemporaryDirectory() as folder:
        path = LOADING.build_like_ci(LOADING.MedianFilter(), example, Path(folder))
        pte = path.read_bytes()
        said, log = LOADING.load_and_run(path, example)
    assert "0x:14" in said, said
    assert any("kernel 'aten::sort.values' not found" in line for line in log), log
    assert "aten::sort.values" in program_operators(pte)["forward"]
    assert LOADING.missing_operators(pte) == {"forward": ["aten::sort.values"]}


def test_a_program_whose_kernels_exist_has_nothing_missing_and_loads():
    program = helpers.lower(LOADING.solve_median_loads(), (LOADING.windows(0),))
    assert LOADING.missing_operators(program.pte_bytes) == {"forward": []}
    assert set(program_operators(program.pte_bytes)["forward"]) <= set(registered_operators())


def test_helpers_lower_loads_each_method_so_the_build_fails_at_the_load_stage():
    with pytest.raises(helpers.RuntimeRejectedError, match="aten::sort.values") as caught:
        helpers.lower(LOADING.MedianFilter(), (LOADING.windows(0),))
    assert helpers.lowering.stage_of(caught.value) == "load"


def test_the_windows_have_one_spike_each_and_the_median_ignores_it():
    x = LOADING.windows(3)
    assert ((x - x.median(dim=-1, keepdim=True).values).abs() > 5).sum(dim=-1).tolist() == [1] * LOADING.ROWS
    assert torch.allclose(LOADING.MedianFilter()(x), x.median(dim=-1).values)


def test_other_correct_answers_pass_the_exercise():
    exercise = exercises.get("18.median_loads")
    for source in ('''
class SmallestSide(MedianFilter):
    def forward(self, windows):
        return -torch.topk(-windows, k=WINDOW // 2 + 1, dim=-1).values[..., -1]
answer = SmallestSide()
''', '''
class CountBelow(MedianFilter):
    def forward(self, windows):  # a sample is the median if at most 4 are below it and at least 5 at or below
        below = (windows.unsqueeze(-2) < windows.unsqueeze(-1)).sum(dim=-1)
        at_or_below = (windows.unsqueeze(-2) <= windows.unsqueeze(-1)).sum(dim=-1)
        is_median = (below <= WINDOW // 2) & (at_or_below >= WINDOW // 2 + 1)
        return torch.where(is_median, windows, torch.full_like(windows, float("-inf"))).amax(dim=-1)
answer = CountBelow()
'''):
        grade = exercise.check(exercise.build(source))
        assert grade.passed, grade.report()
