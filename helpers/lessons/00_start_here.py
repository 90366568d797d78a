"""Lesson 00 · start here: the pipeline from ``torch.export`` to the ExecuTorch runtime, and its first question."""

from __future__ import annotations

import re

from helpers import models as M
from helpers.inputs import seeded_randn
from helpers.interview import Card
from helpers.lowering import lower
from helpers.questions import Question, Reveal

LESSON = "00_start_here"


# ----- predictions --------------------------------------------------------------------------------
def _graph_if() -> Reveal:
    art = lower(M.ConfigBranch(use_residual=True), (seeded_randn(2, 4),))
    graph = art.graph()
    ops = re.findall(r"aten\.(\w+)\.", graph)
    actual = "a runtime branch" if "higher_order" in graph else "both sides" if "where" in ops else "only the add"
    return Reveal(actual, (
        f"the graph is {' → '.join(ops)}. Export ran forward() once; `self.use_residual` was the Python value True, "
        "so the `+ x` ran and was recorded, and the `if` left no trace. The graph has no way to skip the add."),
        why_not={
            "a runtime branch": (f"a runtime branch is a torch.cond, a control-flow operator in the graph; this graph's "
                                 f"operators are {', '.join(ops)}, none of them control flow. A Python `if` on an "
                                 "attribute is run while tracing, not recorded."),
            "both sides": ("both sides would leave a result for each value of the flag and a where choosing between "
                           f"them; the graph has no where, and no node returns the flag-off result, relu({ops[0]}(x)), "
                           "on its own."),
        })


QUESTIONS = [
    Question("00.graph_if", LESSON,
             "ConfigBranch(use_residual=True) is exported. Where forward() says `if self.use_residual:`, the graph "
             "holds…", ("a runtime branch", "only the add", "both sides"), _graph_if),
]


CARDS = [
    Card(
        id="00.pipeline", lesson=LESSON, topic="the export pipeline", kind="conceptual",
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
]
