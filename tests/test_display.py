"""What a learner reads of an error: the excerpt keeps torch's own words and drops only its debugging hints."""

from __future__ import annotations

import pytest
import torch
from torch.export import Dim

from helpers.display import error_excerpt, error_line
from helpers.lessons import control_flow as cf


def test_the_excerpt_keeps_constraints_violated_and_cuts_the_logging_hint():
    """Lesson 02 tells learners to recognise "Constraints violated": torch writes it on the same line as
    "For more information, run with TORCH_LOGS=…", which the excerpt used to drop whole."""
    with pytest.raises(Exception) as caught:
        torch.export.export(cf.BatchGate(), (torch.randn(8, 4),),
                            dynamic_shapes={"x": {0: Dim("batch", min=1, max=16)}})
    assert "Constraints violated (batch)!" in str(caught.value).splitlines()[0]  # torch's own first line
    text = error_excerpt(caught.value)
    assert text.splitlines()[0] == "UserError: Constraints violated (batch)!"
    assert "TORCH_LOGS" not in text and "min=5" in text


def test_a_line_that_is_only_noise_is_dropped():
    text = error_excerpt(RuntimeError("the real reason\nFor more information, run with TORCH_LOGS=\"+dynamic\""))
    assert text == "RuntimeError: the real reason"
    assert error_line(ValueError("first\nsecond")) == "ValueError: first"


def test_a_hint_cut_mid_sentence_leaves_nothing_behind():
    """torch's data-dependent errors end lines with env-var hints ("… also add TORCHDYNAMO_EXTENDED_…"):
    the words before such a hint are not a sentence of their own and go with it."""
    exc = RuntimeError("Could not guard on data-dependent expression Eq(u0, 1)\n"
                       "For extended logs when we create symbols, also add TORCHDYNAMO_EXTENDED_DEBUG_CREATE_SYMBOL=u0\n"
                       "The following call raised this error:")
    assert error_excerpt(exc).splitlines() == ["RuntimeError: Could not guard on data-dependent expression Eq(u0, 1)",
                                               "The following call raised this error:"]
