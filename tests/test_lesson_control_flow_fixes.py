"""Lessons 03–05 (helpers.lessons.control_flow_fixes): cond's rules, where vs cond cost, hoisting."""

from __future__ import annotations

import pytest
import torch

import helpers
from helpers import models as M
from helpers.lessons import control_flow_fixes as fixes
from helpers.timing import Spread, compare_speed, median_latency_ms

G = torch.Generator().manual_seed(9)


def rand(*shape):
    return torch.randn(*shape, generator=G)


@pytest.fixture(scope="module")
def rules():
    return fixes.check_cond_rules()


@pytest.mark.parametrize("rule, fragment", [
    ("both branches take the same operands", "Argument mismatch"),
    ("same number of outputs", "Unmatched output spec"),
    ("matching dtypes", "expected same dtype but got torch.float32 and torch.bool"),
    ("compatible shapes", "expected same dim but got 2 and 1"),
    ("no mutation of inputs", "input mutation"),
    ("no mutating what a branch closes over", "input mutation"),
    ("each branch must be exportable", "Data-dependent branching"),
])
def test_each_broken_rule_fails_export_with_its_own_message(rules, rule, fragment):
    result = rules[rule]
    assert result.outcome == "export error" and fragment in result.message, result


def test_closures_are_lifted_and_python_predicates_specialise(rules):
    assert rules["reading a tensor from outside operands (lifted)"].outcome == "exports"
    assert "lifted" in rules["reading a tensor from outside operands (lifted)"].message
    assert rules["predicate: a bool tensor or a SymBool"].outcome == "exports, specialised"
    assert "Python constant" in rules["predicate: a bool tensor or a SymBool"].message
    x = rand(3, 4)
    model = fixes.CondClosure()
    art = helpers.lower(model, (x,))
    probes = [helpers.Probe(str(s), (x + s,)) for s in (-3.0, 3.0)] + helpers.probe_inputs((x,))
    assert helpers.compare(model, art, probes).ok_within_contract
    assert "<table>" in rules._repr_html_() and "CondOutputDtype" in repr(rules)


def test_which_branch_ran_follows_the_predicate_at_run_time():
    model = M.ScaleOrShiftCond()
    x = rand(3, 4)
    art = helpers.lower(model, (x,))
    assert fixes.which_branch_ran(model, art, x.abs() + 0.1, model.a, model.b) == "true"
    assert fixes.which_branch_ran(model, art, -x.abs() - 0.1, model.a, model.b) == "false"
    assert fixes.which_branch_ran(model, art, torch.zeros(3, 4), model.a, model.b) == "false"


def test_where_computes_both_sides_and_cond_skips_one_measured():
    big = rand(32, 128)
    heavy_side, cheap_side = big.abs() + 0.1, -(big.abs() + 0.1)
    art_where = helpers.lower(fixes.HeavyWhere(), (big,))
    art_cond = helpers.lower(fixes.HeavyCond(), (big,))
    assert art_where.graph().count("aten.linear") == 6 and "where" in art_where.graph()
    assert art_where.delegation().delegated_nodes >= 12 and art_cond.delegation().delegated_nodes == 0
    for sample in (heavy_side, cheap_side):  # same function, both sides
        torch.testing.assert_close(art_where.run(sample)[0], art_cond.run(sample)[0], atol=1e-4, rtol=1e-4)
    t = {label: {name: median_latency_ms(art, (x,), repeat=30) for name, art in (("where", art_where), ("cond", art_cond))}
         for label, x in (("heavy", heavy_side), ("cheap", cheap_side))}
    # cheap side: where still pays for the MLP, cond skips it
    assert t["cheap"]["where"] > 2 * t["cheap"]["cond"], t
    # heavy side: the MLP on XNNPACK (where) beats the same MLP on portable kernels (cond)
    assert t["heavy"]["cond"] > 2 * t["heavy"]["where"], t


def test_hoisted_methods_are_fully_delegated_and_match_the_cond_model():
    x = rand(2, 8)
    cond_model = M.CondLinear()
    art_cond = helpers.lower(cond_model, (x,))
    art = helpers.lower_methods({"positive": (M.StraightLinear(), (x,)), "negative": (fixes.StraightLinearB(), (x,))})
    assert all(art.delegation(m).coverage == 1.0 for m in ("positive", "negative"))
    assert art_cond.delegation().coverage < 0.5
    probes = helpers.probe_inputs((x,)) + [helpers.Probe(str(s), (x + s,)) for s in (-2.0, 2.0)]
    report = fixes.hoisted_parity(cond_model, art, probes)
    assert report.ok_within_contract, report
    picked = {r.label.rsplit("→ ", 1)[1] for r in report if r.within_contract}
    assert picked == {"positive", "negative"}
    assert fixes.app_pick(torch.zeros(2, 8)) == "negative"
    torch.testing.assert_close(fixes.app_run(art, x + 2.0), cond_model(x + 2.0).detach(), atol=1e-5, rtol=1e-5)


def test_cond_error_line_falls_back_to_the_first_line():
    assert fixes.cond_error_line(RuntimeError("plain message\nmore")) == "plain message"


def test_cond_is_two_jumps_in_the_instruction_stream_and_not_a_kernel():
    model = M.ScaleOrShiftCond()
    art = helpers.lower(model, (rand(3, 4),))
    listing = fixes.instructions(art)
    counts = listing.counts()
    assert counts["JumpFalseCall"] == 2 and "DelegateCall" not in counts
    assert [d for k, d in listing.steps if k == "KernelCall"][:2] == ["aten::sum", "aten::gt"]
    cond_counts = fixes.node_counts(helpers.lower(M.CondLinear(), (rand(2, 8),)).delegation())
    assert cond_counts == {"delegated": 2, "portable kernels": 6, "control flow": 1}


def test_hoisted_scale_or_shift_methods_are_fully_delegated():
    x = rand(3, 4)
    art = helpers.lower_methods({"a": (fixes.ScaleOrShiftA(), (x,)), "b": (fixes.ScaleOrShiftB(), (x,))})
    assert all(art.delegation(m).coverage == 1.0 for m in ("a", "b"))
    report = fixes.hoisted_parity(M.ScaleOrShift(), art, [helpers.Probe(str(s), (x + s,)) for s in (-3.0, 3.0)],
                               pick=lambda t: "a" if float(t.sum()) > 0 else "b")
    assert report.ok and {r.label.rsplit("→ ", 1)[1] for r in report} == {"a", "b"}


def test_compare_speed_says_only_what_every_round_agrees_on():
    fast, slow, overlapping = Spread(1.0, 0.9, 1.1), Spread(3.0, 2.8, 3.3), Spread(1.05, 0.95, 1.2)
    assert compare_speed("where", fast, "cond", slow).startswith("where was faster in every round")
    assert compare_speed("where", slow, "cond", fast).startswith("cond was faster in every round")
    assert "does not separate them" in compare_speed("where", fast, "cond", overlapping)


def test_router_and_gated_proj_branch_on_their_own_sums():
    router, gate = fixes.Router(), fixes.GatedProj()
    x = rand(2, 8)
    h = router.pre(x)
    expected = router.big2(torch.relu(router.big1(h))) if h.sum() > 0 else -h * 0.5
    torch.testing.assert_close(router(x), expected)
    y = rand(3, 4).abs()
    torch.testing.assert_close(gate(y), torch.relu(gate.proj(y)))
    torch.testing.assert_close(gate(-y), gate.proj(-y) * 0.1)
