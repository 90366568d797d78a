"""The input contract: what the bare runtime checks, what it does not, and the host-side check."""

from __future__ import annotations

import re

import pytest
import torch
from torch.export import Dim

import helpers
from helpers import models as M

G = torch.Generator().manual_seed(2)
INTERNAL_SYMBOL = re.compile(r"\b[su]\d+\b")


def contract_error(art, *args, method="forward") -> helpers.InputContractError:
    with pytest.raises(helpers.InputContractError) as info:
        art.run(*args, method=method)
    message = str(info.value)
    assert not INTERNAL_SYMBOL.search(message), f"torch's internal symbol leaked: {message}"
    assert "Fix:" in message
    return info.value


def test_contract_names_dims_and_ties(token_pool):
    _, art, _, _ = token_pool
    contract = art.input_contract()
    assert contract.signature() == "forward(ids: int64[1, seq∈[2,64]], mask: float32[1, seq∈[2,64]])"
    assert contract.ties["seq"] == [("ids", 1), ("mask", 1)]
    assert art.runtime_input_shapes() == [(1, 64), (1, 64)]  # the .pte records the MAX shape


def test_shared_dim_mismatch_is_refused_with_a_clear_message(token_pool):
    _, art, _, _ = token_pool
    err = contract_error(art, torch.zeros(1, 20, dtype=torch.long), torch.ones(1, 30))
    (v,) = err.violations
    assert v.input == "mask" and v.axis == 1 and v.dim == "seq"
    assert "must equal ids axis 1" in str(err) and "20" in str(err) and "30" in str(err)


def test_above_max_names_the_dim_and_suggests_a_larger_max(token_pool):
    _, art, _, _ = token_pool
    err = contract_error(art, torch.zeros(1, 65, dtype=torch.long), torch.ones(1, 65))
    assert {v.input for v in err.violations} == {"ids"}  # the tie check reports mask only if it differs
    assert "Dim 'seq'" in str(err) and "≤ 64" in str(err) and "larger max" in str(err)
    with pytest.raises(helpers.RuntimeRejectedError, match="maximum capacity of 64"):
        art.run_raw(torch.zeros(1, 65, dtype=torch.long), torch.ones(1, 65))  # the runtime agrees


def test_wrong_dtype_rank_and_static_size(token_pool, static_config):
    _, art, _, _ = token_pool
    err = contract_error(art, torch.zeros(1, 8, dtype=torch.int32), torch.ones(1, 8))
    assert "wrong dtype" in str(err) and "int64" in str(err) and ".to(torch.int64)" in str(err)
    err = contract_error(art, torch.zeros(8, dtype=torch.long), torch.ones(1, 8))
    assert "wrong rank" in str(err) and "unsqueeze(0)" in str(err)
    _, static, _ = static_config
    err = contract_error(static, torch.randn(3, 4))
    (v,) = err.violations
    assert (v.input, v.axis, v.expected, v.actual) == ("x", 0, "2", "3")
    assert "Dim(" in v.fix


def test_non_tensor_and_wrong_count(static_config):
    _, art, _ = static_config
    for bad in (None, [1.0, 2.0], "x", 3.0):
        err = contract_error(art, bad)
        assert "not a tensor" in str(err)
    err = contract_error(art)
    assert "wrong number of inputs" in str(err)
    err = contract_error(art, torch.randn(2, 4), torch.randn(2, 4))
    assert "exactly: x" in str(err)


def test_bare_runtime_silently_accepts_a_size_below_min_and_the_host_check_refuses_it():
    model = M.ShapeBranch()
    frames = Dim("frames", min=2, max=32)
    art = helpers.lower(model, (torch.randn(1, 8, 4, generator=G),), dynamic_shapes={"x": {1: frames}})
    one_frame = torch.randn(1, 1, 4, generator=G)
    (device_out,) = art.run_raw(one_frame)  # no complaint from the runtime ...
    assert torch.isnan(device_out).all()  # ... it ran the normalising branch: std of one value
    assert not torch.isnan(model(one_frame)).any()  # eager took the other branch
    err = contract_error(art, one_frame)
    assert "below the Dim's minimum" in str(err) and "Dim 'frames'" in str(err)


def test_a_python_scalar_is_a_constant():
    model = M.ScalarRepeat()
    x = torch.randn(1, 4, generator=G)
    art = helpers.lower(model, (x, 2))
    assert "steps=2 (constant)" in art.input_contract().signature()
    torch.testing.assert_close(art.run(x, 2)[0], model(x, 2).detach(), atol=1e-5, rtol=1e-5)
    err = contract_error(art, x, 3)
    assert "constant" in str(err)
    with pytest.raises(helpers.RuntimeRejectedError, match="same value"):
        art.run_raw(x, 3)  # ExecuTorch compares the value too


def test_unbounded_dim_is_planned_at_the_example_size():
    class Double(torch.nn.Module):
        def forward(self, x):
            return x * 2

    art = helpers.lower(Double(), (torch.randn(4, 3, generator=G),), dynamic_shapes={"x": {0: Dim("n")}})
    (ax, _) = art.input_contract().inputs[0].axes
    assert ax.max is None and ax.planned == 4
    assert art.run(torch.randn(2, 3))[0].shape == (2, 3)
    err = contract_error(art, torch.randn(5, 3))
    assert "no max" in str(err) and "example size 4" in str(err)
    with pytest.raises(helpers.RuntimeRejectedError, match="capacity of 12"):
        art.run_raw(torch.randn(5, 3))


def test_dim_auto_records_the_range_export_inferred():
    art = helpers.lower(M.ShapeBranch(), (torch.randn(1, 8, 4, generator=G),),
                        dynamic_shapes={"x": {1: Dim.AUTO}})
    (_, ax, _) = art.input_contract().inputs[0].axes
    assert ax.dim == "x.shape[1]" and ax.auto and ax.min == 2  # AUTO narrowed it: forward() branches on it
    err = contract_error(art, torch.randn(1, 1, 4))
    assert "narrowed" in str(err) or "below" in str(err)


def test_contract_round_trips_through_json(token_pool):
    _, art, _, _ = token_pool
    contract = art.input_contract()
    assert helpers.InputContract.from_dict(contract.to_dict()) == contract
