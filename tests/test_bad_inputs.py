"""Bad input never kills the kernel: the host check explains, the bare runtime refuses."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import helpers

BAD = {
    "wrong dtype": lambda: (torch.zeros(1, 8, dtype=torch.float32), torch.ones(1, 8)),
    "wrong rank": lambda: (torch.zeros(8, dtype=torch.long), torch.ones(8)),
    "huge length": lambda: (torch.zeros(1, 200_000, dtype=torch.long), torch.ones(1, 200_000)),
    "zero-size axis": lambda: (torch.zeros(1, 0, dtype=torch.long), torch.ones(1, 0)),
    "zero-size batch": lambda: (torch.zeros(0, 8, dtype=torch.long), torch.ones(0, 8)),
    "None": lambda: (None, torch.ones(1, 8)),
    "list": lambda: ([1, 2, 3], torch.ones(1, 8)),
    "string": lambda: ("hello", torch.ones(1, 8)),
    "numpy array": lambda: (np.zeros((1, 8), dtype=np.int64), torch.ones(1, 8)),
    "one input missing": lambda: (torch.zeros(1, 8, dtype=torch.long),),
    "lengths differ": lambda: (torch.zeros(1, 8, dtype=torch.long), torch.ones(1, 9)),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_run_explains_and_run_raw_refuses(token_pool, case):
    _, art, _, _ = token_pool
    args = BAD[case]()
    with pytest.raises(helpers.InputContractError) as info:
        art.run(*args)
    assert "Fix:" in str(info.value)
    if case == "zero-size axis":
        # The runtime would accept it (min is not checked, it fits the plan), and the XNNPACK
        # delegate would then read an uninitialised size: run_raw refuses it up front instead.
        with pytest.raises(helpers.RuntimeRejectedError, match="undefined behaviour"):
            art.run_raw(*args)
        return
    with pytest.raises(helpers.RuntimeRejectedError) as raw:
        art.run_raw(*args)
    assert raw.value.reason  # the runtime's own words, never empty


def test_a_refusal_leaves_the_method_usable(token_pool):
    model, art, (ids, mask), _ = token_pool
    for case in sorted(BAD):
        with pytest.raises(helpers.RuntimeRejectedError):
            art.run_raw(*BAD[case]())
    torch.testing.assert_close(art.run(ids, mask)[0], model(ids, mask).detach(), atol=1e-5, rtol=1e-5)


def test_out_of_range_token_ids_are_refused_by_the_kernel_not_a_crash(token_pool):
    _, art, _, _ = token_pool
    for bad_id in (32, -1, 10**9):
        with pytest.raises(helpers.RuntimeRejectedError, match="embedding"):
            art.run(torch.full((1, 8), bad_id, dtype=torch.long), torch.ones(1, 8))


def test_runtime_log_does_not_leak(token_pool, capsys):
    _, art, _, _ = token_pool
    with pytest.raises(helpers.RuntimeRejectedError) as info:
        art.run_raw(torch.zeros(1, 99, dtype=torch.long), torch.ones(1, 99))
    out, err = capsys.readouterr()
    assert "capacity" not in out + err
    assert "maximum capacity of 64" in str(info.value)
