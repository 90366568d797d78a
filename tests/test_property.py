"""Property: for ANY input, `run` either matches eager or raises InputContractError. Nothing else."""

from __future__ import annotations

import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import helpers

DTYPES = [torch.float32, torch.float64, torch.float16, torch.int64, torch.int32, torch.bool]


def sizes_around(bounds: list[int]) -> st.SearchStrategy[int]:
    near = sorted({max(0, b + d) for b in bounds for d in (-1, 0, 1)})
    return st.one_of(st.sampled_from(near), st.integers(min_value=0, max_value=max(bounds) * 2))


def tensor(dtype: torch.dtype, shape: tuple[int, ...], seed: int, high: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    if dtype.is_floating_point:
        return torch.randn(shape, generator=g).to(dtype)
    if dtype == torch.bool:
        return torch.rand(shape, generator=g) > 0.5
    return torch.randint(0, high, shape, generator=g).to(dtype)


def assert_match_or_contract_error(model, art, args) -> str:
    try:
        outputs = art.run(*args)
    except helpers.InputContractError:
        return "refused"
    with torch.no_grad():
        expected = model(*args)
    torch.testing.assert_close(outputs[0], expected, atol=1e-4, rtol=1e-4)
    return "ran"


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ids_dtype=st.sampled_from(DTYPES), mask_dtype=st.sampled_from(DTYPES),
       ids_rank=st.sampled_from([1, 2, 2, 2, 3]), batch=sizes_around([1]),
       ids_len=sizes_around([2, 64]), mask_len=sizes_around([2, 64]), same_len=st.booleans(),
       seed=st.integers(0, 2**16))
def test_token_pool_run_matches_or_refuses(token_pool, ids_dtype, mask_dtype, ids_rank, batch, ids_len,
                                           mask_len, same_len, seed):
    model, art, _, _ = token_pool
    if same_len:
        mask_len = ids_len
    ids_shape = {1: (ids_len,), 2: (batch, ids_len), 3: (batch, ids_len, 1)}[ids_rank]
    ids = tensor(ids_dtype, ids_shape, seed, high=32)
    mask = tensor(mask_dtype, (batch, mask_len), seed + 1, high=2)
    assert_match_or_contract_error(model, art, (ids, mask))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(dtype=st.sampled_from(DTYPES), rows=sizes_around([2]), cols=sizes_around([4]),
       extra_axis=st.booleans(), seed=st.integers(0, 2**16))
def test_static_model_run_matches_or_refuses(static_config, dtype, rows, cols, extra_axis, seed):
    model, art, _ = static_config
    shape = (rows, cols, 1) if extra_axis else (rows, cols)
    outcome = assert_match_or_contract_error(model, art, (tensor(dtype, shape, seed, high=5),))
    if outcome == "ran":
        assert (dtype, shape) == (torch.float32, (2, 4))  # the only shape and dtype inside the contract
