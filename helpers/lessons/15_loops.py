"""Lesson 15 · loops: a ``while`` on data has no early exit on the device in ExecuTorch 1.5.1 — a cap and a mask
(unrolled or ``scan``), or the loop in the app; its predictions, its exercise (``15.stop_at_end``) and its card."""

from __future__ import annotations

import functools
from typing import Any

import torch
from torch import nn
from torch._higher_order_ops.scan import scan

from helpers.exercises.grading import Exercise, Verdict, as_model, base_context, lowered, parity
from helpers.interview import Card
from helpers.lowering import lower
from helpers.parity import Probe
from helpers.questions import Question, Reveal

LESSON = "15_loops"
WIDTH = 8  # samples in a frame
LOUDEST = 2.0 ** 16  # the app's contract: a frame's peak is at most 2**16, so 16 halvings always suffice


def frame(peak: float, seed: int = 0) -> torch.Tensor:
    """A frame of :data:`WIDTH` samples (random, seeded) whose largest magnitude is ``peak``."""
    x = torch.rand(WIDTH, generator=torch.Generator().manual_seed(seed)) * 2 - 1
    return x / x.abs().max() * peak


def halvings(x: torch.Tensor) -> int:
    """How many times the loop halves ``x`` (counted in eager, on the host)."""
    count = 0
    while x.abs().max() > 1:
        x, count = x / 2, count + 1
    return count


class HalveUntilQuiet(nn.Module):
    """Halve the frame until its peak fits in [-1, 1]: as many halvings as its loudness needs."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        while x.abs().max() > 1:
            x = x / 2
        return x


class HalveWhileLoop(nn.Module):
    """The same loop, written with ``torch.while_loop``: the condition and the body as functions."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        def loud(x):
            return x.abs().max() > 1

        def halve(x):
            return (x / 2,)

        (x,) = torch.while_loop(loud, halve, (x,))
        return x


class HalveAtMost(nn.Module):
    """At most ``steps`` halvings, each one masked: once the frame is quiet, ``torch.where`` keeps it as it is."""

    def __init__(self, steps: int) -> None:
        super().__init__()
        self.steps = steps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for _ in range(self.steps):
            x = torch.where(x.abs().max() > 1, x / 2, x)
        return x


class HalveScan(HalveAtMost):
    """:class:`HalveAtMost`'s masked step, written once and run ``steps`` times by ``scan`` (one step per row of
    ``ticks``, a tensor of ``steps`` rows the step does not read)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        def step(x, tick):
            x = torch.where(x.abs().max() > 1, x / 2, x)
            return x, tick.clone()

        ticks = torch.zeros(self.steps, 1)
        x, _ = scan(step, x, ticks)
        return x


class HalveOnce(nn.Module):
    """One masked halving, and whether the frame is still loud after it: the app calls it until it is not."""

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        x = torch.where(x.abs().max() > 1, x / 2, x)
        return x, x.abs().max() > 1


def app_loop(step: Any, x: torch.Tensor, most: int = 64) -> tuple[torch.Tensor, int]:
    """The loop in the app: call the one-step program until the frame is quiet (at most ``most`` calls); returns the
    frame and how many calls it took."""
    for calls in range(1, most + 1):
        x, loud = step.run_raw(x)
        if not bool(loud):
            return x, calls
    raise RuntimeError(f"still loud after {most} calls")


def app_loop_rounds(step: Any, x: torch.Tensor, rounds: int = 5, repeat: int = 100) -> list[float]:
    """Median wall time (ms) of the app's loop over the one-step program's runtime call alone
    (:meth:`PteArtifact.bare_call`), ``repeat`` loops per round, for ``rounds`` rounds."""
    from helpers.timing import median_call_ms

    call = step.bare_call()

    def loop() -> None:
        y, loud = call([x])
        while bool(loud):
            y, loud = call([y])

    return [median_call_ms(loop, repeat=repeat, warmup=10) for _ in range(rounds)]


def program_size(art: Any) -> tuple[int, int]:
    """(instructions the runtime walks in ``forward``, bytes of the .pte)."""
    return len(art.instructions()), art.nbytes


# ----- predictions --------------------------------------------------------------------------------
@functools.cache
def while_loop_diagnosis() -> Any:
    """HalveWhileLoop exported and lowered once per process (a failed lowering is not cached on disk)."""
    from helpers.diagnose import diagnose_export

    return diagnose_export(HalveWhileLoop(), (frame(1000.0),))


def _while_loop() -> Reveal:
    d = while_loop_diagnosis()
    if d.ok:
        return Reveal("runs", f"it exported, lowered and loaded: {d.summary}", why_not={
            "export fails": "export returned a graph.", "lowering fails": "lowering wrote the program."})
    graph = d.exported.graph_module.code if d.exported is not None else ""
    actual = "lowering fails" if d.stage == "lower" else "export fails" if d.stage == "export" else "runs"
    return Reveal(actual, (
        f"export recorded the loop as one operator ({'higher_order.while_loop' if 'while_loop' in graph else '?'}), "
        f"its condition and body as subgraphs; then lowering stopped ({d.stage}): "
        f"{line_with(d.message, 'Unsupported')} ExecuTorch 1.5.1's program writer (the emitter) writes "
        "cond, map and scan, and not while_loop."), why_not={
        "export fails": "export succeeded: torch.while_loop is made to be exported, and its graph holds it.",
        "runs": "no program was written: lowering failed before any .pte existed.",
    })


def line_with(message: str, marker: str) -> str:
    """The first line of ``message`` that holds ``marker`` (the error's own words), else its first line."""
    lines = [line.strip() for line in message.splitlines() if marker in line]
    return (lines[0] if lines else message.splitlines()[0]).rstrip(".") + "."


def _past_the_cap() -> Reveal:
    art = lower(HalveAtMost(8), (frame(1000.0),))
    loud = frame(1000.0, seed=1)
    try:
        (out,) = art.run_raw(loud)
    except Exception as exc:  # noqa: BLE001 - the runtime's refusal is an answer too
        return Reveal("refuses it", f"the runtime refused: {str(exc).splitlines()[0]}", why_not={
            "returns it halved 8 times": "nothing came back.", "returns it halved 10 times": "nothing came back."})
    times = round(float(torch.log2(loud.abs().max() / out.abs().max())))
    peak = float(out.abs().max())
    actual = {8: "returns it halved 8 times", 10: "returns it halved 10 times"}.get(times, f"halved {times} times")
    why_not = {
        "refuses it": "nothing refused it: every input of the right shape runs the same 8 steps.",
        "returns it halved 10 times": (f"it was halved {times} times: the program has 8 steps, whatever the frame "
                                       "needs."),
        "returns it halved 8 times": f"it was halved {times} times.",
    }
    return Reveal(actual, (
        f"the .pte returned the frame halved {times} times: its peak is {peak:.2f}, still above 1, and nothing says "
        "so. The program holds 8 masked steps and no more."), why_not={
        option: text for option, text in why_not.items() if option != actual})


def _scan_size() -> Reveal:
    small, large = (lower(HalveScan(steps), (frame(1000.0),)) for steps in (16, 64))
    (n16, b16), (n64, b64) = program_size(small), program_size(large)
    actual = ("the same size" if b16 == b64 else "about 4× larger" if b64 > 3 * b16 else "smaller" if b64 < b16
              else f"{b64 / b16:.1f}× larger")
    why_not = {
        "about 4× larger": f"{b64} bytes against {b16}: the step is not copied once per step.",
        "the same size": f"{b64} bytes against {b16}.",
        "smaller": f"{b64} bytes against {b16}: a longer loop adds nothing to remove.",
    }
    return Reveal(actual, (
        f"16 steps: {b16} bytes, {n16} instructions; 64 steps: {b64} bytes, {n64} instructions. The step is written "
        "once; the number of steps is the length of the tensor scan walks, a number in the program."), why_not={
        option: text for option, text in why_not.items() if option != actual})


# ----- exercise -----------------------------------------------------------------------------------
VOCAB, END, LONGEST = 16, 0, 12  # tokens 0 … 15; 0 is the end token; every start reaches it within 12 tokens


def next_token_logits(seed: int = 0) -> torch.Tensor:
    """A ``VOCAB × VOCAB`` table of next-token scores (seeded) in which every start token reaches :data:`END` within
    :data:`LONGEST` tokens, one of them in exactly 12; the end token's own row points at another token."""
    g = torch.Generator().manual_seed(seed)
    order = (torch.randperm(VOCAB - 1, generator=g) + 1).tolist()
    following = [END] * VOCAB
    depth = {END: 0}
    for i, token in enumerate(order):
        if i < LONGEST:  # a chain of 12: order[0] → END, order[i] → order[i - 1]
            parent = END if i == 0 else order[i - 1]
        else:
            choices = [t for t in order[:i] if depth[t] < LONGEST]
            parent = choices[int(torch.randint(len(choices), (1,), generator=g))]
        following[token], depth[token] = parent, depth[parent] + 1
    following[END] = order[3]
    logits = torch.randn(VOCAB, VOCAB, generator=g) * 0.5
    logits[torch.arange(VOCAB), torch.tensor(following)] += 4.0
    return logits


class Generate(nn.Module):
    """Greedy generation from a start token: the next token is the best-scoring one after the last, until the end
    token. The app receives 12 tokens: those generated, the end token, then end tokens as padding."""

    def __init__(self, seed: int = 0) -> None:
        super().__init__()
        self.next_token = nn.Embedding(VOCAB, VOCAB)
        with torch.no_grad():
            self.next_token.weight.copy_(next_token_logits(seed))

    def forward(self, start: torch.Tensor) -> torch.Tensor:
        tokens = []
        token = start
        while token.item() != END:
            token = self.next_token(token).argmax(-1)
            tokens.append(token)
        padding = torch.full((LONGEST - len(tokens),), END)
        return torch.cat(tokens + [padding])


def start(token: int) -> torch.Tensor:
    """A start token as the app sends it: an int64 tensor of shape (1,)."""
    return torch.tensor([token])


OTHER_TABLE = 7  # the seed of a second table the check loads into the answer (memorised tokens fail on it)


def _grade_stop_at_end(answer: Any) -> list[Verdict]:
    reference = Generate()
    model, verdict = as_model(answer, reference)
    if model is None:
        return [verdict]
    verdicts = [verdict]
    hint = ("the device runs a fixed number of steps: how many does the longest generation need, and what must a "
            "step do once the end token has come?")
    for seed, where in ((0, "this table"), (OTHER_TABLE, "another table")):
        table = Generate(seed)
        model.load_state_dict(table.state_dict())
        art, verdict = lowered(model, (start(3),), hint=hint)
        if seed == 0:
            verdicts.append(verdict)
        if art is None:
            return verdicts
        probes = [Probe(f"start {t}{'' if seed == 0 else ', ' + where}", (start(t),)) for t in range(1, VOCAB)]
        verdicts.append(parity(table, art, probes, hint=hint, criterion=(
            f"the same 12 tokens as Generate for every start token, {where}")))
        if not verdicts[-1].passed:
            return verdicts
    return verdicts


def solve_stop_at_end() -> Any:
    """15.stop_at_end: 12 masked steps; after the end token, every step keeps the end token."""
    class StopAtEnd(Generate):
        def forward(self, start):
            token, done, tokens = start, start == END, []
            for _ in range(LONGEST):
                token = torch.where(done, END, self.next_token(token).argmax(-1))
                tokens.append(token)
                done = done | (token == END)
            return torch.cat(tokens)


    return StopAtEnd()


QUESTIONS = [
    Question("15.while_loop", LESSON,
             "HalveWhileLoop writes the loop with torch.while_loop. Exported, then lowered for the device: where "
             "does it stop?", ("export fails", "lowering fails", "runs"), _while_loop),
    Question("15.past_the_cap", LESSON,
             "HalveAtMost(8)'s .pte receives a frame whose peak is 1000: the eager loop would halve it 10 times. "
             "The .pte…", ("refuses it", "returns it halved 8 times", "returns it halved 10 times"), _past_the_cap),
    Question("15.scan_size", LESSON,
             "HalveScan(16) and HalveScan(64) are lowered for the device. Against the 16-step program, the 64-step "
             ".pte file is…", ("about 4× larger", "the same size", "smaller"), _scan_size),
]


EXERCISES = [
    Exercise(
        id="15.stop_at_end", lesson=LESSON, kind="model",
        title="stop at the end token",
        goal=("Make Generate export, lower for XNNPACK and run on the device: for every start token (1 to 15) its "
              ".pte must return Generate's 12 tokens in eager mode — on this table and on another one the check "
              "loads into your model."),
        grade=_grade_stop_at_end, solve=solve_stop_at_end,
        context=lambda: {**base_context(), "Generate": Generate, "END": END, "LONGEST": LONGEST}),
]


CARDS = [
    Card(
        id="15.loops", lesson=LESSON, topic="loops", kind="constraints",
        question="A model loops until a condition on its data holds (converged, end token). How do you run it with "
                 "ExecuTorch, and what does each way cost?",
        answer=("A Python while on a tensor cannot be exported: its condition is a data-dependent guard. "
                "torch.while_loop exports, but ExecuTorch 1.5.1 does not write it into a program ('Unsupported "
                "control flow operator: while_loop'). What runs is a loop whose number of steps is fixed before it "
                "starts: unroll a cap of steps, each masked with torch.where so it changes nothing once the "
                "condition holds (the graph and the .pte grow with the cap), or write the masked step once with "
                "scan (the program stays the same size; the runtime loops with jumps, outside the delegate). Both "
                "always run every step, and past the cap they return an unfinished answer silently: derive the cap "
                "from the input contract and have the app check the result. To stop as early as the input allows, "
                "export one step and loop in the app, one call per step, as an LLM's decode loop does."),
        points=("while on data: a guard export cannot decide; while_loop: exports, not emitted by 1.5.1",
                "a cap plus a mask: every step runs; the cap comes from the contract",
                "unrolled grows with the cap, scan does not",
                "past the cap: silent; the app checks",
                "stopping early: the loop in the app, one call per step"),
        follow_ups=(
            ("Unrolled or scan: which one do you ship?",
             "Measure both on the device. Unrolled, the partitioner sees every step (in lesson 15 XNNPACK took each "
             "step's abs and division) and the program grows with the cap; scan keeps one step in the program "
             "whatever the cap and runs it on the portable kernels, the runtime jumping back to it. In both, the "
             "time per call follows the cap. Program size, what the delegate takes and time decide it."),
            ("Why not loop in the app every time?",
             "Each step becomes a runtime call with its own overhead and a round trip to the host; for a few "
             "cheap steps the fixed loop inside one call is faster. The app's loop wins when steps are expensive "
             "and the exit usually comes early, as in decoding tokens."),
        )),
    Card(
        id="15.same_time", lesson=LESSON, topic="loops", kind="diagnosis", held_back=True,
        question=("An on-device denoiser refines a frame until it is clean enough. Product notices that clean frames "
                  "take exactly as long as the noisiest ones, and asks why easy inputs are not faster. What do you "
                  "tell them, and what would you measure before changing anything?"),
        answer=("The program has no loop that stops on a value: ExecuTorch 1.5.1 does not emit torch.while_loop, "
                "so the refinement was exported as a fixed number of steps (unrolled or scan), each masked with "
                "torch.where so it changes nothing once the frame is clean. Every call runs every step, and time "
                "follows the cap, not the frame. To make easy frames faster the loop moves to the app: export one "
                "step and call it until the frame is clean, which costs one runtime call per step. Before moving it "
                "I measure the runtime call alone for the whole program and for one step, on the device's threads, "
                "and the distribution of steps real frames need: the app's loop wins when steps are expensive "
                "against a call and most frames finish early."),
        points=("no while_loop in a 1.5.1 program: a fixed count of masked steps",
                "every call runs every step: time follows the cap",
                "early exit = one step exported, the loop in the app",
                "measure: the call alone (whole vs one step), the steps real inputs need"),
        follow_ups=(
            ("Why not lower the cap so that everything is faster?",
             "A frame that needs more steps than the cap gets an unfinished answer, silently: the program runs its "
             "steps and returns. The cap comes from the input contract (the most steps any allowed input needs), "
             "and the app checks the result before it uses it."),
            ("What if the cap doubles: does the program grow?",
             "Unrolled, yes: each step is written into the graph, so the program grows with the cap. With scan the "
             "step is written once and the runtime jumps back to it, so the size stays the same; its time still "
             "follows the cap."),
        )),
]
