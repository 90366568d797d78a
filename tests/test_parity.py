"""compare / probe_inputs / ParityReport on the real runtime."""

from __future__ import annotations

import pytest
import torch
from torch.export import Dim

import helpers
from helpers import models as M

G = torch.Generator().manual_seed(3)


def test_a_config_flag_flipped_after_export_diverges(static_config):
    _, art, (x,) = static_config
    flipped = M.ConfigBranch(use_residual=False)  # same weights (same seed), other flag
    report = helpers.compare(flipped, art, helpers.probe_inputs((x,)))
    in_contract = [r for r in report if r.within_contract]
    assert not report.ok
    assert sum(r.status == "diverge" for r in in_contract) >= len(in_contract) - 1  # zeros may coincide
    assert report.counts()["diverge"] >= 7


def test_same_model_matches_inside_the_contract(static_config):
    model, art, (x,) = static_config
    report = helpers.compare(model, art, helpers.probe_inputs((x,)))
    assert report.ok_within_contract and not report.ok  # the nudged static axes are outside
    assert {r.status for r in report if not r.within_contract} <= {"rejected", "eager_error"}


def test_an_unrolled_loop_rejects_other_batch_sizes():
    model = M.BatchLoop()
    x = torch.randn(3, 4, generator=G)
    art = helpers.lower(model, (x,))
    assert art.graph().count("aten.linear") == 3  # unrolled: one linear per example row
    for batch in (1, 2, 4, 5):
        other = torch.randn(batch, 4, generator=G)
        row = helpers.check_one(model, art, (other,))
        assert row.status == "rejected" and "static tensor" in row.runtime_message
        with pytest.raises(helpers.InputContractError, match="axis 0"):
            art.run(other)
    assert helpers.check_one(model, art, (x,)).status == "match"


def test_probe_inputs_cover_bounds_and_move_shared_dims_together(token_pool):
    _, _, example, dynamic = token_pool
    probes = helpers.probe_inputs(example, dynamic)
    labels = [p.label for p in probes]
    for expected in ("seq = 2 (min)", "seq = 33 (middle)", "seq = 64 (max)", "seq = 65 (max+1, outside)",
                     "seq = 1 (min-1, outside)", "values: negative", "values: zeros", "values: extremes"):
        assert expected in labels
    for p in probes:
        if p.label.startswith("seq ="):
            ids, mask = p.args
            assert ids.shape[1] == mask.shape[1]
        if p.label.startswith("values"):
            ids, _ = p.args
            assert ids.dtype == torch.int64 and int(ids.min()) >= int(example[0].min())
            assert int(ids.max()) <= int(example[0].max())  # token ids stay valid
    assert any("static 1+1" in label for label in labels)


def test_probe_inputs_are_deterministic_for_a_seed(token_pool):
    _, _, example, dynamic = token_pool
    a, b, c = (helpers.probe_inputs(example, dynamic, seed=s) for s in (0, 0, 1))
    assert [p.label for p in a] == [p.label for p in b]
    assert all(torch.equal(x, y) for pa, pb in zip(a, b) for x, y in zip(pa.args, pb.args))
    assert any(not torch.equal(x, y) for pa, pc in zip(a, c) for x, y in zip(pa.args, pc.args))


def test_probe_inputs_needs_the_model_for_a_partial_dict():
    seq = Dim("seq", min=2, max=8)
    example = (torch.zeros(1, 4, dtype=torch.long), torch.ones(1, 4))
    with pytest.raises(ValueError, match="model="):
        helpers.probe_inputs(example, {"mask": {1: seq}})
    probes = helpers.probe_inputs(example, {"mask": {1: seq}}, model=M.TokenPool())
    assert any(p.label == "seq = 8 (max)" and p.args[1].shape == (1, 8) and p.args[0].shape == (1, 4)
               for p in probes)


def test_token_pool_report(token_pool):
    model, art, example, dynamic = token_pool
    report = helpers.compare(model, art, helpers.probe_inputs(example, dynamic))
    assert report.ok_within_contract
    by_label = {r.label: r for r in report}
    assert by_label["seq = 65 (max+1, outside)"].status == "rejected"
    assert "capacity" in by_label["seq = 65 (max+1, outside)"].runtime_message
    below = by_label["seq = 1 (min-1, outside)"]
    assert below.silently_accepted and not below.within_contract  # the runtime does not check min
    frame = report.to_dataframe()
    assert list(frame.columns[:4]) == ["input", "shapes", "status", "within_contract"]
    assert len(frame) == len(report)
    html = report._repr_html_()
    assert "#fde9c4" in html and "rejected" in html and "outside contract" in html


def test_min_edge_probe_catches_the_size_one_specialization():
    """Export assumes dynamic sizes are not 1 while tracing, so `if x.shape[1] > 1` is decided
    without a guard even when the declared range includes 1: only the min-edge probe sees it."""
    model = M.ShapeBranch()
    frames = Dim("frames", min=1, max=16)
    art = helpers.lower(model, (torch.randn(1, 8, 4, generator=G),), dynamic_shapes={"x": {1: frames}})
    report = helpers.compare(model, art, helpers.probe_inputs((torch.randn(1, 8, 4),), {"x": {1: frames}}))
    row = next(r for r in report if r.label == "frames = 1 (min)")
    assert row.within_contract and row.status == "diverge" and "NaN" in row.runtime_message
    assert not report.ok_within_contract


def test_eager_error_rows_and_plain_tensor_inputs(static_config):
    model, art, _ = static_config
    report = helpers.compare(model, art, [torch.randn(2, 5), (torch.randn(2, 4),)])
    assert [r.status for r in report] == ["eager_error", "match"]
    assert "RuntimeError" in report[0].eager_message
    assert report[0].label == "input 0"


class EightWide(torch.nn.Module):
    """Averages x (B, 8·k) in chunks of 8: only lengths that are a multiple of 8 are valid."""

    def forward(self, x):
        return x.reshape(x.shape[0], -1, 8).abs().mean(dim=2)


def test_a_derived_dim_is_named_bounded_and_probed_through_its_root():
    chunk = Dim("chunk", min=2, max=32)
    x = torch.randn(2, 64, generator=G)
    art = helpers.lower(EightWide(), (x,), dynamic_shapes={"x": {1: 8 * chunk}})
    contract = art.input_contract()
    assert contract.signature() == "forward(x: float32[2, 8*chunk∈[16,256]])"
    for probes in (helpers.probe_inputs((x,), {"x": {1: 8 * chunk}}),
                   helpers.probe_inputs((x,), contract=contract)):
        sizes = {p.label: p.args[0].shape[1] for p in probes if p.label.startswith("chunk =")}
        assert sizes == {"chunk = 2 (min)": 16, "chunk = 17 (middle)": 136, "chunk = 32 (max)": 256,
                         "chunk = 33 (max+1, outside)": 264, "chunk = 1 (min-1, outside)": 8}
    with pytest.raises(helpers.InputContractError, match="form 8\\*chunk"):
        art.run(torch.randn(2, 20))


def test_a_static_axis_next_to_a_dynamic_one_is_only_capacity_checked_by_the_runtime():
    """Planned for 2×256 elements, a batch of 3×64 fits: the runtime runs it, silently and wrongly
    (the reshape kept the exported batch of 2)."""
    chunk = Dim("chunk", min=2, max=32)
    x = torch.randn(2, 64, generator=G)
    for backend in ("portable", "xnnpack"):
        art = helpers.lower(EightWide(), (x,), dynamic_shapes={"x": {1: 8 * chunk}}, backend=backend)
        row = helpers.check_one(EightWide(), art, (torch.randn(3, 64, generator=G),))
        assert not row.within_contract and row.silently_accepted and row.status == "diverge", backend
        assert row.pte_output[0].shape == (2, 12) and row.eager_output[0].shape == (3, 8)


def test_tied_axes_get_a_mismatch_probe(token_pool):
    model, art, example, dynamic = token_pool
    probes = helpers.probe_inputs(example, dynamic)
    (tie,) = [p for p in probes if "differs across tied axes" in p.label]
    ids, mask = tie.args
    assert ids.shape[1] + 1 == mask.shape[1]
    row = helpers.check_one(model, art, tie.args)
    assert not row.within_contract and "must equal ids axis 1" in row.contract_message
    assert row.status == "eager_error"  # eager refuses too: (1, 33, 8) * (1, 34, 1) does not broadcast
    assert "undefined behaviour" in row.runtime_message  # and the raw run never reached XNNPACK


def test_contradictory_shapes_never_reach_xnnpack_and_poison_later_programs(token_pool):
    """Regression: below-min then a tie mismatch used to break every XNNPACK program loaded afterwards."""
    model, art, example, dynamic = token_pool
    probes = {p.label: p for p in helpers.probe_inputs(example, dynamic)}
    for label in ("seq = 1 (min-1, outside)", "seq differs across tied axes: 33 vs 34 (outside)",
                  "input 0 axis 0 = 2 (static 1+1, outside)", "seq differs across tied axes: 33 vs 34 (outside)"):
        helpers.check_one(model, art, probes[label].args)
    fresh = M.TinyVision(seed=9)
    x = torch.randn(1, 3, 24, 24, generator=G)
    assert helpers.check_one(fresh, helpers.lower(fresh, (x,)), (x,)).status == "match"


def test_extreme_inputs_do_not_read_as_divergence_but_real_differences_do():
    model = M.TinyVision()
    x = torch.randn(1, 3, 32, 32, generator=G)
    art = helpers.lower(model, (x,))
    extremes = torch.where(torch.rand(1, 3, 32, 32, generator=G) > 0.5, 1e4, -1e4)
    assert helpers.check_one(model, art, (extremes,)).status == "match"
    other = M.TinyVision(seed=1)  # other weights: a real difference at every magnitude
    assert helpers.check_one(other, art, (extremes,)).status == "diverge"
    assert helpers.check_one(other, art, (x,)).status == "diverge"


def test_a_static_axis_probe_names_its_input(token_pool):
    """With the model (or the program's contract) the probes say which input they change, as the contract does."""
    model, art, example, dynamic = token_pool
    named = [p.label for p in helpers.probe_inputs(example, dynamic, model=model) if "(static" in p.label]
    from_contract = [p.label for p in helpers.probe_inputs(example, dynamic, contract=art.input_contract())
                     if "(static" in p.label]
    assert named and named == from_contract
    assert all(label.startswith(("ids axis", "mask axis")) for label in named), named
    anonymous = [p.label for p in helpers.probe_inputs(example, dynamic) if "(static" in p.label]
    assert anonymous[0].startswith("input 0 axis 0")
