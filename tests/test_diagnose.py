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
    """The model, that is: the first XNNPACK lowering in a process also exports the partitioner's own pattern
    graphs (``executorch.backends.xnnpack.partition.graphs``: bilinear, SDPA, …), which are not the model."""
    calls = []
    real = torch.export.export

    def counting(mod, *args, **kwargs):
        calls.append(type(mod))
        return real(mod, *args, **kwargs)

    monkeypatch.setattr(torch.export, "export", counting)
    d = helpers.diagnose_export(M.ScaleOrShiftWhere(), (torch.randn(3, 4),))
    assert d.ok and d.exported is not None and calls.count(M.ScaleOrShiftWhere) == 1, calls


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


# ----- state the program writes: three ways lowering refuses it, each named with its line and its fix -----
class GradSlot(torch.nn.Module):
    """A cache written in place with a value computed from parameters (which require grad by default)."""

    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)
        self.register_buffer("cache", torch.zeros(8, 4))

    def forward(self, x, pos):
        self.cache.index_copy_(0, pos, self.lin(x))
        return self.cache.sum(0, keepdim=True)


class PlainStart(torch.nn.Module):
    """A position kept in a plain tensor attribute, not a registered buffer."""

    def __init__(self):
        super().__init__()
        self.start = torch.zeros((), dtype=torch.long)

    def forward(self, x, pos):
        self.start.copy_(pos[0])
        return x + self.start


class _Holder:
    def __init__(self):
        self.start = torch.zeros((), dtype=torch.long)


class HeldStart(torch.nn.Module):
    """The same tensor registered as a buffer, but written through another object that holds it (as transformers'
    static cache holds its tensors)."""

    def __init__(self):
        super().__init__()
        self.holder = _Holder()
        self.register_buffer("start", self.holder.start, persistent=False)

    def forward(self, x, pos):
        self.holder.start.copy_(pos[0])
        return x + self.holder.start


STATE_ARGS = (torch.randn(1, 4), torch.tensor([3]))


def test_a_buffer_written_with_a_value_that_requires_grad_names_the_buffer_and_no_grad_fixes_it():
    with torch.enable_grad():
        d = helpers.diagnose_export(GradSlot(), STATE_ARGS, backend="portable")
    assert d.kind == "other" and d.stage == "lower", d
    assert "requires grad is being used in an in-place operation" in d.message  # torch's own words, kept
    assert "writes buffer `cache` in place with a value that requires grad" in d.summary, d.summary
    assert d.source_line == "forward(): self.cache.index_copy_(0, pos, self.lin(x))", d.source_line
    assert d.location and d.location.startswith("tests/test_diagnose.py:")
    assert "torch.no_grad()" in d.fix and "requires_grad_(False)" in d.fix
    with torch.no_grad():  # the fix, as the diagnosis gives it: both ways lower and load
        assert helpers.diagnose_export(GradSlot(), STATE_ARGS, backend="portable").ok
    with torch.enable_grad():
        assert helpers.diagnose_export(GradSlot().requires_grad_(False), STATE_ARGS, backend="portable").ok


def test_a_plain_tensor_attribute_written_in_place_is_named_and_register_buffer_is_the_fix():
    with torch.no_grad():
        d = helpers.diagnose_export(PlainStart(), STATE_ARGS, backend="portable")
    assert d.kind == "other" and d.stage == "lower", d
    assert "`start`, a tensor attribute that is not a registered buffer" in d.summary, d.summary
    assert d.source_line == "forward(): self.start.copy_(pos[0])", d.source_line
    assert 'self.register_buffer("start", tensor, persistent=False)' in d.fix


def test_a_buffer_written_through_another_object_is_a_lifted_constant_and_strict_export_lowers_it():
    """Non-strict export takes the tensor for a constant (``lifted_tensor_0``) though the module registers it, and
    lowering fails with an assertion of torch's that names nothing: the diagnosis names the write and its line.
    Strict export follows the reference to the buffer: it lowers, and the program writes the position."""
    with torch.no_grad():
        d = helpers.diagnose_export(HeldStart(), STATE_ARGS, backend="portable")
        program = helpers.lower(HeldStart(), STATE_ARGS, backend="portable", strict=True)
    assert d.kind == "other" and d.stage == "lower", d
    assert "expected compiled_fn to be GraphModule" in d.message  # what torch said
    assert "writes in place to `lifted_tensor_0`, a tensor export lifted as a constant" in d.summary, d.summary
    assert d.source_line == "forward(): self.holder.start.copy_(pos[0])", d.source_line
    assert "strict=True" in d.fix
    x, pos = STATE_ARGS
    assert torch.equal(program.run_raw(x, pos)[0], x + 3)


def test_other_failures_keep_their_summary_and_fix():
    """A model that writes no state and fails for another reason is not given the state findings."""
    from helpers.diagnose import FIXES, diagnose_exception

    d = diagnose_exception(RuntimeError("something else went wrong"), "lower")
    assert d.summary == "RuntimeError: something else went wrong" and d.fix == FIXES["other"]
