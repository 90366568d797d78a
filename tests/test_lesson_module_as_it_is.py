"""Lesson 17: export records one run of forward() on the module as it is: its mode, its Python attributes, and
(non-strict) only what torch computes."""

from __future__ import annotations

import pytest
import torch

import helpers
from helpers import course

MODULE = course.lesson(17)


def test_a_training_mode_program_draws_a_new_dropout_mask_per_call_and_eval_mode_does_not():
    train, evaluated = MODULE.scorer_program("train"), MODULE.scorer_program("eval")
    x = MODULE.frame(11)
    outs = MODULE.answers_of(train, x)
    assert len({tuple(o.flatten().tolist()) for o in outs}) > 1  # ten calls on one frame: more than one answer
    assert train.delegation().portable_ops() == ["aten_native_dropout_default"]
    with torch.no_grad():
        reference = MODULE.FrameScorer().eval()(x)
    assert torch.allclose(evaluated.run_raw(x)[0], reference, atol=1e-5)
    assert "native_dropout" not in " ".join(evaluated.delegation().by_op())


def test_training_mode_batch_norm_does_not_lower_and_eval_mode_does():
    with pytest.raises(Exception, match="_native_batch_norm_legit_functional"):
        helpers.lower(MODULE.as_trained(MODULE.NormScorer()), (MODULE.frame(0, rows=2),))
    model = MODULE.NormScorer().eval()
    program = helpers.lower(model, (MODULE.frame(0, rows=2),))
    assert helpers.check_one(model, program, (MODULE.frame(4, rows=2),)).status == "match"


def test_the_portable_dropout_keeps_values_unscaled_where_torch_scales_them():
    values = MODULE.dropout_values()
    assert values == {"torch": [0.0, 1.4286], ".pte": [0.0, 1.0], "zeroed by the .pte": 0.3}


def test_an_exported_module_cannot_be_switched_to_eval():
    exported = torch.export.export(MODULE.as_trained(MODULE.FrameScorer()), (MODULE.frame(0),))
    with pytest.raises(NotImplementedError, match="Calling eval"):
        exported.module().eval()


def test_numpy_fails_non_strict_and_strict_traces_it_into_a_clamp():
    assert MODULE.export_default(MODULE.Clipper().eval(), (MODULE.frame(0, rows=2),)).startswith(
        "RuntimeError: .numpy() is not supported")
    program = MODULE.clipper_program()
    model = MODULE.Clipper().eval()
    for seed in (1, 2, 3):
        loud = MODULE.frame(seed, rows=2) * 4
        assert model.proj(loud).abs().max() > 1
        assert helpers.check_one(model, program, (loud,)).status == "match"


def test_a_python_attribute_is_a_constant_and_a_buffer_is_state_that_starts_over_on_each_load():
    frames = MODULE.stream(3)
    plain = helpers.lower(MODULE.RunningDenoise(), (MODULE.frame(0),))
    device = MODULE.device_stream(plain, frames)
    eager = MODULE.eager_stream(MODULE.RunningDenoise(), frames)
    assert torch.allclose(device[0], eager[0], atol=1e-5) and not torch.allclose(device[1], eager[1], atol=1e-3)
    warned = MODULE.export_warnings(MODULE.RunningDenoise(), (MODULE.frame(0),))
    assert any("self.mean was assigned during export" in w for w in warned), warned
    solution = MODULE.solve_keep_state()
    kept = helpers.lower(solution, (MODULE.frame(0),))
    assert all(torch.allclose(d, e, atol=1e-5) for d, e in zip(MODULE.device_stream(kept, frames), eager,
                                                                   strict=True))
    loaded = kept.reloaded()
    for x in frames:  # one stream, then the same stream again on the same load: it goes on from the first's mean
        loaded.run_raw(x)
    again = [loaded.run_raw(x)[0] for x in frames]
    assert not torch.allclose(again[0], eager[0], atol=1e-3)
    assert torch.allclose(MODULE.device_stream(kept, frames)[0], eager[0], atol=1e-5)  # a fresh load: from zeros


def test_other_correct_answers_pass_the_exercise():
    """A registered buffer reassigned (not updated in place) is state too: export records the write."""
    from helpers import exercises

    exercise = exercises.get("17.keep_state")
    answer = exercise.build('''
class Reassigned(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("mean", torch.zeros(SAMPLES))

    def forward(self, x):
        self.mean = 0.8 * self.mean + 0.2 * x.mean(dim=0)
        return x - self.mean
answer = Reassigned()
''')
    grade = exercise.check(answer)
    assert grade.passed, grade.report()
