"""The exercises of lessons 06–10, each through the real pipeline: starter fails, solution passes,
plausible mistakes fail with feedback that says what failed and where (see exercise_support.py)."""

from __future__ import annotations

import time

import pytest
from exercise_support import WrongAnswer, assert_exercise_behaves

from helpers import exercises

WRONG: dict[str, list[WrongAnswer]] = {
    "06.read_signature": [
        WrongAnswer("only the first input", '''
from executorch.runtime import Runtime


def input_shapes(pte_path):
    program = Runtime.get().load_program(pte_path)
    meta = program.metadata("forward")
    return [tuple(meta.input_tensor_meta(0).sizes())]


answer = input_shapes
''', ("token_pool_two_inputs.pte", "[(1, 12), (1, 12)]", "more than one input")),
        WrongAnswer("the lesson's shape, hard-coded", "answer = lambda path: [(1, 3, 64, 64)]",
                    ("token_pool_two_inputs.pte", "the file records")),
        WrongAnswer("the function called instead of passed", "answer = [(1, 3, 64, 64)]", ("is a list", "the function itself")),
    ],
    "07.bound_dim": [
        WrongAnswer("no max: ExecuTorch plans the example's 8 frames", 'answer = {"x": {1: Dim("frames", min=2)}}',
                    ("a clip of 15 frames", "planned capacity")),
        WrongAnswer("max=64: the arena is over-provisioned", 'answer = {"x": {1: Dim("frames", min=2, max=64)}}',
                    ("plans 64 frames", "1,632", "480")),
        WrongAnswer("Dim.AUTO", 'answer = {"x": {1: Dim.AUTO}}', ("frames", "planned capacity")),
        WrongAnswer("min=3: two-frame clips refused", 'answer = {"x": {1: Dim("frames", min=3, max=16)}}',
                    ("a clip of 2 frames", "below the Dim's minimum")),
        WrongAnswer("the wrong argument name", 'answer = {"clip": {1: Dim("frames", min=2, max=16)}}', ("['x']",)),
    ],
    "07.derived_dim": [
        WrongAnswer("a derived Dim whose max stops at 32", 'answer = {"x": {1: 4 * Dim("chunks", min=2, max=8)}}',
                    ("T=36", "above the maximum")),
        WrongAnswer("Dim.AUTO", 'answer = {"x": {1: Dim.AUTO}}', ("T=36", "planned capacity")),
    ],
    "08.arena_budget": [
        WrongAnswer("max 64: the 96×96 frame is refused", '''
answer = {"x": {2: Dim("height", min=32, max=64), 3: Dim("width", min=32, max=64)}}
''', ("96×96", "above the Dim's max")),
        WrongAnswer("max 128: over budget", '''
answer = {"x": {2: Dim("height", min=32, max=128), 3: Dim("width", min=32, max=128)}}
''', ("655,424", "over")),
        WrongAnswer("a static export", "answer = None", ("a dynamic_shapes dict",)),
    ],
    "09.pick_buckets": [
        WrongAnswer("long requests refused", "answer = [128, 256]", ("43 of 400 requests", "largest bucket (256)")),
        WrongAnswer("powers of two: 29% padding", "answer = [64, 128, 256, 512]", ("29.0%",)),
        WrongAnswer("equal-count buckets", "answer = [64, 105, 176, 512]", ("36.0%",)),
        WrongAnswer("too many buckets", "answer = [32, 64, 96, 128, 192, 256, 384, 512]", ("you have 8",)),
        WrongAnswer("a string", 'answer = "96, 160, 256, 512"', ("string",)),
    ],
    "10.probe_set": [
        WrongAnswer("random values only (misses the min edge)", '''
def probes(example, dims):
    g = torch.Generator().manual_seed(0)
    return [torch.randn(example.shape, generator=g) for _ in range(8)]


answer = probes
''', ("one_frame", "all match", "min and max")),
        WrongAnswer("the edges, but only positive values", '''
def probes(example, dims):
    out = [example.abs()]
    for axis, (lo, hi) in dims.items():
        for size in (lo, hi):
            shape = list(example.shape)
            shape[axis] = size
            out.append(torch.rand(shape))
    return out


answer = probes
''', ("'sign'", "all match", "signs")),
        WrongAnswer("only the minimum edge", '''
def probes(example, dims):
    out = [torch.randn(example.shape), -example.abs()]
    for axis, (lo, hi) in dims.items():
        shape = list(example.shape)
        shape[axis] = lo
        out.append(torch.randn(shape))
    return out


answer = probes
''', ("no_max", "max")),
    ],
}

TRACK = [e for e in exercises.catalog() if e.lesson[:2] in {"06", "07", "08", "09", "10"}]


@pytest.mark.parametrize("exercise", TRACK, ids=lambda e: e.id)
def test_exercise_grades_by_behaviour(exercise):
    assert_exercise_behaves(exercise, WRONG.get(exercise.id, []))


def test_every_exercise_of_the_track_has_wrong_answers():
    assert {e.id for e in TRACK} == set(WRONG)


@pytest.mark.parametrize("exercise", TRACK, ids=lambda e: e.id)
def test_a_cached_check_is_fast(exercise):
    exercise.check(exercise.solution)  # builds (or loads) every program the check needs
    start = time.perf_counter()
    assert exercise.check(exercise.solution).passed
    assert time.perf_counter() - start < 2.0, f"{exercise.id}: a cached check took {time.perf_counter() - start:.1f} s"
