"""The exercises of the lessons that live in ``helpers/lessons/NN_*`` (the registry, ``helpers.course``), each through
the real pipeline: starter fails, solution passes, plausible mistakes fail with useful feedback (see
exercise_support.py)."""

from __future__ import annotations

import time

import pytest
import torch
from exercise_support import WrongAnswer, assert_exercise_behaves

from helpers import course, exercises

WRONG: dict[str, list[WrongAnswer]] = {
    "01.vectorize_loop": [
        WrongAnswer("the row weights forgotten", """
class Forgot(BatchLoop):
    def forward(self, x):
        return torch.tanh(self.item(x))
answer = Forgot()
""", ("on batch 2", "the reference")),
        WrongAnswer("a model that returns zeros (matches its own .pte)", """
class Zeros(BatchLoop):
    def forward(self, x):
        return torch.zeros_like(x)
answer = Zeros()
""", ("on batch 1", "the reference")),
        WrongAnswer("the class instead of an instance", "answer = BatchLoop", ("not an nn.Module instance",)),
    ],
    "02.triage": [
        WrongAnswer("only the bright branch kept (the dark side diverges)", """
class OneSide(Triage):
    def forward(self, x):
        return self.bright(x)
answer = OneSide()
""", ("on dark side (x.mean() <= 0)", "the reference")),
        WrongAnswer("the NaN check kept (export fails, data-dependent)", """
class KeepsCheck(Triage):
    def forward(self, x):
        if torch.isnan(x).any():
            raise ValueError("NaN in the input")
        return torch.cond(x.mean() > 0, self.bright, self.dark, (x,))
answer = KeepsCheck()
""", ("export failed", "data-dependent", "incidental")),
        WrongAnswer("zeros", """
class Zeros(Triage):
    def forward(self, x):
        return torch.zeros_like(x)
answer = Zeros()
""", ("on bright side (x.mean() > 0)", "the reference")),
    ],
    "03.cond_rewrite": [
        WrongAnswer("torch.where instead of a runtime branch", """
class WithWhere(Router):
    def forward(self, x):
        h = self.pre(x)
        return torch.where(h.sum() > 0, self.big2(torch.relu(self.big1(h))), -h * 0.5)
answer = WithWhere()
""", ("keeps a real runtime branch", "straight-line", "torch.where's trade")),
        WrongAnswer("branches swapped", """
class Swapped(Router):
    def forward(self, x):
        h = self.pre(x)
        return torch.cond(h.sum() > 0, lambda h: -h * 0.5, lambda h: self.big2(torch.relu(self.big1(h))), (h,))
answer = Swapped()
""", ("on block side (h.sum() > 0)", "the reference", "which of your functions is which")),
        WrongAnswer("branches returning different shapes (torch's cond error quoted)", """
class Shapes(Router):
    def forward(self, x):
        h = self.pre(x)
        return torch.cond(h.sum() > 0, lambda h: self.big2(torch.relu(self.big1(h))), lambda h: (-h * 0.5).sum(0),
                          (h,))
answer = Shapes()
""", ("export failed", "torch says", "expected same dim")),
        WrongAnswer("branches taking different operands (torch's cond error quoted)", """
class Operands(Router):
    def forward(self, x):
        h = self.pre(x)
        return torch.cond(h.sum() > 0, lambda h: self.big2(torch.relu(self.big1(h))), lambda h, x: -h * 0.5, (h,))
answer = Operands()
""", ("export failed", "torch says", "Argument mismatch")),
    ],
    "04.where_rewrite": [
        WrongAnswer("torch.cond (control flow, branches on portable kernels)", """
class WithCond(GatedProj):
    def forward(self, x):
        return torch.cond(x.sum() > 0, lambda x: torch.relu(self.proj(x)), lambda x: self.proj(x) * 0.1, (x,))
answer = WithCond()
""", ("no control flow in the graph", "torch.cond", "portable kernels")),
        WrongAnswer("a per-element mask instead of the whole-input decision", """
class Mask(GatedProj):
    def forward(self, x):
        y = self.proj(x)
        return torch.where(x > 0, torch.relu(y), y * 0.1)
answer = Mask()
""", ("mixed signs", "the reference", "decides ONCE")),
        WrongAnswer("zeros", """
class Zeros(GatedProj):
    def forward(self, x):
        return torch.zeros_like(x)
answer = Zeros()
""", ("XNNPACK runs the projection", "not in the program at all")),
    ],
    "05.hoist": [
        WrongAnswer("one method keeps the cond", """
class A(CondLinear):
    def forward(self, x):
        return self.a(torch.relu(self.pre(x)))
def pick(x):
    return "a" if float(x.mean()) > 0 else "cond"
answer = ({"a": A(), "cond": CondLinear()}, pick)
""", ("method 'cond'", "keeps a torch.cond", "25% delegated")),
        WrongAnswer("the pick inverted", """
class A(CondLinear):
    def forward(self, x):
        return self.a(torch.relu(self.pre(x)))
class B(CondLinear):
    def forward(self, x):
        return self.b(torch.relu(self.pre(x)))
def pick(x):
    return "b" if float(x.mean()) > 0 else "a"
answer = ({"a": A(), "b": B()}, pick)
""", ("on x.mean() > 0", "the reference", "what pick returns")),
        WrongAnswer("a pick that names a method that does not exist", """
class A(CondLinear):
    def forward(self, x):
        return self.a(torch.relu(self.pre(x)))
class B(CondLinear):
    def forward(self, x):
        return self.b(torch.relu(self.pre(x)))
def pick(x):
    return "positive" if float(x.mean()) > 0 else "negative"
answer = ({"a": A(), "b": B()}, pick)
""", ("pick returned 'positive'", "not one of the methods")),
        WrongAnswer("a model instead of (methods, pick)", "answer = CondLinear()", ("a dict of methods and a pick",)),
    ],
}

TRACK = [e for item in course.lessons() for e in getattr(item.module, "EXERCISES", ())]


@pytest.mark.parametrize("exercise", TRACK, ids=lambda e: e.id)
def test_exercise_grades_by_behaviour(exercise):
    assert_exercise_behaves(exercise, WRONG.get(exercise.id, []))


def test_every_lesson_exercise_has_wrong_answers():
    assert {e.id for e in TRACK} == set(WRONG)
    assert {e.id for e in TRACK} <= {e.id for e in exercises.catalog()}


@pytest.mark.parametrize("probes, side", [
    (course.lesson(2).triage_probes, lambda x: x.mean() > 0),
    (course.lesson(3).router_probes, lambda x: course.lesson(3).Router().pre(x).sum() > 0),
    (course.lesson(4).gate_probes, lambda x: x.sum() > 0),
    (course.lesson(5).hoist_probes, lambda x: x.mean() > 0),
], ids=["02.triage", "03.router", "04.gate", "05.hoist"])
def test_probe_sets_cover_both_sides_and_are_finite(probes, side):
    found = probes()
    with torch.no_grad():
        sides = [bool(side(*p.args)) for p in found]
    assert sides.count(True) >= 2 and sides.count(False) >= 2, sides
    assert all(torch.isfinite(p.args[0]).all() for p in found)
    # labels name the side, so feedback says which side failed
    assert all((">" in p.label) == s for p, s in zip(found, sides)), [p.label for p in found]


def test_gate_probes_include_mixed_signs_on_both_sides():
    mixed = [p for p in course.lesson(4).gate_probes() if "mixed signs" in p.label]
    assert len(mixed) == 2 and {bool(p.args[0].sum() > 0) for p in mixed} == {True, False}
    assert all((p.args[0] > 0).any() and (p.args[0] < 0).any() for p in mixed)


def test_a_check_is_fast_once_the_program_is_cached():
    exercise = exercises.get("05.hoist")
    exercise.check(exercise.solution)  # cold: builds (or loads) the program
    start = time.perf_counter()
    assert exercise.check(exercise.solution).passed
    assert time.perf_counter() - start < 2.0
