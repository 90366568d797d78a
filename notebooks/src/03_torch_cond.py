# %% [markdown]
# # 03 · `torch.cond`: keeping a real branch in the graph
#
# **What you will learn**
# - what `torch.cond(pred, true_fn, false_fn, operands)` records: **both** branches, and a predicate evaluated at
#   run time, on the device;
# - how to prove parity on both sides over a varied input set;
# - cond's constraints on torch 2.13, each shown by the real error it produces, and what this torch relaxed;
# - what it costs: the stock XNNPACK pipeline fails on a branch that holds an operator XNNPACK wants whole
#   (`linear`), and once lowered a cond's branches run on portable kernels.
#
# Terms from lesson 00's glossary used here: higher-order operator, partitioner, delegate, XNNPACK, portable
# kernels, edge dialect.

# %%
import torch

import helpers
from helpers import interview, models, questions
from helpers.display import show_source
from helpers.lessons import control_flow as cf
from helpers.lessons import control_flow_fixes as fixes
from helpers.plots import delegation_bars

_ = torch.manual_seed(0)
x = torch.randn(3, 4)

# %% [markdown]
# ## The model
#
# Lesson 02 ended on `if x.sum() > 0:` refusing to export. The tempting workaround is to get *something* to
# export, for example by deciding the branch on the example and baking it in: silent specialization by hand.
# `torch.cond` is the supported way to keep the decision. `ScaleOrShiftCond` is `ScaleOrShift` with its `if`
# rewritten:

# %%
show_source(models.ScaleOrShift, models.ScaleOrShiftCond)

# %% [markdown]
# `torch.cond` calls `self.a(x)` when the predicate holds and `self.b(x)` otherwise. Before we export it, an edge
# case to predict: the input is all zeros.

# %%
questions.ask("03.zero_side")

# %% [markdown]
# ## Both branches in the graph

# %%
cond_model = models.ScaleOrShiftCond()
art = helpers.lower(cond_model, (x,))
cf.source_and_graph(cond_model, art, "ScaleOrShiftCond")

# %% [markdown]
# The main graph computes the predicate (`sum`, `gt`) and hands both sub-graphs to
# `torch.ops.higher_order.cond`, a higher-order operator. Each branch was traced once, with the operands, into its
# own graph:

# %%
ep = torch.export.export(cond_model, (x,))
print("true branch: ", [n.target.__name__ for n in ep.graph_module.true_graph_0.graph.nodes if n.op == "call_function"])
print("false branch:", [n.target.__name__ for n in ep.graph_module.false_graph_0.graph.nodes if n.op == "call_function"])

# %% [markdown]
# ## Why it works: the predicate is evaluated on the device
#
# Feed the `.pte` inputs on both sides and check which branch's result came back. No Python runs on the device:
# the runtime evaluates `x.sum() > 0` and jumps.

# %%
for label, sample in {"positive": x.abs() + 0.1, "negative": -x.abs() - 0.1, "zeros": torch.zeros(3, 4),
                      "mixed, sum > 0": x + 1.0, "mixed, sum < 0": x - 1.0}.items():
    side = fixes.which_branch_ran(cond_model, art, sample, cond_model.a, cond_model.b)
    print(f"{label:<15} x.sum() > 0: {bool(sample.sum() > 0)!s:<5}  the .pte returned the {side} branch's result")

# %% [markdown]
# "Jumps" is meant literally. The `.pte` holds a list of instructions; here they are, read from the serialized
# program:

# %%
fixes.instructions(art)

# %% [markdown]
# The predicate is computed by kernels (`sum`, `gt`). Then `JumpFalseCall` skips the true branch's instructions
# when the predicate is false; the true branch ends with a jump over the false branch. The `cond` itself is not
# a kernel: it became those two jumps, with both branches inlined between them.
#
# ### Parity on both sides, over a varied input set
#
# The probe set must take each branch; `branch_sides` counts how many probes land on each side. The probes vary
# values at the example's shape (this lesson is about the branch, not about shapes):

# %%
probes = cf.value_probes((x,)) + cf.shifted(x)
print("probes per side of `x.sum() > 0`:", cf.branch_sides(probes, lambda t: t.sum() > 0))
report = helpers.compare(cond_model, art, probes)
print(report)

# %% [markdown]
# The original model, `ScaleOrShift` with its Python `if`, is the real reference. It cannot be exported, but it
# runs in eager, and the `.pte` must match it:

# %%
original_report = helpers.compare(models.ScaleOrShift(), art, probes)
print(original_report.summary())

# %% [markdown]
# ## The constraints, by the errors they produce
#
# `torch.cond` must trace each branch into a graph and merge them into one operator with one output signature.
# Each model below breaks one rule, or tests one that torch 2.13 relaxed (read them in
# `helpers/lessons/control_flow_fixes.py`). Here is what torch says when you export each:

# %%
rules = fixes.check_cond_rules(x)
rules

# %% [markdown]
# Reading the table:
#
# - **operands**: both branches are called with the same `operands` tuple, so their signatures must accept
#   exactly it;
# - **outputs**: cond is one operator with one output signature: same number of outputs, same dtype, and
#   compatible shapes (here a `[3, 4]` against a `[4]`);
# - **no mutation**: a branch that writes to its input, or to a tensor it reaches from outside (a buffer
#   counting calls), is refused; compute a new tensor instead;
# - **each branch exportable**: a branch is traced like any `forward()`, so a data-dependent `if` inside it
#   fails the same way;
# - **the predicate** may be a boolean tensor (`x.sum() > 0`) or a symbolic condition on sizes (lesson 02's
#   `x.shape[0] > 4` with a dynamic batch). A plain Python `bool` (`x.shape[0] > 2` on a static shape) is only a
#   warning, and cond quietly keeps one branch: lesson 01's trap again.
#
# **Reading** a tensor from outside `operands` is not an error on this torch. `CondClosure` computes
# `offset = self.b(x)` before the cond, and both branches use it:

# %%
show_source(fixes.CondClosure)

# %% [markdown]
# Export lifts what the branches read into extra operands of the cond: `offset`, and also the weights of
# `self.a`, which every branch that calls a layer reads the same way. The cond's operand tuple in the graph:

# %%
closure_ep = torch.export.export(fixes.CondClosure(), (x,))
cond_node = next(n for n in closure_ep.graph.nodes if n.op == "call_function" and "cond" in str(n.target))
print("operands of the cond:", [a.name for a in cond_node.args[3]])
art_closure = helpers.lower(fixes.CondClosure(), (x,))
print(helpers.compare(fixes.CondClosure(), art_closure, probes).summary())

# %% [markdown]
# `offset` costs nothing extra for being lifted: it was computed before the cond in the Python code too. What
# still fails is *writing* through a closure (the buffer row in the table) or to an operand.
#
# ## What it costs: delegation inside a cond region
#
# `CondLinear` is a `linear → relu` trunk followed by a cond between two `linear` layers. `StraightLinear` has the
# same trunk and always takes branch `a`. Same weights, same sizes.

# %%
show_source(models.CondLinear, models.StraightLinear)

# %% [markdown]
# Predict first: XNNPACK is the delegate for every lesson. How many of the two linear layers inside the branches
# does it run?

# %%
questions.ask("03.branch_delegation")

# %% [markdown]
# ### The stock pipeline on a cond
#
# Lesson 00's four plain calls, on `CondLinear`:

# %%
from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
from executorch.exir import to_edge_transform_and_lower

x8 = torch.randn(2, 8)
cond_ep = torch.export.export(models.CondLinear(), (x8,))
err = helpers.show_error(to_edge_transform_and_lower, cond_ep, partitioner=[XnnpackPartitioner()], max_lines=2)

# %% [markdown]
# Lowering fails before anything runs. `XnnpackPartitioner` asks the pipeline not to decompose `aten.linear` (it
# wants the whole operator, to run it as one XNNPACK op), everywhere in the program. ExecuTorch's lowering does
# visit the cond's branch graphs, but `XnnpackPartitioner` picks its nodes by walking the top-level graph only,
# so it never tags a node inside a branch. The branch's `linear` ends up neither decomposed into edge operators
# the portable kernels have, nor delegated.
#
# `helpers.lower` uses a subclass that keeps that request only for nodes of the main graph, so branch nodes
# decompose (`linear` → `permute_copy` + `addmm`) and run on portable kernels:

# %%
from helpers import lowering

show_source(lowering._xnnpack_partitioner)

# %% [markdown]
# ### Measured: where each node runs
#
# The same layers with and without a cond region:

# %%
art_cond = helpers.lower(models.CondLinear(), (x8,))
art_straight = helpers.lower(models.StraightLinear(), (x8,))
for name, a in {"CondLinear": art_cond, "StraightLinear": art_straight}.items():
    counts = fixes.node_counts(a.delegation())
    print(f"{name:<15}", ", ".join(f"{n} {k}" for k, n in counts.items()))

# %% [markdown]
# Per region of the graph (the `cond` node itself is not a row: it became the two jumps, not a kernel):

# %%
art_cond.delegation().to_dataframe()

# %% [markdown]
# XNNPACK took the trunk (`linear`, `relu`) in the main graph. Inside the branches, the `linear` layers run as
# `permute_copy` + `addmm` on portable kernels. The predicate (`mean`, `gt`) stays on portable kernels too. The
# reason per operator, in the partitioner's own words where it gave any:

# %%
for op, why in art_cond.delegation().reasons().items():
    print(f"{op}: {'; '.join(why)}")

# %%
fig = delegation_bars({"CondLinear (cond)": art_cond.delegation(), "StraightLinear": art_straight.delegation()},
                      title="Same layers, with and without a cond region")
fig

# %% [markdown]
# ## The fixes, summarised
#
# `torch.cond` is the fix when the branch is **semantic and structural** (two different computations) and the
# decision must be made per input, on the device, from something only the network computes. Mind its costs: the
# branches are traced under strict rules, and on this stack they run on portable kernels. When the two sides are
# cheap and elementwise, `torch.where` is simpler (lesson 04); when they are two different networks and the app
# can decide, hoisting the decision keeps each graph fully delegated (lesson 05).
#
# ## ✏️ Exercise 03.cond_rewrite: a router
#
# `Router` projects its input, then runs a two-layer block when the projection's sum is positive and a cheap
# scale-and-flip otherwise. The decision depends on `h`, a value only the network computes, so the app cannot
# make it; the block should run only when it is needed.

# %%
show_source(fixes.Router)

# %% [markdown]
# Rewrite `forward()` with `torch.cond`. The check exports, lowers and runs your model; it requires a real runtime
# branch (a `torch.cond` in the graph), and compares the `.pte` with the original `Router` in eager mode on
# inputs from both sides of `h.sum() > 0` and on its edge, where the sum is exactly 0.

# %%
# ✏️ Exercise 03.cond_rewrite — edit this cell, then run the check below.
from helpers.lessons.control_flow_fixes import Router


class RouterForExport(Router):
    def forward(self, x):
        h = self.pre(x)
        if h.sum() > 0:
            return self.big2(torch.relu(self.big1(h)))
        return -h * 0.5


answer = RouterForExport()

# %%
from helpers import exercises

grade = exercises.check("03.cond_rewrite", answer)

# %% [markdown]
# ## Takeaways
#
# - `torch.cond` records both branches and evaluates the predicate at run time: on the device it is a pair of
#   jumps around the inlined branches.
# - Prove parity on both sides: count the probes per side, and compare against the **original** eager model.
# - Its rules on torch 2.13: same operands for both branches; same number of outputs with matching dtypes and
#   compatible shapes; no mutation of an operand or of anything a branch reaches; each branch exportable; a
#   boolean tensor or a symbolic size condition as the predicate. Reading tensors from outside `operands` is
#   lifted automatically.
# - The stock XNNPACK partitioner fails on a cond with a `linear` in a branch; once lowered, the branches run on
#   portable kernels. Measure the delegated share.
#
# ## Interview question
#
# Answer it aloud first (about 30 seconds), then reveal a model answer.

# %%
interview.ask("03.cond_constraints")

# %% [markdown] jp-MarkdownHeadingCollapsed=true
# ## Checked for CI: the cond model matches eager on both sides, and the costs are as stated

# %% tags=["ci-check"] jupyter={"source_hidden": true}
sides = cf.branch_sides(probes, lambda t: t.sum() > 0)
assert sides["true"] > 0 and sides["false"] > 0, sides
assert report.ok and original_report.ok, report
assert fixes.instructions(art).counts()["JumpFalseCall"] == 2
assert rules["reading a tensor from outside operands (lifted)"].outcome == "exports"
assert "linear" in [a.name for a in cond_node.args[3]]  # offset = self.b(x), lifted into the cond's operands
branch_rows = [r for r in art_cond.delegation().rows if r["region"] != "main"]
assert branch_rows and all(r["delegated"] == 0 for r in branch_rows)
assert art_straight.delegation().coverage == 1.0
print(f"ScaleOrShiftCond: parity with eager on {len(probes)} inputs, sides {sides}; CondLinear's branches on "
      "portable kernels")
