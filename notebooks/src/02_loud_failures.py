# %% [markdown]
# # 02 · Loud failures, and how to read the error
#
# **What you will learn**
# - why `torch.compile` runs a model that `torch.export` refuses: a graph break has a Python fallback, an
#   exported program has none;
# - the three errors that stop an export on your build machine: a **data-dependent guard**, an
#   **unsupported operator** (at export, lowering or load), and a **guard on a dynamic dimension**;
# - when `torch._check(...)` is the right fix (a fact about a number you can promise) and when it is a bug
#   (a branch that really goes both ways), and what `torch.export.draft_export` tells you;
# - a sequence that works on any "this model won't export": read the error → classify → find the line →
#   *semantic* or *incidental*? → fix → re-export → diff against eager on inputs from **both** sides.
#
# Terms from lesson 00's glossary used here: export, trace, guard, specialization, `Dim`, edge dialect,
# portable kernels, Dynamo.

# %%
import torch
from torch.export import Dim

import helpers
from helpers import interview, models, questions
from helpers.display import show_source
from helpers.lessons import control_flow as cf
from helpers.lessons import control_flow_fixes as fixes

_ = torch.manual_seed(0)
x = torch.randn(3, 4)

# %% [markdown]
# ## 1. The same model under `torch.compile` and under `torch.export`
#
# `ScaleOrShift` picks one of two layers from the sign of the input's sum:

# %%
show_source(models.ScaleOrShift)

# %% [markdown]
# `torch.compile` reads `forward()` with **Dynamo**, its bytecode tracer. When Dynamo meets something it cannot
# put in a graph, here an `if` on a tensor's value, it inserts a **graph break**: the code before becomes one
# graph, the `if` runs as ordinary Python, and a second graph picks up after it. `torch._dynamo.explain` counts
# them. Then the same model goes to `torch.export`:

# %%
both = cf.compile_vs_export(models.ScaleOrShift(), {"x.sum() > 0": x.abs() + 0.1, "x.sum() < 0": -x.abs() - 0.1})
both

# %% [markdown]
# `generic_jump TensorVariable()` is Dynamo's way of saying "a jump (the `if`) decided by a tensor". Under
# `torch.compile` that costs a graph break and nothing else: Python is still there to evaluate the condition,
# so both inputs get the right layer. Export must produce **one** graph for every input, to run where there is
# no Python (the ExecuTorch runtime walks a fixed instruction list), so it has no such escape hatch: the same
# `if` is an error. Full-graph capture is mandatory.
#
# ## 2. A data-dependent guard
#
# The whole error, as torch words it:

# %%
err = cf.show_export_error(torch.export.export, models.ScaleOrShift(), (x,))

# %% [markdown]
# Read it from the top:
#
# - **`GuardOnDataDependentSymNode`**, "could not guard on data-dependent expression `Eq(u0, 1)`". `u0` is an
#   *unbacked* symbol: a number computed from data (here the boolean `x.sum() > 0`, as 0 or 1). Export would
#   need to know whether it equals 1 to pick a side, and it cannot.
# - **"consider using data-dependent friendly APIs such as `guard_or_false` …"** is torch's own remedy. It is
#   addressed to code that asks questions about *sizes* and can live with a conservative answer (library code,
#   mostly). Your `if` chooses between two layers: there is no conservative answer to give.
# - **"The following call raised this error"** names the line in `forward()`: `if x.sum() > 0:`. That line is
#   where you work.
#
# ## 3. An operator the pipeline cannot take
#
# `MedianCenter` exports fine. The failure comes one stage later, when the graph is converted to the edge
# dialect:

# %%
show_source(cf.MedianCenter)

# %%
err = cf.show_export_error(helpers.lower, cf.MedianCenter(), (x,), max_lines=3)

# %% [markdown]
# Nothing about data here: `aten.median` is not in the Core ATen operator set, and the edge dialect accepts only
# that set (torch offers an exception list, the "things to try"). Unsupported operators surface at three
# stages: at **export** (a custom operator with no fake kernel to trace with), at **lowering** (this one), or at
# **load**, when the runtime has no kernel for an operator.
#
# `SortValues` returns `torch.sort(x)[0]`. `aten.sort` *is* a Core ATen operator. Built for the portable backend
# (no delegate), where does its pipeline fail?

# %%
show_source(cf.SortValues)

# %%
questions.ask("02.sort_stage")

# %% [markdown]
# ## 4. A guard on a dynamic dimension
#
# `BatchGate` sends large batches down a cheaper path:

# %%
show_source(cf.BatchGate)

# %% [markdown]
# We export with a batch of 8 and declare the batch dynamic from 1 to 16:

# %%
gate = cf.BatchGate()
eight = torch.randn(8, 4)
batch = Dim("batch", min=1, max=16)
err = cf.show_export_error(torch.export.export, gate, (eight,), dynamic_shapes={"x": {0: batch}})

# %% [markdown]
# This time export *could* answer: with 8 rows the branch is `True`, and it would guard on `batch > 4`. But you
# promised every batch from 1 to 16, so it refuses and proposes the range the traced code supports: `min=5`.
# That suggestion is a statement about the code, not a fix: it describes the one path export recorded (we run
# it below).
#
# Apply lesson 01 to it: the same `BatchGate`, exported with the same batch of 8 but **without** a `Dim`.

# %%
questions.ask("02.static_gate_kind")

# %% [markdown]
# Now take torch's suggestion, `min=5`, and it exports: the program holds only the large-batch path. Batches
# 1 to 4 are outside its contract, but the runtime does not check a `Dim`'s min, so a device that sends one
# runs that path on it without complaint:

# %%
art_gate5 = helpers.lower(gate, (eight,), dynamic_shapes={"x": {0: Dim("batch", min=5, max=16)}})
gate5_rows = {b: helpers.check_one(gate, art_gate5, (torch.randn(b, 4),)) for b in (2, 4, 5)}
for b, row in gate5_rows.items():
    print(f"batch {b}:", cf.verdict_line(row))

# %% [markdown]
# Nothing is dropped or refused: small batches get the other branch's answer. Take the suggested range only
# when it is the range the app really sends, and then check inputs on the host (`artifact.run` refuses
# batch 2 here), or fix the code so it holds for every batch.

# %% [markdown]
# ## Why it happens
#
# | the error says | kind | what happened | where to look |
# |---|---|---|---|
# | `GuardOnDataDependentSymNode`, "data-dependent expression" | data-dependent | Python asked for a value computed from data: an `if` or `while` on a tensor, or a branch on a `.item()` result (`.item()` itself exports, as an unbacked symbol: §5 runs one) | the `File … line …` it quotes in `forward()` |
# | "not in Core ATen opset", "kernel … not found", "no fake impl" | unsupported operator | an operator one stage of the pipeline does not have | the operator's name; the stage (export / lower / load) |
# | "Constraints violated", "Suggested fixes: batch = Dim(…)" | guard on a dynamic dimension | the code reasons about a size in a way that does not hold for the whole declared range | the suggested `Dim`: it tells you what range the code assumes |
#
# Export tracks sizes symbolically and *can* decide a size comparison by narrowing the range (a guard); it
# cannot decide anything about values computed from data, so it stops. Operators are a separate axis: the
# graph is fine, a stage lacks the kernel.
#
# ## 5. `torch._check`: a promise export can use
#
# Some data-dependent questions have an answer *you* know. `ValidMean` averages the first `n` frames of a clip,
# where `n` arrives as a tensor from the app:

# %%
show_source(cf.ValidMean)

# %%
clip = torch.randn(2, 8)
err = cf.show_export_error(torch.export.export, cf.ValidMean(), (clip, torch.tensor([5])), max_lines=4)

# %% [markdown]
# `k == 0` is data-dependent. But the app never sends an empty clip, and never more valid frames than it
# sends: `1 <= k <= frames` is a fact of the contract. `torch._check(condition)` states such a fact; export
# uses it to decide the `if` (for every `k >= 1`, `k == 0` is `False`) and records the promise as a runtime
# assertion:

# %%
show_source(cf.ValidMeanChecked)

# %%
art_valid = helpers.lower(cf.ValidMeanChecked(), (clip, torch.tensor([5])))
for k in (1, 4, 8):
    row = helpers.check_one(cf.ValidMean(), art_valid, (clip, torch.tensor([k])))
    print(f"n = {k}: {row.describe()}")

# %% [markdown]
# The promise is yours to keep. The exported graph holds it as `_assert_scalar` nodes, but the `.pte` does not:
# here are the instructions the runtime walks, read from the serialized program.

# %%
fixes.instructions(art_valid)

# %% [markdown]
# No assertion among them: ExecuTorch drops export's runtime assertions, so the device does not check the
# promise. An empty clip (`n = 0`, which the original handles) runs through the `k >= 1` path and averages
# nothing:

# %%
print("n = 0:", helpers.check_one(cf.ValidMean(), art_valid, (clip, torch.tensor([0]))).describe())

# %% [markdown]
# The same tool on a semantic branch, one whose two sides both happen: `ScaleOrShiftChecked` is `ScaleOrShift` with a
# promise in front of its `if`, `torch._check(x.sum() > 0)`, the sum is always positive:

# %%
show_source(cf.ScaleOrShiftChecked)

# %% [markdown]
# It exports (with a positive example). The app then sends an input whose sum is negative:

# %%
questions.ask("02.check_promise")

# %% [markdown]
# So `torch._check` is the wrong fix when the branch really goes both ways: export takes the promise, and nothing on
# the device keeps it.
#
# ## 6. `draft_export`: every issue in one report
#
# `torch.export.export` stops at the first error, and the fix for one reveals the next. torch's full error message
# ends with a suggestion: replace your `export()` call with `draft_export()` to "get a list of all other errors
# that may occur in your export call". `torch.export.draft_export` keeps going where export would stop, and
# reports every issue it met, each with its kind and the line of `forward()` that caused it. Here it is on
# `Triage`, a model with several branches (its source is in §7):

# %%
draft = cf.draft_export_decisions(cf.Triage(), (x,))
draft

# %% [markdown]
# One run, every data-dependent line of `Triage` listed: the to-do list export would have handed you one error
# at a time. Look at what it did to get past each one: it took the side the example's *values* chose and kept
# the decision as a runtime assertion, so the program it returns is lesson 01's silent specialization. And its
# advice, "add `torch._check(...)`", is §5's tool: right for a fact you can promise, a bug for a branch that
# really goes both ways. Use the report to plan the fixes; do not ship the program (the device does not check
# runtime assertions, as §5 showed).
#
# ## 7. The sequence, on a real model
#
# `Triage` has the three kinds of branch a real `forward()` collects: a training-only noise, an input check, and
# the branch that matters.

# %%
show_source(cf.Triage)

# %% [markdown]
# **1 · Read the error.**

# %%
triage = cf.Triage()
err = cf.show_export_error(torch.export.export, triage, (x,), max_lines=6)

# %% [markdown]
# **2 · Data-dependent or unsupported operator?** Data-dependent: the guard is on `u0`, a value. **3 · Find the
# line.** `if torch.isnan(x).any():`. (The `if self.training:` line above it did not fail: `training` is a plain
# attribute, `False` in `eval()`, so that branch was silently and correctly dropped.) `diagnose_export` agrees:

# %%
print(helpers.diagnose_export(triage, (x,)))

# %% [markdown]
# ### ✏️ Exercise 02.triage: steps 4–6 are yours
#
# **4 · Semantic or incidental?** An input check is *incidental*: the app can validate its own camera frames or
# sensor values before calling the model. `x.mean() > 0` choosing between two layers is *semantic*: both sides
# must survive export. **5 · Fix and re-export. 6 · Diff against eager.**
#
# Rewrite `forward()` in the cell below so that it exports with the semantic branch kept (`torch.cond(pred,
# true_fn, false_fn, operands)` keeps both branches; lesson 03 covers it in depth; `torch.where` is lesson 04).
# The check exports, lowers and runs your model and compares it with the **original** `Triage` in eager mode on
# finite inputs from both sides of `x.mean() > 0`.

# %%
# ✏️ Exercise 02.triage — edit this cell, then run the check below.
from helpers.lessons.control_flow import Triage


class TriageForExport(Triage):
    def forward(self, x):
        if self.training:
            x = x + 0.01 * torch.randn_like(x)
        if torch.isnan(x).any():
            raise ValueError("NaN in the input")
        if x.mean() > 0:
            return self.bright(x)
        return self.dark(x)


answer = TriageForExport()

# %%
from helpers import exercises

grade = exercises.check("02.triage", answer)

# %% [markdown]
# ## The guard on a dynamic dimension, fixed and re-checked
#
# Is `BatchGate`'s `x.shape[0] > 4` semantic? Yes, it picks a layer. So instead of narrowing the `Dim`, keep
# both paths: `torch.cond` also takes a *size* condition (a symbolic boolean) as its predicate.

# %%
show_source(cf.BatchGateCond)

# %% [markdown]
# Step 6, the diff against the **original** `BatchGate`, on batches from both sides of `> 4`. First, make sure
# the probe set really takes both sides:

# %%
art_gate = helpers.lower(cf.BatchGateCond(), (eight,), dynamic_shapes={"x": {0: batch}})
gate_probes = [p for p in helpers.probe_inputs((eight,), {"x": {0: batch}})
               if not art_gate.input_contract().violations(p.args)]  # inside the contract: this is about the branch
gate_probes += [helpers.Probe(f"batch = {n} (edge of > 4)", (torch.randn(n, 4),)) for n in (2, 3, 4, 5)]
print("probes per side of `batch > 4`:", cf.branch_sides(gate_probes, lambda t: t.shape[0] > 4))
gate_report = helpers.compare(gate, art_gate, gate_probes)
print(gate_report)

# %% [markdown]
# ## Takeaways
#
# **The one to keep:** a loud failure is the good outcome. Read its kind, find the line, decide whether the branch is
# semantic or incidental, fix it, and re-check the `.pte` against the *original* model on inputs from both sides.
#
# In detail:
# - `torch.compile` can break a graph and fall back to Python; export cannot, and neither can the device runtime.
# - Read the error's *kind* first: a guard on data (`u0`, "data-dependent") is control flow; "not in Core ATen" /
#   "kernel not found" / "no fake impl" is an operator, and its stage matters; "Constraints violated" with a
#   suggested `Dim` is a size assumption.
# - Find the line, then decide: *incidental* branches (debug, training-only, assertions, input checks) are
#   deleted from the export path; *semantic* ones become `torch.cond`, `torch.where`, or app logic.
# - `torch._check` states a fact you can promise (a count ≥ 1); the device does not check it. Never use it to
#   pick one side of a semantic branch.
# - `draft_export` lists every issue in one report, with its line; its program is specialized, not shippable.
# - The fix is done only when the `.pte` matches the **original** eager model on inputs covering both sides.
#
# ## Interview questions
#
# Answer each aloud first (about 30 seconds), then reveal a model answer.

# %%
interview.ask("02.wont_export")

# %%
interview.ask("02.export_vs_compile")

# %% [markdown] jp-MarkdownHeadingCollapsed=true
# ## Checked for CI: the fixes hold, on both sides

# %% tags=["ci-check"] jupyter={"source_hidden": true}
assert both.graph_breaks >= 1 and all(both.compiled_matches.values()) and "GuardOnDataDependentSymNode" in both.export_error
assert all(helpers.check_one(cf.ValidMean(), art_valid, (clip, torch.tensor([k]))).status == "match" for k in range(1, 9))
assert [line for _, line in draft.issues] == ["if torch.isnan(x).any():", "if x.mean() > 0:"]
assert len(draft.decisions) == 2 and "torch._check" in draft.advice
assert not any("assert" in detail for _, detail in fixes.instructions(art_valid).steps)
assert gate_report.ok, gate_report
assert [r.status for r in gate5_rows.values()] == ["diverge", "diverge", "match"], gate5_rows  # min=5: run, wrongly
assert all(art_gate5.input_contract().violations((torch.randn(b, 4),)) for b in (2, 4))  # artifact.run refuses them
sides = cf.branch_sides(gate_probes, lambda t: t.shape[0] > 4)
assert sides["true"] > 0 and sides["false"] > 0, sides
print("ValidMeanChecked inside its promise and BatchGateCond on both sides: parity with eager")
