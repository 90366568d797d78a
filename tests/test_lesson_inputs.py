"""Lesson 16: nested inputs reach the device as a flat list, in the order export flattened them."""

from __future__ import annotations

import pytest
import torch
from torch.export import Dim

import helpers
from helpers import course, exercises

INPUTS = course.lesson(16)


def test_the_program_takes_the_example_dicts_key_order_and_a_swap_is_silent():
    program, flat = INPUTS.denoise_program()
    assert flat.names == ["batch_noise", "batch_signal"]
    batch = INPUTS.loader_batch(seed=5)
    with torch.no_grad():
        eager = INPUTS.Denoise()(batch)
    (right,) = program.run_raw(batch["noise"], batch["signal"])
    (swapped,) = program.run_raw(batch["signal"], batch["noise"])
    assert torch.allclose(right, eager, atol=1e-5)
    assert not torch.allclose(swapped, eager, atol=1e-2)


def test_the_lessons_flat_order_is_torch_exports_own():
    """lower_structured's flat model takes its tensors in the order torch.export flattens the real model's inputs."""
    batch = INPUTS.loader_batch()
    assert INPUTS.export_input_names(INPUTS.Denoise(), (batch,)) == INPUTS.denoise_program()[1].names
    reordered = {"signal": batch["signal"], "noise": batch["noise"]}
    assert INPUTS.export_input_names(INPUTS.Denoise(), (reordered,)) == ["batch_signal", "batch_noise"]


def test_the_runtime_refuses_a_dict():
    program, _ = INPUTS.denoise_program()
    with pytest.raises(helpers.RuntimeRejectedError, match="flat list of tensors"):
        program.run_raw(INPUTS.loader_batch())


def test_keyword_arguments_follow_the_order_passed_to_export():
    signal, noise = torch.randn(2, 8), torch.randn(2, 8)
    model = INPUTS.KeywordDenoise()
    assert INPUTS.export_input_names(model, (), {"noise": noise, "signal": signal}) == ["noise", "signal"]
    assert INPUTS.export_input_names(model, (), {"signal": signal, "noise": noise}) == ["signal", "noise"]


def test_an_unregistered_dataclass_is_refused_and_a_registered_one_follows_its_fields():
    from torch.utils._pytree import SUPPORTED_NODES

    frames = INPUTS.Frames(torch.randn(2, 8), torch.randn(2, 8))
    if INPUTS.Frames not in SUPPORTED_NODES:
        with pytest.raises(ValueError, match="register_dataclass"):
            torch.export.export(INPUTS.DataclassDenoise(), (frames,))
    import warnings

    INPUTS.register_frames()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        INPUTS.register_frames()  # a second call registers nothing again (torch would warn: "Overwriting")
    assert INPUTS.export_input_names(INPUTS.DataclassDenoise(), (frames,)) == ["frames_signal", "frames_noise"]


def test_other_correct_specs_pass_the_exercise():
    """The grade judges behaviour: positional (tuple) form, and the app's own lower bounds (batch 1, 2 tokens)."""
    exercise = exercises.get("16.nested_spec")
    batch, tokens, prompt = Dim("b", min=1, max=4), Dim("t", min=2, max=64), Dim("p", min=2, max=8)
    for answer in (
        ({"tokens": {0: batch, 1: tokens}, "mask": {0: batch, 1: tokens}}, {0: batch, 1: prompt}),
        {"batch": {"mask": {0: batch, 1: tokens}, "tokens": {0: batch, 1: tokens}}, "prompt": {0: batch, 1: prompt}},
    ):
        grade = exercise.check(answer)
        assert grade.passed, grade.report()
