# %% [markdown]
# # 02 · Loud failures, and how to read the error
#
# **What you will learn**
# - the three errors that stop an export on your build machine: a **data-dependent guard**, an
#   **unsupported operator**, and a **guard on a dynamic dimension**;
# - why a loud failure is the *good* outcome (compare lesson 01);
# - a sequence that works on any "this model won't export": read the error → data-dependent or
#   unsupported operator? → find the line in `forward()` → is the branch *semantic* or *incidental*? →
#   fix → re-export → diff against eager on inputs that exercise **both** sides.
#
# `helpers.diagnose_export` classifies errors for you. You will do it yourself first.

# %%
import torch
from torch.export import Dim

import helpers
from helpers import models
from helpers.display import check_prediction
from helpers.lessons import control_flow as cf
from helpers.widgets import PredictThenReveal

_ = torch.manual_seed(0)
x = torch.randn(3, 4)

# %% [markdown]
# ## The trap, live
#
# ### 1. A branch on a tensor's value
#
# `ScaleOrShift` picks a layer with `if x.sum() > 0`. That condition is a tensor; Python's `if` asks it for
# a `bool`, and while tracing there is no value to give.

# %%
err = cf.show_export_error(torch.export.export, models.ScaleOrShift(), (x,))

# %% [markdown]
# Read it from the top: **`GuardOnDataDependentSymNode`**, "could not guard on data-dependent expression".
# The expression is about `u0`, an *unbacked* symbol: a number computed from data. Then the line that asked:
# `if x.sum() > 0:`.
#
# ### 2. An operator the pipeline cannot take
#
# `MedianCenter` exports fine. The failure comes one stage later, when the graph is converted to the edge
# dialect that ExecuTorch accepts:

# %%
median_model = cf.MedianCenter()
err = cf.show_export_error(helpers.lower, median_model, (x,), max_lines=3)

# %% [markdown]
# Nothing about data here: `aten.median` is simply not in the Core ATen operator set. Unsupported
# operators surface at three stages: at **export** (a custom op with no fake kernel to trace with), at
# **lowering** (this one), or at **load**, when the runtime has no kernel for an operator (an exercise
# below).
#
# ### 3. A guard on a dynamic dimension
#
# `BatchGate` sends large batches down a cheaper path: `if x.shape[0] > 4`. We export with a batch of 8 and
# declare the batch dynamic from 1 to 16.

# %%
gate = cf.BatchGate()
eight = torch.randn(8, 4)
batch = Dim("batch", min=1, max=16)
err = cf.show_export_error(torch.export.export, gate, (eight,), dynamic_shapes={"x": {0: batch}})

# %% [markdown]
# This time export *could* answer: with 8 rows the branch is `True`, and it would guard on `batch > 4`.
# But you promised every batch from 1 to 16, so it refuses and proposes the range the traced code supports:
# `min=5`. That suggestion is a statement about the code, not advice: taking it silently drops small batches.
#
# ## Why it happens
#
# | the error says | kind | what happened | where to look |
# |---|---|---|---|
# | `GuardOnDataDependentSymNode`, "data-dependent expression" | data-dependent | Python asked for the value of a tensor computed from data (`if`, `while`, `.item()`) | the `File … line …` it quotes in `forward()` |
# | "not in Core ATen opset", "kernel … not found", "no fake impl" | unsupported operator | an operator a stage of the pipeline does not have | the operator's name; the stage (export / lower / load) |
# | "Constraints violated", "Suggested fixes: batch = Dim(…)" | guard on a dynamic dimension | the code reasons about a size in a way that does not hold for the whole declared range | the suggested `Dim`: it tells you what range the code assumes |
#
# Export tracks sizes symbolically and *can* decide a size comparison by narrowing the range (a guard);
# it cannot decide anything about values computed from data, so it stops. Operators are a separate axis:
# the graph is fine, a stage lacks the kernel.
#
# ## The fixes: the sequence, on a real model
#
# `Triage` has the three kinds of branch a real `forward()` collects: a training-only noise, an input check,
# and the branch that matters.

# %%
triage = cf.Triage()
print(cf.forward_source(triage))

# %% [markdown]
# **1 · Read the error.**

# %%
err = cf.show_export_error(torch.export.export, triage, (x,), max_lines=6)

# %% [markdown]
# **2 · Data-dependent or unsupported operator?** Data-dependent: the guard is on `u0`, a value.
# **3 · Find the line.** `if self.validate and torch.isnan(x).any():`. (The `if self.training:` line above it
# did not fail: `training` is a plain attribute, `False` in `eval()`, so that branch was silently and
# correctly dropped.)
#
# `diagnose_export` agrees, and names the line:

# %%
first = helpers.diagnose_export(triage, (x,))
print(first)

# %% [markdown]
# **4 · Semantic or incidental?** An input check is *incidental*: the app can validate its own camera frames
# or sensor values before calling the model. Delete it from the export path: here, `validate=False`.
# (A plain-attribute flag is the lesson-01 mechanism used on purpose: `and` short-circuits, so the tensor is
# never asked.) **5 · Re-export:**

# %%
second = helpers.diagnose_export(cf.Triage(validate=False), (x,))
print(second)

# %% [markdown]
# A second error: `if x.mean() > 0:` chooses between two different layers. That is *semantic*: both sides
# must survive export. `torch.cond` keeps both in the graph (lesson 03 covers it in depth):

# %%
fixed = cf.Triage(validate=False, use_cond=True)
art_fixed = helpers.lower(fixed, (x,))
cf.source_and_graph(fixed, art_fixed, "Triage(validate=False, use_cond=True)")

# %% [markdown]
# **6 · Diff against eager, on inputs that exercise both sides.** The reference is the *original* model,
# with its check and its Python `if`. First, make sure the probe set really takes both branches:

# %%
probes = helpers.probe_inputs((x,))
print("probes per side of `x.mean() > 0`:", cf.branch_sides(probes, lambda t: t.mean() > 0))
triage_report = helpers.compare(triage, art_fixed, probes)
print(triage_report)

# %% [markdown]
# Every input inside the contract matches, on both sides. The rows outside it are the probe set nudging the
# static shape on purpose: the runtime rejects them, or eager itself cannot run them.
#
# The guard on the dynamic dimension gets the same treatment. Is `x.shape[0] > 4` semantic? Yes, it picks a
# layer. So instead of narrowing the `Dim`, keep both paths: `torch.cond` also takes a *size* condition as
# its predicate.

# %%
gate_fixed = cf.BatchGateCond()
art_gate = helpers.lower(gate_fixed, (eight,), dynamic_shapes={"x": {0: batch}})
gate_probes = helpers.probe_inputs((eight,), {"x": {0: batch}})
print("probes per side of `batch > 4`:", cf.branch_sides(gate_probes, lambda t: t.shape[0] > 4))
gate_report = helpers.compare(gate, art_gate, gate_probes)
print(gate_report.summary())

# %% [markdown]
# ## Exercises
#
# ### Classify before you diagnose
#
# For each model, write the kind you expect: `"data_dependent"`, `"unsupported_operator"`,
# `"constraint_violation"` or `"ok"`. Then run the reveal.

# %%
my_kinds = {
    "WhileDouble": "ok",                # while x.sum() < 10: x = x * 2
    "SortValues (portable)": "ok",      # torch.sort(x)[0]
    "BatchGate, batch 2 ∈ [1, 16]": "ok",
}

# %%
cases = {
    "WhileDouble": (models.WhileDouble(), (torch.rand(3),), None, "xnnpack"),
    "SortValues (portable)": (cf.SortValues(), (torch.randn(5),), None, "portable"),
    "BatchGate, batch 2 ∈ [1, 16]": (gate, (torch.randn(2, 4),), {"x": {0: batch}}, "xnnpack"),
}
for name, (model, args, dynamic, backend) in cases.items():
    d = helpers.diagnose_export(model, args, dynamic, backend=backend)
    print(f"— {name} —")
    _ = check_prediction(my_kinds[name], d.kind, d.summary)

# %% [markdown]
# ### Predict, then reveal: at which stage?
#
# `SortValues` failed above. At which stage of the pipeline did it fail: `torch.export`, lowering, or when the
# runtime loaded the program?

# %%
sort_diagnosis = helpers.diagnose_export(cf.SortValues(), (torch.randn(5),), backend="portable")


def reveal_sort_stage():
    return sort_diagnosis.stage, ("export and lowering accept aten.sort; the runtime in this build has no "
                                  "kernel for aten::sort.values, so loading the program fails.")


quiz = PredictThenReveal("torch.sort on the portable backend fails at…", ["export", "lower", "load"],
                         reveal_sort_stage)
quiz

# %% [markdown]
# ## Takeaways
#
# - A loud failure is the good outcome: it happens on your machine, not in the field.
# - Read the error's *kind* first: a guard on data (`u0`, "data-dependent") is control flow; "not in Core
#   ATen" / "kernel not found" / "no fake impl" is an operator; "Constraints violated" with a suggested
#   `Dim` is a size assumption.
# - Find the line, then decide: *incidental* branches (debug, training-only, assertions, input checks) are
#   deleted from the export path; *semantic* ones become `torch.cond`, `torch.where`, or app logic.
# - A suggested `Dim` describes what the code assumes; adopt it only if that range is really all you need.
# - The fix is done only when the `.pte` matches the **original** eager model on inputs covering both sides.
#
# ## Interview answer
#
# *"This model won't export."* I read the error to see whether it is a data-dependent guard or an
# unsupported operator; I find the offending `if` or `while` in `forward()`; I decide whether the branch is
# semantic, which needs `torch.cond` or two exported methods chosen by the app, or incidental, like a debug
# path, a training-only branch or an assertion, which I delete from the export path. Then I re-export and
# diff the outputs against eager on inputs that exercise both sides of the original branch.

# %% [markdown]
# ### Check: the fixed models match eager on their probe sets, on both sides

# %%
assert triage_report.ok_within_contract, triage_report
assert cf.branch_sides([p for p in probes if not art_fixed.input_contract().violations(p.args)],
                       lambda t: t.mean() > 0)["false"] > 0
assert gate_report.ok_within_contract, gate_report
sides = cf.branch_sides([p for p in gate_probes if not art_gate.input_contract().violations(p.args)],
                        lambda t: t.shape[0] > 4)
assert sides["true"] > 0 and sides["false"] > 0, sides
print("Triage and BatchGate fixed: parity inside the contract, both sides exercised")
