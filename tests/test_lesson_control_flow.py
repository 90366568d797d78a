"""Lessons 01–02 (helpers.lessons.control_flow) on the real exporter and runtime, and lesson 01's widget."""

from __future__ import annotations

import contextlib
import io

import pytest
import torch
from torch.export import Dim

import helpers
from helpers import course
from helpers import models as M
from helpers.lessons import control_flow as cf

G = torch.Generator().manual_seed(5)


def rand(*shape):
    return torch.randn(*shape, generator=G)


@pytest.fixture(scope="module")
def demo():
    return course.lesson(1).widget_demo()


def test_source_and_graph_shows_only_the_taken_branch():
    model = M.ConfigBranch(use_residual=False)
    art = helpers.lower(model, (rand(2, 4),))
    view = cf.source_and_graph(model, art)
    assert "if self.use_residual:" in view.source
    assert "aten.add" not in view.graph and "aten.relu" in view.graph
    assert "= None" not in view.graph  # tidied
    assert "<pre" in view._repr_html_() and "forward() as written" in repr(view)


def test_counted_mean_reads_only_the_baked_number_of_items():
    model = cf.CountedMean()
    art = cf.quiet_lower(model, (rand(3, 4), 3), dynamic_shapes={"x": {0: Dim("items", min=3, max=8)}, "n": None})
    six = rand(6, 4)
    with pytest.raises(helpers.RuntimeRejectedError, match="same value"):
        art.run_raw(six, 6)
    (out,) = art.run_raw(six, 3)
    torch.testing.assert_close(out, model(six[:3], 3).detach(), atol=1e-5, rtol=1e-5)
    assert not torch.allclose(out, model(six, 6), atol=1e-3)  # not what eager computes with n = len(x)
    with pytest.raises(helpers.RuntimeRejectedError, match="out of range"):
        art.run_raw(rand(2, 4), 3)  # below min: the runtime does not check it, the kernel does


def test_the_vectorised_fixes_match_the_original_loops():
    batch = Dim("batch", min=1, max=8)
    art = helpers.lower(cf.BatchLoopVectorized(), (rand(3, 4),), dynamic_shapes={"x": {0: batch}})
    report = helpers.compare(M.BatchLoop(), art, helpers.probe_inputs((rand(3, 4),), {"x": {0: batch}}))
    assert report.ok_within_contract and art.graph().count("aten.linear") == 1
    counted = cf.CountedMean()
    art_mean = helpers.lower(cf.CountedMeanVectorized(), (rand(3, 4),),
                             dynamic_shapes={"x": {0: Dim("items", min=1, max=8)}})
    for n in (1, 2, 5, 8):
        sample = rand(n, 4)
        torch.testing.assert_close(art_mean.run(sample)[0], counted(sample, n).detach(), atol=1e-5, rtol=1e-5)


def test_triage_fails_on_its_input_check_first_and_draft_export_lists_both_decisions():
    x = rand(3, 4)
    first = helpers.diagnose_export(cf.Triage(), (x,))
    assert first.kind == "data_dependent" and "torch.isnan(x).any()" in first.source_line
    draft = cf.draft_export_decisions(cf.Triage(), (x,))
    # Every issue in one report (this failed while helpers silenced torch's trace log, which draft_export reads).
    assert draft.issues == (("Data dependent error", "if torch.isnan(x).any():"),
                            ("Data dependent error", "if x.mean() > 0:")), draft
    lines = [line for line, _ in draft.decisions]
    assert any("isnan" in line for line in lines) and any("x.mean() > 0" in line for line in lines), lines
    assert all("assumed" in expr for _, expr in draft.decisions)


def test_compile_breaks_the_graph_where_export_fails():
    both = cf.compile_vs_export(M.ScaleOrShift(), {"pos": torch.ones(3, 4), "neg": -torch.ones(3, 4)})
    assert (both.graphs, both.graph_breaks) == (2, 1) and all(both.compiled_matches.values())
    assert both.export_error.startswith("GuardOnDataDependentSymNode") and "\n" not in both.export_error
    assert "graph break" in repr(both)


def test_torch_check_on_a_count_exports_and_is_not_enforced_on_device():
    clip = rand(2, 8)
    with pytest.raises(Exception, match="data-dependent"):
        with contextlib.redirect_stderr(io.StringIO()):
            torch.export.export(cf.ValidMean(), (clip, torch.tensor([5])))
    art = helpers.lower(cf.ValidMeanChecked(), (clip, torch.tensor([5])))
    assert "_assert_scalar" in art.graph()
    for k in range(1, 9):
        assert helpers.check_one(cf.ValidMean(), art, (clip, torch.tensor([k]))).status == "match"
    # outside the promise: the runtime does not check the assertion, the program averages nothing
    assert helpers.check_one(cf.ValidMean(), art, (clip, torch.tensor([0]))).status == "diverge"


def test_torch_check_on_a_semantic_branch_exports_one_side_and_diverges():
    x = rand(3, 4)
    art = helpers.lower(cf.ScaleOrShiftChecked(), (x.abs() + 0.1,))
    assert art.graph().count("aten.linear") == 1
    assert helpers.check_one(M.ScaleOrShift(), art, (x.abs() + 0.1,)).status == "match"
    assert helpers.check_one(M.ScaleOrShift(), art, (-x.abs() - 0.1,)).status == "diverge"


def test_value_probes_keep_the_example_shape_and_shifted_moves_the_sign():
    x = rand(3, 4)
    probes = cf.value_probes((x,))
    assert len(probes) == 9 and all(p.args[0].shape == x.shape for p in probes)
    assert {p.label for p in cf.shifted(x)} == {"shifted -2.0", "shifted +2.0"}


def test_stock_lowering_fails_on_a_cond_with_linear_layers_and_lower_does_not():
    from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
    from executorch.exir import to_edge_transform_and_lower

    x = rand(2, 8)
    ep = torch.export.export(M.CondLinear(), (x,))
    with pytest.raises(RuntimeError, match="was not decomposed or delegated"):
        to_edge_transform_and_lower(ep, partitioner=[XnnpackPartitioner()])
    art = helpers.lower(M.CondLinear(), (x,))
    torch.testing.assert_close(art.run(x)[0], M.CondLinear()(x).detach(), atol=1e-5, rtol=1e-5)


def test_loud_failures_are_classified():
    x = rand(3, 4)
    assert helpers.diagnose_export(cf.MedianCenter(), (x,)).kind == "unsupported_operator"
    d = helpers.diagnose_export(cf.BatchGate(), (rand(8, 4),), {"x": {0: Dim("batch", min=1, max=16)}})
    assert d.kind == "constraint_violation" and d.suggested_fixes == ["batch = Dim('batch', min=5, max=16)"]
    d = helpers.diagnose_export(cf.SortValues(), (rand(5),), backend="portable")
    assert (d.kind, d.stage) == ("unsupported_operator", "load")


def test_batch_gate_cond_keeps_both_paths_for_every_batch():
    batch = Dim("batch", min=1, max=16)
    art = helpers.lower(cf.BatchGateCond(), (rand(8, 4),), dynamic_shapes={"x": {0: batch}})
    for n in (1, 4, 5, 16):
        sample = rand(n, 4)
        torch.testing.assert_close(art.run(sample)[0], cf.BatchGate()(sample).detach(), atol=1e-5, rtol=1e-5)


def test_show_export_error_keeps_stderr_clean():
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        exc = cf.show_export_error(torch.export.export, M.WhileDouble(), (torch.rand(3),))
    assert exc is not None and "GuardOnDataDependentSymNode" in out.getvalue()
    assert err.getvalue() == ""  # torch prints the partial graph (with absolute paths) there


def test_verdict_line_and_branch_sides():
    art = helpers.lower(M.BatchLoop(), (rand(3, 4),))
    line = cf.verdict_line(helpers.check_one(M.BatchLoop(), art, (rand(4, 4),)))
    assert line.startswith("rejected") and "static tensor" in line
    probes = [helpers.Probe("p", (torch.ones(2),)), helpers.Probe("n", (-torch.ones(2),)),
              helpers.Probe("bad", (torch.ones(2, 2, 2),))]
    assert cf.branch_sides(probes, lambda t: t.view(2).sum() > 0) == {"true": 1, "false": 1, "n/a": 1}


# ----- the widget, headless, with the real runtime behind it ------------------------------------------
def test_widget_verdicts_follow_the_controls(demo):
    explorer, interactions = demo
    assert len(interactions) >= 8
    for values, expected in interactions:
        row = explorer.set(**values)
        assert explorer.verdict == expected, (values, row)
        assert f"data-verdict='{expected}'" in explorer.output.value
        assert "why" in explorer.output.value
        assert explorer.artifact is explorer.traps[values["trap"]].artifact
    assert {v for _, v in interactions} >= {"match", "diverge", "rejected"}


def test_widget_explains_and_labels_outside_contract(demo):
    explorer, _ = demo
    explorer.set(trap="shape if", values="positive", size=1, flag=True, steps=2)
    assert explorer.verdict == "diverge" and "NaN" in explorer.output.value
    explorer.set(size=0)  # an empty clip: undefined behaviour in the delegate, refused on the host
    assert explorer.verdict == "refused" and "undefined behaviour" in explorer.output.value
    explorer.set(trap="config flag", size=2, flag=False, values="negative")
    assert explorer.verdict == "diverge" and "use_residual=False" in explorer.output.value
    explorer.set(values="zeros")
    assert explorer.verdict == "match" and "One sample proves nothing" in explorer.output.value
    explorer.set(trap="Python scalar", steps=4)
    assert explorer.verdict == "rejected" and "same value" in explorer.output.value
    assert "ScalarRepeat" in explorer.exported.value
    assert explorer._repr_mimebundle_()["text/plain"].startswith("ParityExplorer — verdict now:")


def test_widget_interactions_never_export(demo, monkeypatch):
    """An interaction runs the loaded program and eager, never export: what keeps it quick (its latency is measured
    by benchmarks/bench_widgets.py and the browser tests, not asserted here)."""
    explorer, interactions = demo

    def no_export(*args, **kwargs):
        raise AssertionError("a widget interaction must not export")

    monkeypatch.setattr(torch.export, "export", no_export)
    for values, expected in interactions * 2:
        explorer.set(**values)
        assert explorer.verdict == expected


def test_predict_then_reveal_on_a_flag_switched_after_export():
    from helpers.widgets import PredictThenReveal

    x = rand(2, 4)
    art = helpers.lower(M.ConfigBranch(use_residual=False), (x,))

    def reveal():
        row = helpers.check_one(M.ConfigBranch(use_residual=True), art, (-x.abs() - 0.1,))
        return row.status, "the + x was never recorded"

    quiz = PredictThenReveal("flag switched on after export", ["match", "diverge", "rejected"], reveal)
    assert quiz.answer("diverge") is True and "data-verdict='diverge'" in quiz.result.value
    assert quiz.answer("rejected") is False and "you predicted rejected" in quiz.result.value
