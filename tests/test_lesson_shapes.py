"""Lessons 06–08 (helpers.lessons.shapes) on the real exporter and runtime."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
import torch
from torch.export import Dim

import helpers
from helpers import models as M
from helpers.lessons import shapes as S

HW = {"x": {2: Dim("height", min=32, max=128), 3: Dim("width", min=32, max=128)}}


@pytest.fixture(scope="session")
def vision():
    return S.vision_program()


@pytest.fixture(scope="session")
def segmenters():
    _, static, frame, _ = S.segmenter_program()
    model, dynamic, _, dynamic_shapes = S.segmenter_program(max_side=128)
    return model, static, dynamic, frame, dynamic_shapes


# ----- 06 -----------------------------------------------------------------------------------------
def test_static_export_rejects_every_other_frame_size(vision):
    model, art, frame = vision
    assert art.runtime_input_shapes() == [(1, 3, 64, 64)]
    for h, w in [(48, 64), (32, 128), (32, 32), (96, 96)]:
        row = helpers.check_one(model, art, (S.camera_frame(h, w),))
        assert row.status == "rejected"
        assert "Attempted to resize a static tensor" in row.runtime_message
        assert f"received (1, 3, {h}, {w})" in row.runtime_message
    assert helpers.check_one(model, art, (frame,)).status == "match"


def test_frame_tokens_graph_has_literal_sizes():
    ep = torch.export.export(S.FrameTokens(), (S.camera_frame(64, 64),))
    code = ep.graph_module.code
    assert "[1, 3, 4096]" in code and "linspace.default(0, 1, 4096" in code
    assert not ep.range_constraints


def test_read_signature_from_a_saved_file(vision, tmp_path):
    _, art, _ = vision
    meta = S.read_signature(art.save(tmp_path / "m.pte"))["forward"]
    info = meta.input_tensor_meta(0)
    assert tuple(info.sizes()) == (1, 3, 64, 64) and info.nbytes() == 1 * 3 * 64 * 64 * 4
    assert "TensorInfo(sizes=[1, 3, 64, 64]" in repr(meta)
    assert repr(S.read_signature(art)) == repr(S.read_signature(art.save(tmp_path / "n.pte")))


def test_memory_plan_reuses_offsets_and_fits_the_arena(vision):
    model, _, frame = vision
    portable = helpers.lower(model, (frame,), backend="portable")
    plan = S.memory_plan(portable)
    assert plan[0]["shape"] == (1, 3, 64, 64) and plan[0]["offset"] == 0
    assert [r["#"] for r in plan] == list(range(1, len(plan) + 1))  # numbered from 1, as the plot labels them
    assert [r["made by"] for r in plan[:3]] == ["input", "convolution", "relu"]
    relu = plan[2]
    assert relu["offset"] == plan[0]["offset"]  # the lesson's sentence: the relu output reuses the input's bytes
    offsets = [r["offset"] for r in plan]
    assert len(set(offsets)) < len(offsets)  # bytes are reused by tensors that are not alive together
    assert max(r["offset"] + r["bytes"] for r in plan) <= portable.planned_memory_bytes()
    assert S.plot_memory_plan(plan).axes


def test_camera_widget_headless(vision):
    explorer, interactions = S.widget_demo()
    assert explorer.verdict == "match"
    for values, expected in interactions:
        row = explorer.set(**values)
        assert row.verdict == expected, values
        assert f"data-verdict='{expected}'" in explorer.output.value
    explorer.set(resolution=(48, 64), preprocess="none")
    assert "letterbox" in explorer.output.value and "static tensor" in explorer.output.value
    explorer.set(preprocess="letterbox")
    assert explorer.verdict == "match" and "letterboxed" in explorer.output.value


# ----- 07 -----------------------------------------------------------------------------------------
def test_runtime_does_not_check_min_but_the_host_does():
    model = M.ShapeBranch()
    clip = torch.randn(1, 8, 4, generator=torch.Generator().manual_seed(0))
    art = helpers.lower(model, (clip,), dynamic_shapes={"x": {1: Dim("frames", min=2, max=16)}})
    one = torch.randn(1, 1, 4)
    (out,) = art.run_raw(one)
    assert torch.isnan(out).all() and not torch.isnan(model(one)).any()
    with pytest.raises(helpers.InputContractError, match="below the Dim's minimum"):
        art.run(one)
    with pytest.raises(helpers.RuntimeRejectedError, match="maximum capacity"):
        art.run_raw(torch.randn(1, 17, 4))


def test_runtime_checks_capacity_not_axes(vision):
    model, _, frame = vision
    bounded = helpers.lower(model, (frame,), dynamic_shapes=HW)
    assert S.read_signature(bounded)["forward"].input_tensor_meta(0).sizes() == (1, 3, 128, 128)
    silently = helpers.check_one(model, bounded, (torch.rand(1, 3, 160, 64),))
    assert silently.silently_accepted and silently.status == "match"
    assert helpers.check_one(model, bounded, (torch.rand(1, 3, 200, 200),)).status == "rejected"
    with pytest.raises(helpers.InputContractError, match="above the Dim's max"):
        bounded.run(torch.rand(1, 3, 160, 64))


def test_dim_modes_auto_narrows_and_unbounded_plans_the_example():
    model = M.ShapeBranch()
    clip = torch.randn(1, 8, 4)
    rows = {r["spec"]: r for r in S.dim_modes(model, (clip,), "x", 1, {
        "auto": Dim.AUTO, "static": Dim.STATIC, "free": Dim("frames"), "bounded": Dim("frames", min=2, max=16)})}
    assert rows["auto"]["range"] == "[2, ∞]" and rows["auto"]["planned"] == 8
    assert rows["static"]["recorded"] == "static 8"
    assert rows["free"]["planned"] == 8
    assert rows["bounded"]["range"] == "[2, 16]" and rows["bounded"]["planned"] == 16
    loop = {r["spec"]: r for r in S.dim_modes(M.BatchLoop(), (torch.randn(3, 4),), "x", 0,
                                              {"auto": Dim.AUTO, "dynamic": Dim.DYNAMIC})}
    assert loop["auto"]["recorded"] == "static 3"
    assert loop["dynamic"]["recorded"] == "export error" and "specialized" in loop["dynamic"]["note"]


@pytest.mark.parametrize("model, suggestion", [(S.ChunkMean(), "T = 4*_T"), (S.HalfDiff(), "T = 2*_T")])
def test_size_arithmetic_adds_guards_with_a_derived_fix(model, suggestion):
    d = helpers.diagnose_export(model, (torch.randn(2, 32),), {"x": {1: Dim("T", min=4, max=64)}}, lower=False)
    assert d.kind == "constraint_violation" and suggestion in d.suggested_fixes


def test_derived_dim_and_rewrite_match_eager():
    chunk = Dim("chunk", min=1, max=16)
    art = helpers.lower(S.ChunkMean(), (torch.randn(2, 32),), dynamic_shapes={"x": {1: 4 * chunk}})
    assert helpers.compare(S.ChunkMean(), art, [torch.randn(2, t) for t in (4, 36, 64)]).ok
    L = Dim("L", min=1, max=16)
    x = torch.randn(2, 4, 8)
    art = helpers.lower(S.ChunkedMean(), (x,), dynamic_shapes={"x": {2: L}})
    assert helpers.compare(S.ChunkedMean(), art, helpers.probe_inputs((x,), {"x": {2: L}})).ok_within_contract


# ----- 08 -----------------------------------------------------------------------------------------
def test_dynamic_variant_delegates_no_more_nodes(segmenters):
    _, static, dynamic, _, _ = segmenters
    s, d = static.delegation(), dynamic.delegation()
    assert d.delegated_nodes <= s.delegated_nodes
    assert s.portable_nodes == 0 and s.delegated_subgraphs == 1
    assert "aten_upsample_bilinear2d_vec" in d.portable_ops() and d.delegated_subgraphs == 2


def test_arena_grows_with_max(segmenters):
    _, static, _, _, _ = segmenters
    arena = S.arena_vs_max([64, 128, 256], lambda m: S.segmenter_program(max_side=m)[1])
    assert arena[0] < arena[1] < arena[2]
    assert arena[0] >= static.planned_memory_bytes()


def test_segmenter_parity_inside_both_contracts(segmenters):
    model, static, dynamic, frame, dynamic_shapes = segmenters
    assert helpers.compare(model, static, helpers.probe_inputs((frame,))).ok_within_contract
    report = helpers.compare(model, dynamic, helpers.probe_inputs((frame,), dynamic_shapes))
    assert report.ok_within_contract  # float rounding on the ±1e4 probe is not a divergence
    edges = [r for r in report if "min-1" in r.label or "max+1" in r.label]
    # one axis one step beyond its bound still fits the planned 128×128 capacity: the runtime runs it
    assert len(edges) == 4 and all(r.silently_accepted for r in edges)
    empty = [r for r in report if r.shapes.startswith("(0,")]
    assert empty and all(r.status == "refused" and "zero-size" in r.runtime_message for r in empty)


def test_declined_reasons_are_the_partitioners_words(segmenters):
    _, _, dynamic, _, _ = segmenters
    assert S.declined_reasons(dynamic) == {"aten_upsample_bilinear2d_vec": ["dynamic output sizes are not supported"]}
    x = torch.randn(2, 32)
    half = helpers.lower(S.HalfDiff(), (x,), dynamic_shapes={"x": {1: 2 * Dim("half", min=1, max=32)}})
    reasons = S.declined_reasons(half)
    assert reasons["aten_slice_copy_tensor"] == ["invalid dtype"]  # a capitalised overload is still matched
    assert helpers.lower(S.HalfDiff(), (x,)).delegation().portable_nodes == 0  # static: all on XNNPACK


def test_low_res_segmenter_plus_host_upsample_is_the_segmenter(segmenters):
    model, _, dynamic, frame, dynamic_shapes = segmenters
    low = helpers.lower(S.LowResSegmenter(), (frame,), dynamic_shapes=dynamic_shapes)
    assert low.delegation().portable_nodes == 0
    assert low.planned_memory_bytes() < dynamic.planned_memory_bytes()
    for h, w in [(32, 32), (48, 64), (128, 96), (36, 100)]:
        f = S.camera_frame(h, w)
        (out,) = low.run(f)
        torch.testing.assert_close(S.upsample_on_host(out), model(f), atol=1e-5, rtol=1e-5)


def test_ratio_sentence_calls_a_difference_only_when_every_round_agrees():
    assert "slower in every round" in S.ratio_sentence("a/b", [2.0, 2.2, 1.9], [1.0, 1.0, 1.0])
    assert "faster in every round" in S.ratio_sentence("a/b", [0.5, 0.6], [1.0, 1.0])
    mixed = S.ratio_sentence("a/b", [1.3, 0.8, 1.0], [1.0, 1.0, 1.0])
    assert "no consistent difference" in mixed and "0.80× to 1.30×" in mixed
    assert "no consistent difference" in S.ratio_sentence("a/b", [1.02, 1.03], [1.0, 1.0])


def test_latency_rounds_interleaves_and_measures_each_program(vision):
    _, art, frame = vision
    rounds = S.latency_rounds({"a": (art, (frame,)), "b": (art, (frame,))}, rounds=2, repeat=3, warmup=1)
    assert set(rounds) == {"a", "b"} and all(len(v) == 2 and all(t > 0 for t in v) for v in rounds.values())


def test_median_latency_is_positive(vision):
    _, art, frame = vision
    assert 0 < S.median_latency_ms(art, (frame,), repeat=5, warmup=1) < 1000


def test_the_flatbuffer_tells_static_from_bounded_where_methodmeta_cannot():
    from helpers.serialized import input_dynamism

    frame = S.camera_frame(64, 64)
    static = helpers.lower(M.TinyVision(), (frame,))
    bounded = helpers.lower(M.TinyVision(), (frame,), dynamic_shapes={"x": {2: Dim("height", min=32, max=64)}})
    sizes = {name: tuple(S.read_signature(art)["forward"].input_tensor_meta(0).sizes())
             for name, art in (("static", static), ("bounded", bounded))}
    assert sizes == {"static": (1, 3, 64, 64), "bounded": (1, 3, 64, 64)}  # MethodMeta: the max, either way
    with tempfile.TemporaryDirectory() as tmp:
        read = {name: input_dynamism(art.save(Path(tmp) / f"{name}.pte").read_bytes())
                for name, art in (("static", static), ("bounded", bounded))}
    assert read == {"static": {"forward": ["STATIC"]}, "bounded": {"forward": ["DYNAMIC_BOUND"]}}
