"""Lesson 18: a program that builds can fail to load (OperatorMissing), and two checks catch it in CI."""

from __future__ import annotations

import pytest
import torch

import helpers
from helpers import course, exercises
from helpers._runtime import registered_operators
from helpers.serialized import program_operators

LOADING = course.lesson(18)


def test_the_ci_build_writes_a_program_that_fails_load_method_with_operator_missing(tmp_path, monkeypatch):
    monkeypatch.setenv("EXPORTLAB_CACHE_DIR", str(tmp_path / "cache"))  # the lesson's call builds it: nothing kept yet
    example = (LOADING.windows(0),)
    path = LOADING.built_like_ci(LOADING.MedianFilter(), example, tmp_path)
    pte = path.read_bytes()
    said, log = LOADING.load_and_run(path, example)
    assert "0x:14" in said, said
    assert any("kernel 'aten::sort.values' not found" in line for line in log), log
    assert "aten::sort.values" in program_operators(pte)["forward"]
    assert LOADING.missing_operators(pte) == {"forward": ["aten::sort.values"]}

    def no_build(*args):
        raise AssertionError("built again")

    monkeypatch.setattr(LOADING, "build_like_ci", no_build)
    (tmp_path / "again").mkdir()
    assert LOADING.built_like_ci(LOADING.MedianFilter(), example, tmp_path / "again").read_bytes() == pte
    with pytest.raises(AssertionError, match="built again"):  # another exported program is another file
        LOADING.built_like_ci(LOADING.solve_median_loads(), example, tmp_path / "again")


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


def test_each_implementation_of_max_pool_treats_a_dead_pixel_its_own_way():
    """Eager propagates the NaN; the portable kernel keeps it only first in its window; XNNPACK never returns it
    (-inf first, then the live max, then at the last position the block's first pixel)."""
    model = LOADING.BlockMax()
    xnnpack = helpers.lower(model, (LOADING.dead_pixel_frame(2, 2),))
    portable = helpers.lower(model, (LOADING.dead_pixel_frame(2, 2),), backend="portable")
    for (row, col), portable_keeps in (((2, 2), True), ((2, 3), False), ((3, 2), False), ((3, 3), False)):
        frame = LOADING.dead_pixel_frame(row, col)
        block = (0, 1, row // 2, col // 2)
        assert model(frame)[block].isnan()
        assert portable.run_raw(frame)[0][block].isnan() == portable_keeps, (row, col)
        assert not xnnpack.run_raw(frame)[0][block].isnan(), (row, col)
    rows = LOADING.dead_pixel_table()
    assert [r["XNNPACK .pte"] == r["largest live pixel"] for r in rows] == [False, True, True, False]


def test_the_locator_names_the_first_stage_that_leaves_eager():
    first = LOADING.where_it_diverges(LOADING.BlockMax(), LOADING.dead_pixel_frame(2, 2))
    assert [(s.name, s.status) for s in first.stages] == [
        ("exported program", "match"), ("edge program", "match"), ("portable .pte", "match"),
        ("xnnpack .pte", "diverge")]
    second = LOADING.where_it_diverges(LOADING.BlockMax(), LOADING.dead_pixel_frame(2, 3))
    assert second.first == "portable .pte"
    assert LOADING.where_it_diverges(LOADING.solve_dead_pixels(), LOADING.dead_pixel_frame(2, 3)) is None


def test_another_correct_dead_pixel_rule_passes():
    exercise = exercises.get("18.dead_pixels")
    grade = exercise.check(exercise.build('''
class VeryLow(BlockMax):
    def forward(self, frame):
        return torch.nn.functional.max_pool2d(torch.nan_to_num(frame, nan=-1e4), 2)
answer = VeryLow()
'''))
    assert grade.passed, grade.report()
