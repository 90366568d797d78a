"""diagnose_export classifies real export / lowering / loading failures and never raises for the model;
the library's own failures propagate instead of being reported as the model's."""

from __future__ import annotations

import re

import pytest
import torch
from torch.export import Dim

import helpers
from helpers import models as M


def test_data_dependent_if_is_classified_with_its_line():
    d = helpers.diagnose_export(M.ScaleOrShift(), (torch.randn(3, 4),))
    assert d.kind == "data_dependent" and d.stage == "export"
    assert d.source_line == "forward(): if x.sum() > 0:"
    assert d.location and d.location.startswith("helpers/models.py:")
    assert "torch.cond" in d.fix and "torch.where" in d.fix and "hoist" in d.fix


def test_a_guard_lowering_asks_about_a_value_read_from_data_names_the_question_and_the_users_line():
    """Lesson 14's ValidRows: export succeeds, torch's slice decomposition (run by the lowering) asks whether the end
    read by .item() is negative. The diagnosis says which question, points at the slice in forward() (from the stack
    trace export recorded), and its fix is a promise, not a torch.cond."""
    from helpers import course

    sizes = course.lesson(14)
    d = helpers.diagnose_export(sizes.ValidRows(), (sizes.token_table(), sizes.n(5)))
    assert d.kind == "data_dependent" and d.stage == "lower"
    assert re.search(r"lowering asked whether u\d+ < 0, where u… is a value read from data", d.summary), d.summary
    assert d.source_line == "forward(): return self.proj(tokens[:k])", d.source_line
    assert d.location and d.location.startswith("helpers/lessons/14_values_that_decide_sizes.py:")
    assert "torch._check(k >= lo)" in d.fix and "torch.cond" not in d.fix


def test_while_on_a_tensor_is_data_dependent():
    d = helpers.diagnose_export(M.WhileDouble(), (torch.rand(3),))
    assert d.kind == "data_dependent" and "while" in d.source_line and "while" in d.summary


def test_guard_on_a_dynamic_dimension_is_a_constraint_violation():
    class SplitInEight(torch.nn.Module):
        def forward(self, x):
            return x.reshape(-1, 8)

    d = helpers.diagnose_export(SplitInEight(), (torch.randn(2, 16),), {"x": {1: Dim("T", min=1, max=64)}})
    assert d.kind == "constraint_violation"
    assert "'T'" in d.summary and "x.shape[1]" in d.summary
    assert any("Dim(" in s for s in d.suggested_fixes)


def test_shape_branch_with_a_too_wide_dim_is_a_constraint_violation():
    class BigBatchOnly(torch.nn.Module):
        def forward(self, x):
            return x * 2 if x.shape[0] > 4 else x

    d = helpers.diagnose_export(BigBatchOnly(), (torch.randn(8, 3),), {"x": {0: Dim("batch", min=1, max=16)}})
    assert d.kind == "constraint_violation"
    assert d.suggested_fixes == ["batch = Dim('batch', min=5, max=16)"]


def test_unsupported_operators_at_each_stage():
    class Median(torch.nn.Module):
        def forward(self, x):
            return torch.median(x)

    class Sort(torch.nn.Module):
        def forward(self, x):
            return torch.sort(x)[0]

    d = helpers.diagnose_export(Median(), (torch.randn(5),))
    assert (d.kind, d.stage, d.operator) == ("unsupported_operator", "lower", "aten.median.default")
    assert d.source_line == "forward(): return torch.median(x)"  # traced back through the exported graph
    assert d.location == f"tests/test_diagnose.py:{Median.forward.__code__.co_firstlineno + 1}"
    d = helpers.diagnose_export(Sort(), (torch.randn(5),), backend="portable")
    assert (d.kind, d.stage, d.operator) == ("unsupported_operator", "load", "aten::sort.values")
    assert d.source_line == "forward(): return torch.sort(x)[0]"


def test_custom_op_without_a_fake_kernel_is_unsupported_at_export():
    @torch.library.custom_op("exportlab_test::host_sort", mutates_args=())
    def host_sort(x: torch.Tensor) -> torch.Tensor:
        return torch.from_numpy(x.numpy().copy())

    class UsesCustomOp(torch.nn.Module):
        def forward(self, x):
            return host_sort(x)

    d = helpers.diagnose_export(UsesCustomOp(), (torch.randn(4),))
    assert (d.kind, d.stage) == ("unsupported_operator", "export")
    assert d.operator == "exportlab_test::host_sort"


def test_ok_carries_the_artifact_and_other_errors_do_not_raise():
    d = helpers.diagnose_export(M.ScaleOrShiftCond(), (torch.randn(3, 4),))
    assert d.ok and d.artifact is not None and "delegated" in d.summary

    class Broken(torch.nn.Module):
        def forward(self, x):
            raise ValueError("this model is broken in eager mode too")

    d = helpers.diagnose_export(Broken(), (torch.randn(2),))
    assert d.kind == "other" and "broken in eager" in d.summary
    assert d.source_line and "raise ValueError" in d.source_line
    assert "offending line" in str(d) and "<table>" in d._repr_html_()


def test_the_model_is_exported_once(monkeypatch):
    calls = []
    real = torch.export.export

    def counting(*args, **kwargs):
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(torch.export, "export", counting)
    d = helpers.diagnose_export(M.ScaleOrShiftWhere(), (torch.randn(3, 4),))
    assert d.ok and d.exported is not None and len(calls) == 1


def test_the_librarys_own_failure_is_not_the_models(monkeypatch):
    """An exception without a stage (raised by the library, not by torch or ExecuTorch on the model) is
    raised, not turned into a Diagnosis; the same kind of exception raised by the model is diagnosed."""
    from helpers import lowering
    from helpers.diagnose import diagnose_failure

    def broken(*_args, **_kwargs):
        raise RuntimeError("a bug in the lowering code")

    monkeypatch.setattr(lowering, "lower_exported", broken)
    with pytest.raises(RuntimeError, match="a bug in the lowering code"):
        helpers.diagnose_export(M.ScaleOrShiftWhere(), (torch.randn(3, 4),))
    assert diagnose_failure(RuntimeError("no stage")) is None

    class RaisesInForward(torch.nn.Module):
        def forward(self, x):
            raise RuntimeError("a bug in the model")

    d = helpers.diagnose_export(RaisesInForward(), (torch.randn(2),))  # raised by the model: diagnosed
    assert (d.kind, d.stage) == ("other", "export") and "a bug in the model" in d.summary


def test_a_size_read_from_data_that_memory_planning_cannot_bound_is_data_dependent():
    """ExecuTorch's memory planning ('Cannot evaluate a finite upper bound', exir/sym_util.py) on a size from .item():
    the same kind, and the same fix (promise the range), as lowering's guard on such a value."""

    class Positions(torch.nn.Module):
        def forward(self, length):
            return torch.arange(length.item()).float()

    d = helpers.diagnose_export(Positions(), (torch.tensor(5),))
    assert (d.stage, d.kind) == ("lower", "data_dependent"), d
    assert "finite upper bound" in d.message and "memory planning" in d.summary and "torch._check" in d.fix
