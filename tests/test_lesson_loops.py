"""Lesson 15: a loop on the device runs a fixed number of steps — what exports, what lowers, what the app must do."""

from __future__ import annotations

import pytest
import torch

import helpers
from helpers import course, exercises

LOOPS = course.lesson(15)


def test_while_loop_is_right_in_torch_and_refused_by_executorch_only():
    """The lesson blames ExecuTorch's emitter, not the loop: the exported program runs the loop correctly."""
    x = LOOPS.frame(1000.0, seed=4)
    exported = torch.export.export(LOOPS.HalveWhileLoop(), (LOOPS.frame(3.0),))
    assert torch.equal(exported.module()(x), LOOPS.HalveUntilQuiet()(x))
    d = LOOPS.while_loop_diagnosis()
    assert d.stage == "lower" and "Unsupported control flow operator: while_loop" in d.message


def test_a_cap_from_the_contract_matches_eager_and_past_it_the_answer_is_unfinished():
    capped = helpers.lower(LOOPS.HalveAtMost(16), (LOOPS.frame(1000.0),))
    for peak in (0.25, 1.0, 1.5, 2.0**15 + 1, 2.0**16):
        x = LOOPS.frame(peak, seed=5)
        assert torch.equal(capped.run_raw(x)[0], LOOPS.HalveUntilQuiet()(x)), peak
    too_loud = LOOPS.frame(2.0**17, seed=5)
    (out,) = capped.run_raw(too_loud)
    assert torch.equal(out, too_loud / 2**16) and out.abs().max() > 1  # 16 halvings, silently


def test_scan_runs_every_step_from_one_body():
    programs = {steps: helpers.lower(LOOPS.HalveScan(steps), (LOOPS.frame(1000.0),)) for steps in (4, 16)}
    assert LOOPS.program_size(programs[4]) == LOOPS.program_size(programs[16])
    x = LOOPS.frame(1000.0, seed=6)
    assert torch.equal(programs[4].run_raw(x)[0], x / 2**4)  # the cap, not the frame, sets the steps
    assert torch.equal(programs[16].run_raw(x)[0], LOOPS.HalveUntilQuiet()(x))
    assert "1 scan loop(s) as jumps" in programs[16].delegation().summary()


def test_the_app_loop_stops_when_the_frame_is_quiet_and_gives_up_past_its_limit():
    step = helpers.lower(LOOPS.HalveOnce(), (LOOPS.frame(1000.0),))
    x = LOOPS.frame(300.0, seed=7)
    out, calls = LOOPS.app_loop(step, x)
    assert calls == LOOPS.halvings(x) == 9 and torch.equal(out, LOOPS.HalveUntilQuiet()(x))
    with pytest.raises(RuntimeError, match="still loud after 3 calls"):
        LOOPS.app_loop(step, x, most=3)


@pytest.mark.parametrize("seed", [0, LOOPS.OTHER_TABLE])
def test_both_tables_reach_the_end_within_12_tokens_and_one_start_needs_all_12(seed):
    """The exercise's probes hold the edge: a start whose generation uses every one of the 12 tokens."""
    model = LOOPS.Generate(seed)
    lengths = []
    for token in range(1, LOOPS.VOCAB):
        tokens = model(LOOPS.start(token)).tolist()
        lengths.append(tokens.index(LOOPS.END) + 1)
        assert all(t == LOOPS.END for t in tokens[lengths[-1]:])
    assert max(lengths) == LOOPS.LONGEST and min(lengths) < 6
    assert model.next_token.weight[LOOPS.END].argmax() != LOOPS.END  # a loop that ignores END keeps generating


@pytest.mark.parametrize("loop", [
    # scan over the 12 steps, carrying the token and whether the end has come
    """
from torch._higher_order_ops.scan import scan

class StopAtEnd(Generate):
    def forward(self, start):
        def step(carry, tick):
            token, done = carry
            token = torch.where(done, END, self.next_token(token).argmax(-1))
            done = done | (token == END)
            return (token, done), token.clone()

        _, tokens = scan(step, (start, start == END), torch.zeros(LONGEST, 1))
        return tokens.reshape(LONGEST)
answer = StopAtEnd()
""",
    # 11 steps are enough: the 12th token is always END
    """
class StopAtEnd(Generate):
    def forward(self, start):
        token, done, tokens = start, start == END, []
        for _ in range(LONGEST - 1):
            token = torch.where(done, END, self.next_token(token).argmax(-1))
            tokens.append(token)
            done = done | (token == END)
        return torch.cat(tokens + [torch.full((1,), END)])
answer = StopAtEnd()
""",
], ids=["scan", "11 steps and END"])
def test_other_correct_loops_pass_the_exercise(loop):
    exercise = exercises.get("15.stop_at_end")
    grade = exercise.check(exercise.build(loop))
    assert grade.passed, grade.report()


def test_a_scan_step_reading_a_parameter_and_carrying_integers_exports_only_without_gradients():
    """The lesson's sentence: torch 2.13's scan fails to export a step that reads a parameter requiring gradients
    when the step also carries integers (token ids); with floats only it exports; an inference model
    (requires_grad_(False)) exports, lowers and runs."""
    from torch._higher_order_ops.scan import scan

    class Follow(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.next_token = torch.nn.Embedding(4, 4)
            with torch.no_grad():
                self.next_token.weight.copy_(torch.eye(4).roll(1, dims=1))  # token t → t + 1 (mod 4)

        def forward(self, token):
            def step(token, tick):
                token = self.next_token(token).argmax(-1)
                return token, token.clone()

            _, tokens = scan(step, token, torch.zeros(3, 1))
            return tokens.reshape(3)

    class Scaled(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.gain = torch.nn.Parameter(torch.tensor(0.5))

        def forward(self, x):
            def step(x, tick):
                return x * self.gain, tick.clone()

            x, _ = scan(step, x, torch.zeros(3, 1))
            return x

    start = torch.tensor([1])
    with pytest.raises(Exception, match=r"outs_to_grad length \(0\) != tangents length"):
        torch.export.export(Follow(), (start,))
    torch.export.export(Scaled(), (torch.ones(4),))  # floats only: exports with gradients on
    art = helpers.lower(Follow().requires_grad_(False), (start,))
    assert art.run_raw(start)[0].tolist() == [2, 3, 0]
