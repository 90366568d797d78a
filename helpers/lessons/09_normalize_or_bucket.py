"""Lesson 09 · normalize on the host, or bucket: its predictions, its exercises and its interview cards."""

from __future__ import annotations

from typing import Any

import torch

from helpers.artifact import RuntimeRejectedError
from helpers.exercises.grading import (
    Exercise,
    Verdict,
    base_context,
    parity,
)
from helpers.interview import Card
from helpers.lessons import bucketing
from helpers.parity import Probe
from helpers.questions import Question, Reveal

LESSON = "09_normalize_or_bucket"


# ----- predictions ----------------------------------------------------------------------------------
def _pad_to_512() -> Reveal:
    lengths = bucketing.request_lengths()
    waste = bucketing.padding_waste(lengths, (512,))
    answer = "less than a third" if waste < 1 / 3 else "about half" if waste < 0.62 else "about three quarters"
    median = sorted(lengths)[len(lengths) // 2]
    short = sum(n <= 128 for n in lengths) / len(lengths)
    mean = sum(lengths) / len(lengths)
    return Reveal(answer, (f"{waste:.0%} of all processed positions are padding: the median request has {median} "
                           "tokens, and every request costs 512."), why_not={
        "less than a third": (f"the requests carry {mean:.0f} real tokens on average out of the 512 each one costs: "
                              f"{1 - waste:.0%} real, {waste:.0%} padding."),
        "about half": (f"half would need the average request near 256 tokens; it has {mean:.0f}, and {short:.0%} of "
                       "requests have 128 tokens or fewer."),
    })


def _bucket_257() -> Reveal:
    program = bucketing.bucket_program()
    request = bucketing.tokens(257)
    d = bucketing.dispatch(request, program)
    try:  # what the runtime says if the app sent the request, unpadded, to the 256 bucket
        program.run_raw(request, torch.ones(1, 257), method="seq_256")
        too_long = "ran it (it should not have)"
    except RuntimeRejectedError as exc:
        too_long = f"refuses it: {exc.reason.split('. Error')[0]}"
    return Reveal(d.method, (f"257 tokens do not fit the 256 bucket, so the dispatcher takes the next one: "
                             f"{d.method}, with {d.bucket - d.length} padding tokens ({d.waste:.0%} of that call)."),
                  why_not={
        "seq_128": "a bucket must hold the whole request, and 257 tokens are more than twice 128: the dispatcher never picks a "
                   "smaller bucket (it would have to truncate).",
        "seq_256": f"each bucket's shape is static: 257 is one token too many for seq_256, whose runtime {too_long}.",
        "none: it is refused": (f"the largest bucket, {max(bucketing.BUCKETS)}, holds 257 tokens: only a request over "
                                f"{max(bucketing.BUCKETS)} tokens finds no method."),
    })


def _fourth_bucket() -> Reveal:
    three, four = bucketing.bucket_program(), bucketing.bucket_program((64, 128, 256, 512))
    grew = four.nbytes - three.nbytes
    weights = sum(p.numel() * p.element_size() for p in bucketing.bucket_model().parameters())
    answer = "a few KB" if grew < weights / 4 else "another copy of the weights"
    return Reveal(answer, (f"{three.nbytes:,} → {four.nbytes:,} bytes (+{grew:,}); the weights are {weights:,} bytes. "
                           "Methods of one .pte share the weights: a new method adds its instructions and its delegate "
                           "blob."), why_not={
        "another copy of the weights": (f"another copy would add about {weights:,} bytes; the file grew by {grew:,}, "
                                        f"{grew / weights:.0%} of that."),
    })


QUESTIONS = [
    Question("09.pad_to_512", LESSON,
             "400 requests of 12 to 512 tokens (mostly short, a long tail). One static program at 512 tokens, every "
             "request padded to 512: what share of all processed positions is padding?",
             ("less than a third", "about half", "about three quarters"), _pad_to_512),
    Question("09.bucket_257", LESSON,
             "Buckets of 128, 256 and 512 tokens, as methods seq_128, seq_256, seq_512 of one .pte. Which method serves "
             "a 257-token request?", ("seq_128", "seq_256", "seq_512", "none: it is refused"), _bucket_257),
    Question("09.fourth_bucket", LESSON,
             "Add a fourth bucket (64 tokens) as one more method of the same .pte. Roughly how much bigger is the "
             "file?", ("a few KB", "another copy of the weights"), _fourth_bucket),
]


# ----- exercises ------------------------------------------------------------------------------------
MAX_BUCKETS = 4  # each bucket is one more method of the .pte: the team's budget
WASTE_TARGET = 0.28  # at most this share of processed positions may be padding


def _bucket_sizes(answer: Any) -> tuple[tuple[int, ...] | None, Verdict]:
    criterion = "a list of bucket sizes (whole numbers of tokens)"
    if isinstance(answer, (str, bytes)):
        return None, Verdict(criterion, False, f"the answer is the string {answer!r}",
                             "assign a list of ints, e.g. [128, 512]")
    try:
        sizes = tuple(sorted({int(b) for b in answer}))
    except (TypeError, ValueError):
        return None, Verdict(criterion, False, f"the answer is {answer!r}", "assign a list of ints, e.g. [128, 512]")
    if not sizes or sizes[0] < 1 or any(isinstance(b, float) and not float(b).is_integer() for b in answer):
        return None, Verdict(criterion, False, f"the answer is {answer!r}", "bucket sizes are positive token counts")
    return sizes, Verdict(criterion, True, "/".join(map(str, sizes)))


def _grade_pick_buckets(answer: Any) -> list[Verdict]:
    buckets, verdict = _bucket_sizes(answer)
    verdicts = [verdict]
    if buckets is None:
        return verdicts
    if len(buckets) > MAX_BUCKETS:
        verdicts.append(Verdict(f"at most {MAX_BUCKETS} buckets", False, f"you have {len(buckets)}",
                                "every bucket is a method to export, test and ship: make the few you have count"))
        return verdicts
    verdicts.append(Verdict(f"at most {MAX_BUCKETS} buckets", True, f"{len(buckets)}"))
    lengths = bucketing.request_lengths()
    unserved = sorted(n for n in lengths if n > buckets[-1])
    if unserved:
        verdicts.append(Verdict(
            "every request is served", False,
            f"{len(unserved)} of {len(lengths)} requests ({unserved[0]} to {unserved[-1]} tokens) are longer than your "
            f"largest bucket ({buckets[-1]}): the app would have to refuse or truncate them",
            "the largest bucket must hold the longest request the product accepts"))
        return verdicts
    verdicts.append(Verdict("every request is served", True, f"the longest request has {max(lengths)} tokens"))
    waste = bucketing.padding_waste(lengths, buckets)
    verdicts.append(Verdict(
        f"padding waste at most {WASTE_TARGET:.0%}", waste <= WASTE_TARGET,
        f"{waste:.1%} of all processed positions are padding",
        "an edge just above a crowd of lengths saves the most padding; look at where request_lengths() is dense "
        "(the histogram) and try candidates with padding_waste(lengths, buckets) before you build anything"))
    if waste > WASTE_TARGET:
        return verdicts
    reference = bucketing.bucket_model()
    files = bucketing.separate_programs(buckets, reference)
    edges = sorted({1} | {b + d for b in buckets for d in (-1, 0, 1) if 1 <= b + d <= buckets[-1]})
    probes = [Probe(f"a {n}-token request", (bucketing.tokens(n), torch.ones(1, n))) for n in edges]
    verdicts.append(parity(
        reference, files[buckets[-1]], probes, run=lambda p: bucketing.dispatch(p.args[0], files, buckets).output,
        criterion="every bucket's edges (n−1, n, n+1) match eager on the unpadded request", hint=(
            "the app pads with token 0 and a mask of 0s: the model must give the same answer as on the request alone")))
    return verdicts


def solve_pick_buckets() -> Any:
    """The solution of 09.pick_buckets."""
    from itertools import combinations

    # Try every set of 3 inner edges on multiples of 32, plus 512 for the longest requests; keep the least padding.
    lengths = bucketing.request_lengths()
    candidates = range(32, 512, 32)
    return min(([*inner, 512] for inner in combinations(candidates, 3)),
               key=lambda buckets: bucketing.padding_waste(lengths, buckets))


EXERCISES = [
    Exercise(
        id="09.pick_buckets", lesson=LESSON,
        title="bucket sizes for the product's request lengths",
        goal=(f"Choose at most {MAX_BUCKETS} bucket sizes (a list of ints) for the requests of request_lengths(): every "
              f"request must be served, at most {WASTE_TARGET:.0%} of all processed positions may be padding, and each "
              "bucket's edges must match eager on the unpadded request."),
        grade=_grade_pick_buckets, solve=solve_pick_buckets,
        context=lambda: {**base_context(), "bucketing": bucketing}, kind="buckets"),
]

CARDS = [
    Card(
        id="09.dynamic_or_buckets", lesson=LESSON, topic="normalize on the host, dynamic or buckets",
        kind="trade-off",
        question=("Camera frames and text requests vary in size. For each: a dynamic Dim, buckets, or normalize on "
                  "the host?"),
        answer=("Camera frames: normalize on the host. The app letterboxes to the network's input, the graph "
                "stays static, delegated like the static export, with the smallest arena, and the model is "
                "trained with the same preprocessing. Text: padding to the maximum wastes most of the work, so "
                "either a bounded Dim, planned for the max and possibly less delegated, or a few static buckets "
                "as methods of one .pte, sharing the weights at a few KB each and bounding the padding (loaded together, "
                "each method holds its own arena unless the app shares one). I measure"
                " latency and size for both, test parity on every bucket's edges, and state the trade."),
        points=("vision: letterbox on the host, static graph, smallest arena; train with the same preprocessing",
                "sequences: padding to the max wastes compute; a bounded Dim or buckets",
                "buckets as methods of one .pte share weights (a few KB per method); separate files copy them",
                "edges from the length distribution; parity on each bucket's edges; measure, then choose")),
    Card(
        id="09.choose_buckets", lesson=LESSON, topic="normalize on the host, dynamic or buckets",
        kind="constraints",
        question=("You may ship at most four sequence buckets. How do you choose their sizes, and how do you test "
                  "them?"),
        answer=("The largest bucket must hold the longest request the product accepts, or those requests are "
                "refused. A request pays its bucket minus its length, so I place the other edges from the real "
                "length distribution, just above where lengths crowd. Powers of two are a habit, and equal-count "
                "quantiles are not optimal either; a small search over candidate edges against the measured "
                "padding waste does better. Then I test parity at n-1, n and n+1 for each bucket against eager on"
                " the unpadded request, with a mask that makes padding inert."),
        points=("the largest bucket covers the longest accepted request",
                "edges from the measured length distribution; minimise padded positions",
                "powers of two and equal-count quantiles are not automatically optimal",
                "parity at n-1, n, n+1 for each bucket against eager on the unpadded request; mask the padding")),
    Card(
        id="09.shared_arenas", lesson=LESSON, topic="normalize on the host, dynamic or buckets", kind="constraints",
        held_back=True,
        question="Three buckets ship as three methods of one .pte and the app loads all three. How much activation "
                 "memory does it hold?",
        answer=("By default the sum of the three memory plans: the runtime gives each loaded method its own planned "
                "buffers. ExecuTorch's C++ Module can share one activation arena between its methods, sized to the "
                "largest (share_memory_arenas, default false, in extension/module/module.h); then an output is only "
                "valid until another method runs, so the app consumes or copies it first, and the Module is not "
                "thread-safe. The weights are in the file once either way: a method adds its instructions and its "
                "delegate blob, a few KB."),
        points=("each loaded method has its own plan: the sum, by default",
                "share_memory_arenas shares one arena sized to the largest, opt-in in the C++ Module",
                "then outputs are valid only until the next method runs; weights are stored once anyway"),
        follow_ups=(
            ("Why is sharing the arenas not the default?",
             "Because methods then write into the same buffers: an output read after another method ran may have "
             "been overwritten. The header says to consume or copy outputs before calling execute again. It suits "
             "an app that calls one method at a time and copies what it keeps."),
            ("What if the app loads only the bucket it needs, when it needs it?",
             "Then it holds one plan at a time, and pays a load_method, which also initialises that method's "
             "delegate, each time it switches bucket; the file still carries every method."),
        )),
]
