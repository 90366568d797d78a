"""Predictions of the control-flow track (lessons 00–05). Each reveal runs the real pipeline.

Every question asks the learner to apply the lesson's idea to a case the page has not answered yet;
the reveal exports, lowers and runs the real thing and says what happened and why.
"""

from __future__ import annotations

import torch
from torch.export import Dim

from .. import models as M
from ..lowering import lower, lower_methods
from ..parity import check_one
from . import Question

__all__ = ["QUESTIONS"]


def _rand(*shape: int, seed: int = 0) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


# ----- 00 ------------------------------------------------------------------------------------------
def _graph_if() -> tuple[str, str]:
    art = lower(M.ConfigBranch(use_residual=True), (_rand(2, 4),))
    graph = art.graph()
    if "higher_order" in graph:
        return "a runtime branch", "the graph holds a control-flow operator."
    if "aten.where" in graph:
        return "both sides", "both sides were recorded and a where selects."
    assert "aten.add" in graph, graph
    return "only the add", (
        "export ran forward() once; `self.use_residual` was the Python value True, so the `+ x` ran and was "
        "recorded, and the `if` left no trace. The graph has no way to skip the add.")


# ----- 01 ------------------------------------------------------------------------------------------
def _flag_on() -> tuple[str, str]:
    x = _rand(2, 4)
    art = lower(M.ConfigBranch(use_residual=False), (x,))
    row = check_one(M.ConfigBranch(use_residual=True), art, (-x.abs() - 0.1,))
    return row.status, ("the `+ x` was never recorded (the flag was False while tracing): the .pte computes "
                        "relu(proj(x)) whatever the app's flag says now. Nothing checks the flag, so nothing is "
                        "rejected: the answer is simply different.")


def _counted_four() -> tuple[str, str]:
    from ..lessons.control_flow import CountedMean

    counted = CountedMean()
    items3 = _rand(3, 4)
    art = lower(counted, (items3, 3), dynamic_shapes={"x": {0: Dim("items", min=3, max=8)}, "n": None})
    four = _rand(4, 4, seed=4)
    try:
        (device,) = art.run_raw(four, 3)
    except RuntimeError:
        return "rejected", "the runtime refused the input."
    with torch.no_grad():
        same = bool(torch.allclose(device, counted(four, 4), atol=1e-4))
    return ("match" if same else "diverge"), (
        "4 items are inside the contract (items ∈ [3, 8]) and n=3 is the value export baked in, so the runtime "
        "runs it without complaint, and the unrolled loop averages the first 3 of the 4 items: not what eager "
        "computes with n=4.")


# ----- 02 ------------------------------------------------------------------------------------------
def _static_gate_kind() -> tuple[str, str]:
    from ..diagnose import diagnose_export
    from ..lessons.control_flow import BatchGate

    d = diagnose_export(BatchGate(), (_rand(8, 4),))
    return d.kind, ("no error at all: with a static batch, `x.shape[0]` is the Python int 8 while tracing, so "
                    "`8 > 4` is decided at export and only the fast path is recorded (lesson 01's silent "
                    "specialization). The batch is fixed at 8, so the runtime rejects any other batch instead of "
                    "running the wrong layer.")


def _sort_stage() -> tuple[str, str]:
    from ..diagnose import diagnose_export
    from ..lessons.control_flow import SortValues

    d = diagnose_export(SortValues(), (_rand(5),), backend="portable")
    return d.stage, ("export and lowering accept aten.sort (it is a Core ATen operator); this runtime build has "
                     "no kernel registered for it, so the program fails when the runtime loads its method. "
                     f"({d.summary})")


def _check_promise() -> tuple[str, str]:
    from ..lessons.control_flow import ScaleOrShiftChecked

    x = _rand(3, 4)
    art = lower(ScaleOrShiftChecked(), (x.abs() + 0.1,))
    row = check_one(M.ScaleOrShift(), art, (-x.abs() - 0.1,))
    return row.status, (
        "torch._check made the promise `x.sum() > 0` and export believed it: only the `self.a` side was recorded. "
        "The promise becomes a runtime assertion in the exported graph, and ExecuTorch does not check it: the "
        ".pte runs self.a on an input whose sum is negative, where the original runs self.b.")


# ----- 03 ------------------------------------------------------------------------------------------
def _zero_side() -> tuple[str, str]:
    from ..lessons.control_flow_fixes import which_branch_ran

    model = M.ScaleOrShiftCond()
    art = lower(model, (_rand(3, 4),))
    side = which_branch_ran(model, art, torch.zeros(3, 4), model.a, model.b)
    return side, ("the predicate is strict: the sum of zeros is 0, and 0 > 0 is False, so the device runs the "
                  "false branch. Edges like this are why a probe set includes zeros.")


def _branch_delegation() -> tuple[str, str]:
    art = lower(M.CondLinear(), (_rand(2, 8),))
    rows = [r for r in art.delegation().rows if r["region"] != "main"]
    delegated = sum(r["delegated"] for r in rows if "addmm" in r["op"] or "linear" in r["op"])
    return str(delegated), (
        f"{delegated} of the two branch layers run on XNNPACK: ExecuTorch's lowering visits the branch graphs, but "
        "XnnpackPartitioner picks nodes by walking the top-level graph only, so it never tags one inside a cond "
        "branch; each branch's linear is decomposed (permute_copy + addmm) and runs on the runtime's portable "
        "kernels.")


# ----- 04 ------------------------------------------------------------------------------------------
def _heavy_count() -> tuple[str, str]:
    from ..lessons.control_flow_fixes import HeavyWhere

    big = _rand(32, 128)
    art = lower(HeavyWhere(), (big,))
    n = art.graph().count("aten.linear")
    return str(n), (f"all {n}: the graph is straight-line and every node runs for every input. torch.where needs "
                    "both of its inputs, so the whole MLP is computed before the selection throws its result away.")


def _heavy_faster() -> tuple[str, str]:
    from ..lessons.control_flow_fixes import HeavyCond, HeavyWhere, latency_ms

    big = _rand(32, 128)
    heavy_side = big.abs() + 0.1
    art_where, art_cond = lower(HeavyWhere(), (big,)), lower(HeavyCond(), (big,))
    t_where = latency_ms(art_where, heavy_side, repeats=30)
    t_cond = latency_ms(art_cond, heavy_side, repeats=30)
    winner = "torch.where" if t_where < t_cond else "torch.cond"
    return winner, (f"measured now: where {t_where:.3f} ms, cond {t_cond:.3f} ms per call (median of 30). Both run "
                    "the MLP; where runs it on XNNPACK, cond inside a branch on portable kernels.")


# ----- 05 ------------------------------------------------------------------------------------------
def _portrait() -> tuple[str, str]:
    vision = M.TinyVision()
    art = lower_methods({"small": (vision, (_rand(1, 3, 32, 48),)), "large": (vision, (_rand(1, 3, 64, 96),))})
    row = check_one(vision, art, (_rand(1, 3, 48, 32, seed=1),), method="small")
    return row.status, ("the method was exported for 32×48; a 48×32 frame breaks its static shape and the runtime "
                        f"refuses it: {row.runtime_message.split(';')[0]}")


def _hoisted_share() -> tuple[str, str]:
    from ..lessons.control_flow_fixes import ScaleOrShiftB

    art = lower_methods({"b": (ScaleOrShiftB(), (_rand(3, 4),))})
    share = art.delegation("b").coverage
    answer = "all of it" if share == 1.0 else ("none" if share == 0 else "part of it")
    return answer, (f"{share:.0%}: the method is straight-line (one linear layer, no predicate, no branch), so the "
                    "partitioner sees every node and XNNPACK takes it.")


QUESTIONS = [
    Question("00.graph_if", "00_start_here",
             "ConfigBranch(use_residual=True) is exported. Where forward() says `if self.use_residual:`, the graph "
             "holds…", ("a runtime branch", "only the add", "both sides"), _graph_if),
    Question("01.flag_on", "01_silent_specialization",
             "ConfigBranch(use_residual=False) is exported at batch 2. The app's config later switches the flag ON "
             "and sends a batch of 2 negative inputs. Compared with eager (flag on), the device's answer is…",
             ("match", "diverge", "rejected"), _flag_on),
    Question("01.counted_four", "01_silent_specialization",
             "CountedMean exported with n=3 and items ∈ [3, 8]; the app sends 4 items and n=3: the device's answer "
             "compared with eager run as intended (n=4)…", ("match", "diverge", "rejected"), _counted_four),
    Question("02.static_gate_kind", "02_loud_failures",
             "BatchGate exported with a batch of 8 and NO Dim (a static batch). What does diagnose_export report?",
             ("data_dependent", "unsupported_operator", "constraint_violation", "ok"), _static_gate_kind),
    Question("02.sort_stage", "02_loud_failures",
             "SortValues returns torch.sort(x)[0]; it is built for the portable backend. Which stage of the "
             "pipeline fails?", ("export", "lower", "load"), _sort_stage),
    Question("02.check_promise", "02_loud_failures",
             "ScaleOrShiftChecked adds torch._check(x.sum() > 0) so that export passes (exported with a positive "
             "example). The app then sends an input whose sum is negative. Compared with the original ScaleOrShift, "
             "the device's answer is…", ("match", "diverge", "rejected"), _check_promise),
    Question("03.zero_side", "03_torch_cond",
             "ScaleOrShiftCond gets an all-zero input. Which branch's result comes back from the .pte?",
             ("true", "false"), _zero_side),
    Question("03.branch_delegation", "03_torch_cond",
             "CondLinear has a linear layer in each branch of its torch.cond. How many of those two layers does "
             "XNNPACK run?", ("0", "1", "2"), _branch_delegation),
    Question("04.heavy_count", "04_torch_where",
             "HeavyWhere selects between a 6-layer MLP and x * 0.5 with torch.where. For an input that takes the "
             "cheap side, how many linear layers does the .pte execute?", ("0", "1", "6"), _heavy_count),
    Question("04.heavy_faster", "04_torch_where",
             "The input takes the heavy (MLP) side. Which .pte is faster on this machine?",
             ("torch.where", "torch.cond"), _heavy_faster),
    Question("05.portrait", "05_hoisting",
             "The app forgets to rotate and sends a portrait frame (48×32) to the landscape (32×48) method. The "
             "device…", ("match", "diverge", "rejected"), _portrait),
    Question("05.hoisted_share", "05_hoisting",
             "After hoisting, method 'b' computes only ScaleOrShift's b side. How much of it does XNNPACK take?",
             ("all of it", "part of it", "none"), _hoisted_share),
]
