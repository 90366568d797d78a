# %% [markdown]
# # 03 · `torch.cond`: keeping a real branch in the graph
#
# **What you will learn**
# - what `torch.cond(pred, true_fn, false_fn, operands)` records: **both** branches, and a predicate
#   evaluated at run time, on the device;
# - how to prove parity on both sides over a varied input set;
# - cond's constraints, each shown by the real error it produces: operands, number of outputs, dtypes,
#   shapes, no mutation, closures, each branch exportable (and one that torch 2.13 relaxed);
# - what it costs: delegation inside a cond region, measured next to the straight-line model.

# %%
import pandas as pd
import torch

import helpers
from helpers import models
from helpers.display import check_prediction
from helpers.lessons import control_flow as cf
from helpers.lessons import control_flow_fixes as fx
from helpers.plots import delegation_bars
from helpers.widgets import PredictThenReveal

_ = torch.manual_seed(0)
x = torch.randn(3, 4)

# %% [markdown]
# ## The trap, live
#
# Lesson 02 ended on `if x.sum() > 0:` refusing to export. The tempting workaround is to get *something* to
# export: for example, decide the branch on the example and bake it in. That is silent specialization by
# hand. `torch.cond` is the supported way to keep the decision:

# %%
cond_model = models.ScaleOrShiftCond()
art = helpers.lower(cond_model, (x,))
cf.source_and_graph(cond_model, art, "ScaleOrShiftCond")

# %% [markdown]
# The main graph computes the predicate (`sum`, `gt`) and hands both sub-graphs to
# `torch.ops.higher_order.cond`. Each branch was traced once, with the operands, into its own graph:

# %%
ep = torch.export.export(cond_model, (x,))
print("true branch: ", [n.target.__name__ for n in ep.graph_module.true_graph_0.graph.nodes if n.op == "call_function"])
print("false branch:", [n.target.__name__ for n in ep.graph_module.false_graph_0.graph.nodes if n.op == "call_function"])

# %% [markdown]
# ## Why it works: the predicate is evaluated on the device
#
# Feed the `.pte` inputs on both sides and check which branch's result came back. No Python runs on the
# device: the runtime evaluates `x.sum() > 0` and jumps.

# %%
rows = []
for label, sample in {"positive": x.abs() + 0.1, "negative": -x.abs() - 0.1, "zeros": torch.zeros(3, 4),
                      "mixed, sum > 0": x + 1.0, "mixed, sum < 0": x - 1.0}.items():
    rows.append({"input": label, "x.sum() > 0": bool(sample.sum() > 0),
                 "the .pte returned": fx.which_branch_ran(cond_model, art, sample, cond_model.a, cond_model.b)})
pd.DataFrame(rows)

# %% [markdown]
# ### Parity on both sides, over a varied input set
#
# The probe set must take each branch; `branch_sides` counts how many probes land on each side.

# %%
probes = helpers.probe_inputs((x,)) + [helpers.Probe(f"shifted {s:+}", (x + s,)) for s in (-2.0, 2.0)]
print("probes per side of `x.sum() > 0`:", cf.branch_sides(probes, lambda t: t.sum() > 0))
report = helpers.compare(cond_model, art, probes)
print(report)

# %% [markdown]
# The original model, `ScaleOrShift` with its Python `if`, is the real reference. It cannot be exported,
# but it runs in eager, and the `.pte` must match it:

# %%
original_report = helpers.compare(models.ScaleOrShift(), art, probes)
print(original_report.summary())

# %% [markdown]
# ## The constraints, by the errors they produce
#
# `torch.cond` must be able to trace each branch into a graph and then merge them into one operator with
# one output signature. Each model below breaks exactly one rule (read them in
# `helpers/lessons/control_flow_fixes.py`); here is what torch says when you export it:

# %%
rules = fx.check_cond_rules(x)
rules

# %% [markdown]
# Reading the table:
#
# - **operands**: both branches are called with the same `operands` tuple, so their signatures must accept
#   exactly it;
# - **outputs**: cond is one operator with one output signature: same number of outputs, same dtype, and
#   compatible shapes (here a `[3, 4]` against a `[4]`);
# - **no mutation**: a branch that writes to its input (or to a buffer it reaches) is refused; compute a new
#   tensor instead;
# - **each branch exportable**: a branch is traced like any `forward()`, so a data-dependent `if` inside it
#   fails the same way;
# - **the predicate**: a Python `bool` (here `x.shape[0] > 2` on a static shape) is not an error, only a
#   warning, and cond quietly keeps one branch: lesson 01's trap again.
#
# One documented rule is **relaxed** on this torch: closing over a tensor that is not in `operands`. Export
# lifts it into an extra operand instead of failing. It still costs something: the tensor is computed before
# the cond, whichever branch runs. Parity holds:

# %%
closure_model = fx.CondClosure()
art_closure = helpers.lower(closure_model, (x,))
print(helpers.compare(closure_model, art_closure, probes).summary())

# %% [markdown]
# ## What it costs: delegation inside a cond region
#
# `CondLinear` is a `linear → relu` trunk followed by a cond between two `linear` layers. `StraightLinear`
# has the same trunk and always takes branch `a`. Same weights, same sizes.

# %%
x8 = torch.randn(2, 8)
art_cond = helpers.lower(models.CondLinear(), (x8,))
art_straight = helpers.lower(models.StraightLinear(), (x8,))
print(art_cond.delegation().summary())
print(art_straight.delegation().summary())

# %% [markdown]
# Where each node runs, per region of the graph:

# %%
art_cond.delegation().to_dataframe()

# %% [markdown]
# XNNPACK took the trunk (`linear`, `relu`) in the main graph. Inside the branches, the `linear` layers were
# decomposed (`permute_copy` + `addmm`) and run on the runtime's **portable** kernels: the partitioner does
# not look inside cond regions. The predicate (`mean`, `gt`) and the `cond` itself are portable too.

# %%
print("\n".join(art_cond.delegation().notes))

# %%
fig = delegation_bars({"CondLinear (cond)": art_cond.delegation(),
                       "StraightLinear": art_straight.delegation()},
                      title="Same layers, with and without a cond region")
fig

# %% [markdown]
# ## The fixes, summarised
#
# `torch.cond` is the fix when the branch is **semantic and structural** (two different computations) and
# the decision must be made per input on the device. Pay attention to its costs: the branches are traced
# under strict rules, and they run on portable kernels. When the two sides are cheap and elementwise,
# `torch.where` is simpler (lesson 04); when they are two different networks, hoisting the decision into
# the app keeps each graph fully delegated (lesson 05).
#
# ## Exercises
#
# ### Predict, then reveal: the branches on XNNPACK?
#
# In `CondLinear`, how many of the two branch `linear` layers does XNNPACK run?

# %%
def reveal_branch_delegation():
    rows = [r for r in art_cond.delegation().rows if r["region"] != "main"]
    delegated = sum(r["delegated"] for r in rows)
    return str(delegated), (f"{delegated} delegated nodes inside the branches; "
                            f"{sum(r['portable'] for r in rows)} run on portable kernels.")


quiz = PredictThenReveal("XNNPACK delegates how many nodes inside the cond branches?", ["0", "1", "2"],
                         reveal_branch_delegation)
quiz

# %% [markdown]
# ### Which side does zero take?
#
# `ScaleOrShiftCond` gets an all-zero input. `0 > 0` is… Which layer's output comes back from the `.pte`,
# `"true"` (layer `a`) or `"false"` (layer `b`)?

# %%
my_prediction = "true"  # change me: "true" or "false"

# %%
actual = fx.which_branch_ran(cond_model, art, torch.zeros(3, 4), cond_model.a, cond_model.b)
_ = check_prediction(my_prediction, actual, "the predicate is strict: sum = 0 is not > 0, so the false branch "
                     "runs. Edges like this are why the probe set includes zeros.")

# %% [markdown]
# ### Break a rule yourself
#
# Copy one of the rule models from `helpers/lessons/control_flow_fixes.py` into a cell, fix it (for example,
# make `CondOutputShape`'s false branch return `self.b(h)`), export it, and compare it against eager with
# `helpers.compare` on `probes`.
#
# ## Takeaways
#
# - `torch.cond` records both branches and evaluates the predicate at run time, on the device.
# - Prove parity on both sides: count the probes per side, and compare against the **original** eager model.
# - Its rules: same operands for both branches; same number of outputs with matching dtypes and compatible
#   shapes; no mutation of inputs (or anything a branch reaches); each branch exportable; a tensor
#   predicate. Closing over tensors is lifted automatically on this torch, but still computed every time.
# - Delegation is less complete inside a cond region: here XNNPACK took none of the branch nodes.
#
# ## Interview answer
#
# `torch.cond(pred, true_fn, false_fn, operands)` is the supported way to keep a real runtime branch: it is a
# higher-order operator, both branches are traced into the graph and the predicate is evaluated at run time.
# The constraints: both branches take the same operands and return the same number of outputs with matching
# dtypes and compatible shapes, they must not mutate their inputs or close over tensors outside the
# operands, and each must itself be exportable. And backend delegation is weaker inside conditionals, so
# the cond region may run on the runtime's portable kernels instead of the accelerator; I measure that.

# %% [markdown]
# ### Check: the cond model matches eager on both sides

# %%
inside = [p for p in probes if not art.input_contract().violations(p.args)]
sides = cf.branch_sides(inside, lambda t: t.sum() > 0)
assert sides["true"] > 0 and sides["false"] > 0, sides
assert report.ok_within_contract and original_report.ok_within_contract, report
print(f"ScaleOrShiftCond: parity with eager on {len(inside)} inputs inside the contract, sides {sides}")
