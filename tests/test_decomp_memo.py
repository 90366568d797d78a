"""helpers._decomp_memo: lowering's survey of the operator registry answered from a memo while the registry is
unchanged: the same answer as torch's, a new custom operator seen at once, the same programs, torch untouched
outside the library's calls."""

from __future__ import annotations

import torch

from helpers import _decomp_memo
from helpers._decomp_memo import registry_survey_memoized


def _surveys() -> list:
    import torch._export.utils as utils
    import torch.export.decomp_utils as decomp_utils
    import torch.export.exported_program as exported_program

    return [m._collect_all_valid_cia_ops for m in (utils, exported_program, decomp_utils)]


def test_torchs_function_is_replaced_only_inside_the_block_nested_or_not():
    before = _surveys()
    assert len(set(before)) == 1  # one function, imported by name into the other two modules
    with registry_survey_memoized():
        inside = _surveys()
        with registry_survey_memoized():
            assert _surveys() == inside
        assert _surveys() == inside  # the inner block's exit leaves the outer block's memo in place
    assert len(set(inside)) == 1 and inside[0] is not before[0] and inside[0].__wrapped__ is before[0]
    assert _surveys() == before


def test_the_memo_gives_torchs_answer_and_a_custom_operator_registered_later():
    original = _surveys()[0]
    with registry_survey_memoized():
        memoized = _surveys()[0]
        first = memoized()
        assert first == original() and memoized() is first  # the second call is the memo's
        library = torch.library.Library("exportlab_memo_probe", "DEF")
        library.define("twice(Tensor x) -> Tensor")
        library.impl("twice", lambda x: x * 2, "CompositeImplicitAutograd")
        after = memoized()
        assert after is not first and after == original()
        assert "exportlab_memo_probe.twice.default" in {str(op) for op in after}
    assert not _decomp_memo._originals


def test_a_program_lowered_with_the_memo_is_the_one_lowered_without_it():
    """A linear layer (a CompositeImplicitAutograd operator XNNPACK asks to keep) and a mean, lowered twice."""
    from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
    from executorch.exir import to_edge_transform_and_lower

    class Head(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            torch.manual_seed(0)
            self.linear = torch.nn.Linear(8, 4)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return torch.relu(self.linear(x)) - x.mean()

    def build() -> bytes:
        exported = torch.export.export(Head(), (torch.randn(2, 8),))
        return bytes(to_edge_transform_and_lower(exported, partitioner=[XnnpackPartitioner()]).to_executorch().buffer)

    plain = build()
    with registry_survey_memoized():
        build()  # fills the memo
        memoized = build()  # answered from it
    assert memoized == plain
