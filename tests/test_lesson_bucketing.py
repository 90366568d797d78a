"""Lesson 09 (helpers.lessons.bucketing): letterbox, buckets as methods and files, the trade-off, the widget."""

from __future__ import annotations

import pytest
import torch

import helpers
from helpers.lessons import bucketing as B
from helpers.lessons import shapes as S


@pytest.fixture(scope="session")
def program():
    return B.bucket_program()


@pytest.mark.parametrize("h, w", [(48, 64), (64, 48), (36, 64), (120, 160), (64, 64), (16, 100)])
def test_letterbox_keeps_aspect_and_fills_the_static_shape(h, w):
    frame = S.camera_frame(h, w)
    boxed = B.letterbox(frame, 64)
    assert boxed.shape == (1, 3, 64, 64)
    if (h, w) == (64, 64):
        assert torch.equal(boxed, frame)
    rows = (boxed.abs().sum(dim=(1, 3)) > 0).sum().item()
    cols = (boxed.abs().sum(dim=(1, 2)) > 0).sum().item()
    assert abs(rows / cols - h / w) < 0.1  # the picture keeps its aspect ratio; the rest is padding


def test_letterboxed_frames_run_on_the_static_export():
    model, art, _ = S.vision_program()
    frames = [(B.letterbox(S.camera_frame(h, w), 64),) for h, w in [(48, 64), (120, 160), (36, 64)]]
    assert helpers.compare(model, art, frames).ok
    assert art.delegation().portable_nodes == 0


def test_one_pte_has_one_static_method_per_bucket(program):
    assert program.methods == ("seq_128", "seq_256", "seq_512")
    for b in B.BUCKETS:
        assert program.runtime_input_shapes(B.method_name(b)) == [(1, b), (1, b)]
    arenas = [program.planned_memory_bytes(B.method_name(b)) for b in B.BUCKETS]
    assert arenas == sorted(arenas) and arenas[0] < arenas[-1]


@pytest.mark.parametrize("n", [1, 2, 127, 128, 129, 255, 256, 257, 511, 512])
def test_parity_on_every_bucket_edge(program, n):
    model = B.bucket_model()
    request = B.tokens(n)
    eager = model(request, torch.ones(1, n))
    d = B.dispatch(request, program)
    assert d.bucket == B.choose_bucket(n) and d.bucket >= n
    torch.testing.assert_close(d.output, eager, atol=1e-5, rtol=1e-5)


def test_separate_files_match_too_and_cost_the_weights_each_time(program):
    files = B.separate_programs()
    for n in (1, 128, 129, 512):
        torch.testing.assert_close(B.dispatch(B.tokens(n), files).output, B.dispatch(B.tokens(n), program).output)
    assert sum(a.nbytes for a in files.values()) > 2.5 * program.nbytes


def test_too_long_is_refused(program):
    with pytest.raises(ValueError, match="longer than the largest bucket"):
        B.dispatch(B.tokens(513), program)
    with pytest.raises(helpers.RuntimeRejectedError, match="static tensor"):  # the raw method refuses it too
        program.run_raw(B.tokens(513), torch.ones(1, 513), method="seq_512")


def test_padding_waste_and_sizes_move_in_the_right_direction():
    lengths = B.request_lengths()
    rows = B.tradeoff([(512,), (256, 512), (128, 256, 512)], lengths, latency_ms={128: 1.0, 256: 2.0, 512: 4.0})
    waste = [r["padding_waste"] for r in rows]
    one = [r["one_pte_bytes"] for r in rows]
    sep = [r["separate_files_bytes"] for r in rows]
    assert waste[0] > waste[1] > waste[2] > 0
    assert one[0] < one[1] < one[2] and sep[0] < sep[1] < sep[2]
    assert sep[2] - sep[0] > 10 * (one[2] - one[0])  # separate files repeat the weights; methods share them
    assert [r["mean_latency_ms"] for r in rows] == sorted([r["mean_latency_ms"] for r in rows], reverse=True)
    assert B.padding_waste([128, 256], (128, 256)) == 0.0
    assert B.padding_waste([64], (128,)) == 0.5


def test_bucket_widget_headless():
    explorer, interactions = B.widget_demo()
    for values, expected in interactions:
        row = explorer.set(**values)
        assert row.verdict == expected, values
        assert f"data-verdict='{expected}'" in explorer.output.value
    explorer.set(length=129, buckets=B.BUCKETS)
    assert explorer.bucket == 256 and "50% of the work is padding" in explorer.output.value
    assert "data-bucket='256'" in explorer.output.value
    explorer.set(length=40, buckets=(512,))
    assert explorer.bucket == 512 and "92% of the work is padding" in explorer.output.value
    explorer.set(length=600)
    assert explorer.verdict == "rejected" and "longer than the largest bucket" in explorer.output.value


def test_every_bucket_is_delegated_like_the_dynamic_program(program):
    from torch.export import Dim

    seq = Dim("seq", min=1, max=512)
    dynamic = helpers.lower(B.bucket_model(), B.pad_to(B.tokens(128), 128),
                            dynamic_shapes={"ids": {1: seq}, "mask": {1: seq}})
    for method in program.methods:
        assert program.delegation(method).portable_ops() == dynamic.delegation().portable_ops()
        assert set(S.declined_reasons(program, method)) == {"aten_embedding_default", "aten_sum_dim_int_list"}
    assert dynamic.planned_memory_bytes() == program.planned_memory_bytes("seq_512")


def test_equal_count_buckets_and_the_lessons_waste_numbers():
    lengths = B.request_lengths()
    equal = B.equal_count_buckets(lengths, 4, longest=512)
    assert equal == (64, 105, 176, 512)
    powers = (64, 128, 256, 512)
    assert B.padding_waste(lengths, equal) > B.padding_waste(lengths, powers) > 0.28  # the exercise's target
    assert B.padding_waste(lengths, (96, 160, 256, 512)) <= 0.28  # a better set exists within 4 buckets
    assert B.plot_lengths(lengths, {"powers": powers, "equal": equal}).axes


def test_latency_rounds_covers_every_bucket_set_and_the_dynamic_program(program):
    from torch.export import Dim

    seq = Dim("seq", min=1, max=512)
    dynamic = helpers.lower(B.bucket_model(), B.pad_to(B.tokens(128), 128),
                            dynamic_shapes={"ids": {1: seq}, "mask": {1: seq}})
    timing = B.latency_rounds([(512,), (128, 256, 512)], [40, 200, 500], dynamic, rounds=2, repeat=3, sample_every=2)
    assert set(timing) == {"512", "128/256/512", "dynamic"}
    assert all(len(v) == 2 and all(t > 0 for t in v) for v in timing.values())
