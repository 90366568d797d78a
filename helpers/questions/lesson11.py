"""Predictions of lesson 11 (the export doctor). Each reveal runs the doctor on the real pipeline."""

from __future__ import annotations

from . import Question

__all__ = ["QUESTIONS"]


def _report(*argv: str):
    from ..lessons.doctor import report_for

    return report_for(list(argv))


def _smoke_vs_doctor() -> tuple[str, str]:
    r = _report("helpers.models:ShapeBranch", "--example", "2x8x4", "--dim", "x:1:frames:1:32")
    bad = ", ".join(row.label for row in r.failing_rows)
    return r.verdict, (f"{r.headline}: {bad}. The smoke test used 8 frames; the doctor also probes every Dim's "
                       "edges, and at one frame the .pte normalises over a single value (NaN) while eager skips "
                       "the normalisation.")


def _config_branch() -> tuple[str, str]:
    r = _report("helpers.models:ConfigBranch", "--example", "2x4")
    return r.verdict, ("The doctor compares the .pte with the model you hand it, and that model has the same flag "
                       "baked in: both sides agree. If the app flips use_residual later, the .pte will not follow; "
                       "export one program per setting (lesson 05) and examine each.")


def _batch_loop_static() -> tuple[str, str]:
    r = _report("helpers.models:BatchLoop", "--example", "3x4")
    refused = sum(1 for row in r.parity.rows if not row.within_contract and row.status in ("rejected", "refused"))
    return r.verdict, (f"The loop was unrolled three times and the batch made static: correct for batch 3, and the "
                       f"{refused} probes with another batch are refused, outside the contract. A pass, but read "
                       "the refused rows: if the app sends other batches, that is the bug.")


def _segmenter_min_delegated() -> tuple[str, str]:
    r = _report("helpers.lessons.shapes:TinySegmenter", "--example", "1x3x64x64", "--dim", "x:2:height:32:128",
                "--dim", "x:3:width:32:128", "--min-delegated", "100")
    declined = "; ".join(r.declined_lines()) if r.declined_lines() else "nothing"
    return r.verdict, (f"{r.headline}. Parity holds; the check that fails is delegation. Declined: {declined}.")


QUESTIONS = [
    Question("11.smoke_vs_doctor", "11_export_doctor",
             "ShapeBranch, frames ∈ [1, 32]: the one-sample smoke test matches. The doctor, on the same model, "
             "example and Dim:", ("pass", "fail"), _smoke_vs_doctor),
    Question("11.config_branch", "11_export_doctor",
             "the doctor on ConfigBranch(use_residual=True), --example 2x4:", ("pass", "fail"), _config_branch),
    Question("11.batch_loop_static", "11_export_doctor",
             "the doctor on BatchLoop with --example 3x4 and no --dim:", ("pass", "fail"), _batch_loop_static),
    Question("11.segmenter_min_delegated", "11_export_doctor",
             "lesson 08's segmenter, height and width 32..128, with --min-delegated 100:", ("pass", "fail"),
             _segmenter_min_delegated),
]
