"""Interview cards of the control-flow track (lessons 00–05).

Every answer states only what the lessons show running on this stack (torch 2.13, ExecuTorch 1.5):
where a card says "on this stack", the lesson measured it.
"""

from __future__ import annotations

from . import Card

__all__ = ["CARDS"]

CARDS = [
    Card(
        id="00.pipeline", lesson="00_start_here", topic="the export pipeline", kind="conceptual",
        question="Walk me through how a PyTorch model ends up running in ExecuTorch on a phone.",
        answer=("torch.export runs forward() once with symbolic inputs and records one graph of ATen operators, "
                "with the shapes it assumed as the input contract. to_edge_transform_and_lower converts it to the "
                "edge dialect and hands it to a partitioner, XNNPACK for CPU, which takes the subgraphs it "
                "supports as delegates; the rest runs on the runtime's portable kernels. to_executorch plans "
                "memory ahead of time and serializes a .pte. On the device the runtime loads the .pte and walks "
                "its instructions: there is no Python and no compiler there, so every decision must already be in "
                "the graph. I check the .pte against eager on varied inputs, not one sample."),
        points=("export traces forward() once into a graph with an input contract",
                "edge dialect, partitioner/delegate (XNNPACK) vs portable kernels",
                "to_executorch plans memory and serializes the .pte",
                "the device runtime has no Python and no compiler: nothing is decided there that is not in the graph",
                "parity with eager on varied inputs")),
    Card(
        id="01.why_disagree", lesson="01_silent_specialization", topic="silent specialization", kind="conceptual",
        question="Why does the exported model disagree with eager PyTorch on the phone?",
        answer=("torch.export runs forward() once with symbolic inputs and records one graph. Any Python decision "
                "that is a plain value at that moment (a static shape, a config attribute, a Python scalar input) "
                "is decided then and only the taken branch is recorded, so the .pte runs, fast, and is wrong for "
                "inputs the example did not cover; loops over such values are unrolled. A dynamic size can be "
                "decided the same way without a guard, as for a size-1 axis. I catch it with an export CI job that "
                "diffs the .pte against eager on varied inputs covering both sides of every branch and every "
                "bound, and I fix it by vectorising loops, exporting one method per setting, stating the real "
                "range of a Dim, or keeping the branch with torch.cond or torch.where."),
        points=("export traces once: Python decisions on shapes, flags or scalars are taken at export time",
                "only the taken branch exists in the graph; the program runs and is silently wrong",
                "parity against eager on varied inputs (both sides, every bound) in the export CI job",
                "fixes: vectorise / one method per value / honest Dim range / torch.cond / torch.where")),
    Card(
        id="02.wont_export", lesson="02_loud_failures", topic="reading an export error", kind="diagnosis",
        question="An engineer hands you a model: 'this won't export'. What do you do?",
        answer=("I read the error first: a GuardOnDataDependentSymNode about an unbacked symbol means Python asked "
                "for a value computed from data; 'not in Core ATen', a missing kernel or a missing fake kernel means "
                "an operator a stage does not have, and which stage failed (export, lowering or load) matters; a "
                "'Constraints violated' with a suggested Dim means the code assumes a narrower size range. For a "
                "data-dependent error I find the line it quotes, then decide: an incidental branch (debug, "
                "training-only, input check) is deleted from the export path; a semantic one becomes torch.cond, "
                "torch.where or app logic. torch._check only fits a fact I can promise, like a count that is "
                "always at least 1; the device does not enforce it. Then I re-export and diff against the original "
                "eager model on inputs from both sides of the branch."),
        points=("classify: data-dependent vs unsupported operator (and its stage) vs constraint violation",
                "find the line in forward() the error quotes",
                "incidental branch → delete from the export path; semantic → cond / where / hoist",
                "torch._check only for a true, bounded fact; never to silence a semantic branch",
                "re-export and diff against the original eager model on both sides")),
    Card(
        id="02.export_vs_compile", lesson="02_loud_failures", topic="export vs torch.compile", kind="conceptual",
        question="torch.compile handles this model fine, so why does torch.export fail on it?",
        answer=("torch.compile uses Dynamo to capture what it can; when it meets something it cannot capture, like "
                "an if on a tensor's value, it inserts a graph break: the region runs as ordinary Python and "
                "compiled code resumes after it, so the model still runs correctly. Export must produce one graph "
                "for every input, to be run where there is no Python, so there is no break to fall back on: the "
                "same if is an error. Full-graph capture is mandatory, which is why the branch has to become "
                "torch.cond, torch.where, or a decision made by the app."),
        points=("torch.compile: graph breaks, the region falls back to Python",
                "export: one graph, no escape hatch; the runtime has no Python either",
                "a branch on data: graph break under compile, data-dependent error under export",
                "fix by expressing the branch in the graph (cond/where) or hoisting it")),
    Card(
        id="03.cond_constraints", lesson="03_torch_cond", topic="torch.cond", kind="constraints",
        question="What does torch.cond require of its branches, and what does it cost you on device?",
        answer=("Both branches are traced into the graph and the predicate, a boolean tensor or a symbolic size "
                "condition, is evaluated at run time. Both take the operands tuple and must return the same number "
                "of outputs with the same dtypes and compatible shapes; a branch may not mutate its inputs or "
                "anything it closes over; and each branch must itself be exportable, so no data-dependent Python "
                "inside it. On torch 2.13, reading a tensor from outside the operands is fine: export lifts it into "
                "an extra operand. The cost: a plain Python bool predicate quietly keeps one branch, and the "
                "XNNPACK partitioner never looks inside branches, so their layers run on portable kernels. I "
                "measure the delegated share."),
        points=("both branches traced; predicate (bool tensor or SymBool) evaluated at run time",
                "same operands; same number, dtypes and compatible shapes of outputs",
                "no mutation of inputs or closed-over tensors; each branch exportable",
                "closures over tensors are lifted on torch 2.13 (not an error)",
                "delegation: branch bodies stay on portable kernels; measure it")),
    Card(
        id="04.where_tradeoff", lesson="04_torch_where", topic="torch.where", kind="trade-off",
        question="When would you use torch.where instead of torch.cond for a branch in an exported model?",
        answer=("torch.where selects values; it is not control flow, so the graph stays straight-line, nothing is "
                "specialised or guarded, and the partitioner sees every node, so XNNPACK takes whatever it has rules for "
                "(in lesson 04 the linear layers; the reduction, the comparison and the where itself stay on portable "
                "kernels), where a cond's branches would all run on portable kernels. The price is that both sides "
                "are always computed, so it suits cheap or elementwise branches and wastes work when one side is "
                "an expensive subnetwork. The discarded side must also be safe to compute: an integer division by "
                "zero or an out-of-range index fails on the device even though its result would be thrown away. "
                "And the condition must be the same decision as the original: a per-element mask is not a "
                "whole-input if. If one side is expensive, I measure torch.cond against it, or hoist the decision "
                "into the app."),
        points=("straight-line: no specialization, fully delegable",
                "both sides always computed: cheap/elementwise yes, expensive subnetwork no",
                "the discarded side must still be valid (integer division, indexing)",
                "keep the same decision (whole-input predicate vs per-element mask)",
                "measure against cond; consider hoisting")),
    Card(
        id="05.hoist", lesson="05_hoisting", topic="hoisting", kind="trade-off",
        question="The model branches between two different networks. What is the cleanest way to export it?",
        answer=("Often: no branch in the model at all. I export each side as its own method in one .pte, or as two "
                ".pte files, and the app picks which to call. The condition becomes a few lines of Kotlin or Swift, "
                "where branching is free, loggable and testable, and each graph stays straight-line and fully "
                "delegated, unlike a cond whose branches run on portable kernels. The runtime loads a method only when "
                "it is called (load_method), so one file does not load both; the choice between one file and two "
                "is about what ships: one download and one artifact to version, or only the side the app uses, "
                "with two versions to keep in step. This works when the app can "
                "make the decision from what it has, like orientation, language or device tier; a decision on an "
                "intermediate value of the network stays inside, as torch.cond or torch.where. Parity is checked "
                "with the app's choice in the loop, against the original model, on both sides."),
        points=("one method per side (or one .pte per side); the app picks",
                "the app's if: free, debuggable, changeable without re-export",
                "each graph straight-line and 100% delegated",
                "only for decisions the app can make from its inputs; intermediate values stay in the graph",
                "parity with the app's pick in the loop against the original model")),
]
