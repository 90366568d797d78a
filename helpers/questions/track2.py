"""Predictions of the shapes track (lessons 06–10). Each reveal runs the real pipeline.

The programs a reveal needs are the lesson's own (same model, same example, same ``dynamic_shapes``),
so in a lesson they come from the cache: pressing Reveal runs the runtime, it does not export.
"""

from __future__ import annotations

import torch
from torch.export import Dim

from .. import models as M
from ..artifact import RuntimeRejectedError
from ..lowering import lower
from ..parity import check_one
from . import Question

__all__ = ["QUESTIONS"]

_STATUS_OPTIONS = ("match", "diverge", "rejected")


def _first_sentence(text: str) -> str:
    return text.split(". ")[0].rstrip(".") + "."


# ----- 06 · static shapes ---------------------------------------------------------------------------
def _vision():
    from ..lessons import shapes

    model = M.TinyVision()
    return model, lower(model, (shapes.camera_frame(64, 64),))


def _static_frame(tensor: torch.Tensor, intended: torch.Tensor, what: str) -> tuple[str, str]:
    """The .pte on ``tensor`` (as the device sends it) against eager on ``intended`` (the frame it means)."""
    model, art = _vision()
    try:
        (out,) = art.run_raw(tensor)
    except RuntimeRejectedError as exc:
        return "rejected", (f"{what}. The runtime compares every input with the sizes and dtype the .pte recorded "
                            f"(1×3×64×64, float32) and refuses anything else. Its words: "
                            f"{exc.reason.split('. Error')[0]}.")
    with torch.no_grad():
        same = bool(torch.allclose(out, model(intended), atol=1e-4))
    return ("match" if same else "diverge"), f"{what}: the runtime ran it."


def _camera_frame() -> tuple[str, str]:
    from ..lessons import shapes

    frame = shapes.camera_frame(48, 64)
    return _static_frame(frame, frame, "A 48×64 frame on a program exported at 64×64")


def _same_pixels() -> tuple[str, str]:
    from ..lessons import shapes

    frame = shapes.camera_frame(32, 128)
    return _static_frame(frame, frame, "32×128 has the same 4,096 pixels as 64×64, but another shape")


def _channels_last() -> tuple[str, str]:
    from ..lessons import shapes

    frame = shapes.camera_frame(64, 64)
    return _static_frame(frame.permute(0, 2, 3, 1).contiguous(), frame,
                         "1×64×64×3 has the same elements, dtype and rank, but its axes in another order")


QUESTIONS = [
    Question("06.camera_frame", "06_static_shapes",
             "TinyVision was exported with a 1×3×64×64 example. The phone's camera delivers 1×3×48×64 frames, which "
             "eager PyTorch accepts. What does the .pte do with one, in the ExecuTorch runtime?",
             _STATUS_OPTIONS, _camera_frame),
    Question("06.same_pixels", "06_static_shapes",
             "Same program (exported at 64×64). A 32×128 frame has exactly as many pixels (4,096) as a 64×64 one. "
             "What does the runtime do with it?", _STATUS_OPTIONS, _same_pixels),
    Question("06.channels_last", "06_static_shapes",
             "Same program. The camera's raw buffer is channels-last: 1×64×64×3, float32 — the same number of "
             "elements, the same dtype and the same rank as the export's 1×3×64×64. What does the runtime do?",
             _STATUS_OPTIONS, _channels_last),
]


# ----- 07 · declaring dimensions ------------------------------------------------------------------------
def _clip(frames: int, seed: int) -> torch.Tensor:
    return torch.randn(1, frames, 4, generator=torch.Generator().manual_seed(seed))


def _one_frame() -> tuple[str, str]:
    model = M.ShapeBranch()
    art = lower(model, (_clip(8, 0),), dynamic_shapes={"x": {1: Dim("frames", min=2, max=16)}})
    row = check_one(model, art, (_clip(1, 1),))
    if row.status in ("rejected", "refused"):
        return "rejected", f"The runtime refused it: {row.message}"
    (out,) = row.pte_output
    return row.status, (f"The runtime ran it: the .pte returns {_fmt(out)}, eager {_fmt(row.eager_output[0])}. "
                        "The runtime does not check a Dim's min (export's asserts are stripped); the graph only holds "
                        "the normalising branch, and the standard deviation of one value is NaN.")


def _fmt(t: torch.Tensor) -> str:
    from ..display import fmt

    return fmt(t)


def _bounded_vision():
    from ..lessons import shapes

    model = M.TinyVision()
    hw = {"x": {2: Dim("height", min=32, max=128), 3: Dim("width", min=32, max=128)}}
    return model, lower(model, (shapes.camera_frame(64, 64),), dynamic_shapes=hw)


def _wide_frame() -> tuple[str, str]:
    from ..lessons import shapes

    _, art = _bounded_vision()
    try:
        art.run_raw(shapes.camera_frame(100, 150))
    except RuntimeRejectedError as exc:
        return "rejects it", f"The runtime refused it: {exc.reason}"
    return "runs it", ("The runtime ran it. For a dynamic input the .pte records one maximum shape (1×3×128×128, "
                       "49,152 elements) and the runtime checks rank, dtype and that the input fits in that many "
                       "elements: 1×3×100×150 is 45,000. Width 150 > max 128 went unnoticed.")


def _auto_tokens() -> tuple[str, str]:
    model = M.TokenPool()
    ids = torch.randint(0, 32, (1, 16), generator=torch.Generator().manual_seed(3))
    art = lower(model, (ids, torch.ones(1, 16)), dynamic_shapes={"ids": {1: Dim.AUTO}, "mask": {1: Dim.AUTO}})
    request = torch.randint(0, 32, (1, 40), generator=torch.Generator().manual_seed(4))
    try:
        art.run_raw(request, torch.ones(1, 40))
    except RuntimeRejectedError as exc:
        return "rejects it", ("Dim.AUTO records no max, and ExecuTorch cannot plan memory for 'unbounded': it plans "
                              "the axis at the example's size (16 tokens). The runtime's words: "
                              f"{exc.reason.split('. Error')[0]}.")
    return "runs it", "The runtime ran it."


def _auto_loop() -> tuple[str, str]:
    x = torch.randn(3, 4, generator=torch.Generator().manual_seed(5))
    try:
        art = lower(M.BatchLoop(), (x,), dynamic_shapes={"x": {0: Dim.AUTO}})
    except Exception:  # noqa: BLE001 - an export error is one of the answers
        return "export fails", "torch.export raised an error."
    contract = art.input_contract()
    axis = contract.inputs[0].axes[0]
    if axis.size is not None:
        return "a static batch, silently", (
            f"Export succeeded without a word, and the contract says {contract.signature()}: the batch is a constant "
            f"{axis.size}. range(x.shape[0]) needed a Python int, so export specialized the axis; with Dim.AUTO that "
            "is allowed, not an error.")
    return "a dynamic batch", f"The contract says {contract.signature()}."


QUESTIONS += [
    Question("07.one_frame", "07_dynamic_dims",
             "ShapeBranch was exported with Dim('frames', min=2, max=16). A one-frame clip reaches the device "
             "(no host check). Compared with eager PyTorch, the .pte…", _STATUS_OPTIONS, _one_frame),
    Question("07.wide_frame", "07_dynamic_dims",
             "TinyVision exported with Dim('height', min=32, max=128) and Dim('width', min=32, max=128). The device "
             "sends a 1×3×100×150 frame (width above its max) straight to the runtime. The runtime…",
             ("runs it", "rejects it"), _wide_frame),
    Question("07.auto_tokens", "07_dynamic_dims",
             "TokenPool exported with Dim.AUTO on the sequence axis of ids and mask, with a 16-token example. A "
             "40-token request reaches the runtime. The runtime…", ("runs it", "rejects it"), _auto_tokens),
    Question("07.auto_loop", "07_dynamic_dims",
             "BatchLoop (a Python for over x.shape[0]) exported with Dim.AUTO on the batch axis, example batch 3. "
             "What does export produce?", ("export fails", "a dynamic batch", "a static batch, silently"), _auto_loop),
]


# ----- 08 · what dynamic costs -------------------------------------------------------------------------
def _segmenter(max_side: int | None):
    from ..lessons import shapes

    return shapes.segmenter_program(max_side=max_side)[1]


def _segmenter_delegation() -> tuple[str, str]:
    from ..lessons.shapes import declined_reasons

    art = _segmenter(128)
    d = art.delegation()
    total = d.delegated_nodes + d.portable_nodes
    if d.portable_nodes == 0:
        answer = "all of it"
    elif d.delegated_nodes * 2 < total:
        answer = "less than half"
    elif len(d.portable_ops()) == 1:
        answer = "all but one operator"
    else:
        answer = "most, but several operators"
    why = "; ".join(f"{op}: {', '.join(words)}" for op, words in declined_reasons(art).items())
    return answer, (f"{d.summary()}. Left on portable kernels — {why} (XNNPACK's own words). The model still runs, "
                    "split into two delegate calls with a portable kernel between them.")


def _classifier_portable() -> tuple[str, str]:
    from ..lessons import shapes

    hw = {"x": {2: Dim("height", min=32, max=128), 3: Dim("width", min=32, max=128)}}
    art = lower(M.TinyVision(), (shapes.camera_frame(64, 64),), dynamic_shapes=hw)
    d = art.delegation()
    answer = "all" if d.delegated_nodes == 0 else str(d.portable_nodes) if d.portable_nodes < 3 else "3 or more"
    return answer, (f"{d.summary()}: convolutions, relu, a mean over height and width and a linear head all have "
                    "XNNPACK rules that hold for symbolic sizes. Whether dynamic costs delegation depends on the "
                    "operators: look, per model.")


def _raise_max() -> tuple[str, str]:
    small, big = _segmenter(128), _segmenter(256)
    d1, d2 = small.delegation(), big.delegation()
    same = (d1.delegated_nodes, d1.portable_nodes) == (d2.delegated_nodes, d2.portable_nodes)
    grew = big.planned_memory_bytes() > small.planned_memory_bytes()
    answer = {(True, True): "only the arena", (False, False): "only delegation", (False, True): "both",
              (True, False): "neither"}[(same, grew)]
    return answer, (f"Delegation: {d1.delegated_nodes} → {d2.delegated_nodes} nodes delegated (the partitioner "
                    f"declines by kind of size, symbolic or not, not by how large it may get). Arena: "
                    f"{small.planned_memory_bytes():,} → {big.planned_memory_bytes():,} bytes (planned for the max).")


QUESTIONS += [
    Question("08.segmenter_delegation", "08_cost_of_dynamic",
             "TinySegmenter exported with height and width dynamic (32..128). The static export is 100% on XNNPACK. "
             "How much of the dynamic program's graph stays on XNNPACK?",
             ("all of it", "all but one operator", "most, but several operators", "less than half"),
             _segmenter_delegation),
    Question("08.classifier_portable", "08_cost_of_dynamic",
             "TinyVision (lesson 06's classifier) exported with the same dynamic height and width. How many of its "
             "graph nodes run on portable kernels?", ("0", "1", "2", "3 or more", "all"), _classifier_portable),
    Question("08.raise_max", "08_cost_of_dynamic",
             "Raise the dynamic segmenter's max from 128 to 256 (height and width). What changes?",
             ("only the arena", "only delegation", "both", "neither"), _raise_max),
]


# ----- 09 · normalize on the host, or bucket ----------------------------------------------------------------
def _pad_to_512() -> tuple[str, str]:
    from ..lessons import bucketing as B

    lengths = B.request_lengths()
    waste = B.padding_waste(lengths, (512,))
    answer = "less than a third" if waste < 1 / 3 else "about half" if waste < 0.62 else "about three quarters"
    return answer, (f"{waste:.0%} of all processed positions are padding: the median request has "
                    f"{sorted(lengths)[len(lengths) // 2]} tokens, and every request costs 512.")


def _bucket_257() -> tuple[str, str]:
    from ..lessons import bucketing as B

    d = B.dispatch(B.tokens(257), B.bucket_program())
    return d.method, (f"257 tokens do not fit the 256 bucket, so the dispatcher takes the next one: {d.method}, with "
                      f"{d.bucket - d.length} padding tokens ({d.waste:.0%} of that call).")


def _fourth_bucket() -> tuple[str, str]:
    from ..lessons import bucketing as B

    three, four = B.bucket_program(), B.bucket_program((64, 128, 256, 512))
    grew = four.nbytes - three.nbytes
    weights = sum(p.numel() * p.element_size() for p in B.bucket_model().parameters())
    answer = "a few KB" if grew < weights / 4 else "another copy of the weights"
    return answer, (f"{three.nbytes:,} → {four.nbytes:,} bytes (+{grew:,}); the weights are {weights:,} bytes. "
                    "Methods of one .pte share the weights: a new method adds its instructions and its delegate blob.")


QUESTIONS += [
    Question("09.pad_to_512", "09_normalize_or_bucket",
             "400 requests of 12 to 512 tokens (mostly short, a long tail). One static program at 512 tokens, every "
             "request padded to 512: what share of all processed positions is padding?",
             ("less than a third", "about half", "about three quarters"), _pad_to_512),
    Question("09.bucket_257", "09_normalize_or_bucket",
             "Buckets of 128, 256 and 512 tokens, as methods seq_128, seq_256, seq_512 of one .pte. Which method serves "
             "a 257-token request?", ("seq_128", "seq_256", "seq_512", "none: it is refused"), _bucket_257),
    Question("09.fourth_bucket", "09_normalize_or_bucket",
             "Add a fourth bucket (64 tokens) as one more method of the same .pte. Roughly how much bigger is the "
             "file?", ("a few KB", "another copy of the weights"), _fourth_bucket),
]


# ----- 10 · diagnosis drills --------------------------------------------------------------------------------
def _batch_loop() -> tuple[str, str]:
    from ..lessons import drills

    drill = drills.Drill(
        "batch_loop", "A per-item loop exported with batch 3; the device sends 4 items.",
        "helpers.lower(BatchLoop(), (torch.randn(3, 4),))",
        lambda: (M.BatchLoop(), (torch.randn(3, 4, generator=torch.Generator().manual_seed(20)),), None),
        lambda: (torch.randn(4, 4, generator=torch.Generator().manual_seed(21)),),
        "input outside the export contract", track="control flow")
    finding = drills.investigate(drill)
    return finding.answer, "\n".join(finding.evidence)


def _answers() -> tuple[str, ...]:
    from ..lessons.drills import ANSWERS

    return ANSWERS


QUESTIONS += [
    Question("10.batch_loop", "10_diagnosis_drills",
             "BatchLoop (a Python for over the batch) was exported with a batch of 3; the device sends a batch of 4. "
             "Which diagnosis do the tools give?", _answers(), _batch_loop),
]
