# %% [markdown]
# # 14 · Values that decide sizes: `.item()`, masks and `torch._check` on the device
#
# **What you will learn**
# - what export does with a size read from data (`.item()`): an *unbacked symbol*, a size nobody knows;
# - why a program can export and still fail to lower, and what `torch._check` tells the lowering;
# - what the `.pte` plans for a size that depends on data, read from the program, and what the device does when the
#   promise behind it is broken;
# - masks (`x[x > 0]`): the size comes from data too, and the plan holds the worst case.
#
# **Terms**: everything from the table in [lesson 00](00_start_here.ipynb), and:
#
# | term | meaning |
# |---|---|
# | **backed symbol** | a symbolic size export has an example value for (a `Dim`: `s0`, `s1`, …) |
# | **unbacked symbol** | a symbolic size or value read from a tensor's *data* (`.item()`, a mask): `u0`, `u1`, …; export has no example value to decide a question about it |
# | **guard** | a question about a symbol that tracing must answer to go on (`is u0 < 0?`) |
# | **`torch._check(cond)`** | a promise about a symbol: checked in eager, used by export to answer guards and bound sizes |

# %%
from importlib.metadata import version

import torch

import helpers
from helpers import course, interview, questions
from helpers.diagnose import diagnose_export
from helpers.display import show_source

sizes = course.lesson(14)  # this lesson's models and tools: helpers/lessons/14_values_that_decide_sizes.py
print(f"torch {version('torch')} · executorch {version('executorch')}")

# %% [markdown]
# ## 1. A count read from data
#
# An app sends a table of 16 token rows: the prompt's tokens first, then padding. Today its model runs the layer on
# every row, and the app keeps the prompt's:

# %%
show_source(sizes.AllRows)

# %%
tokens = sizes.token_table()
all_rows = helpers.lower(sizes.AllRows(), (tokens,))
print("all 16 rows, .pte against eager:", helpers.check_one(sizes.AllRows(), all_rows, (tokens,)).describe())

# %% [markdown]
# For a 3-token prompt, 13 of the 16 rows are wasted work. `ValidRows` also takes `n`, how many rows are the
# prompt's, and runs the layer on those only. `n` is a tensor, as the app sends it: a Python `int` would be baked
# into the program (lesson 01).

# %%
show_source(sizes.ValidRows)

# %% [markdown]
# Export it with a prompt of 5 tokens and read the graph:

# %%
five = sizes.n(5)
exported = torch.export.export(sizes.ValidRows(), (tokens, five))
print(exported.graph_module.code.strip())

# %% [markdown]
# `item` gives a symbol `u…` (an **unbacked** symbol: a value read from data, with no example to reason from), and
# the slice uses it. Export also recorded what it knows of the slice's size, as runtime checks (`_assert_scalar`):
# between 0 and 16 rows.
#
# Export worked. Predict before we lower it for the device:

# %%
questions.ask("14.where_it_stops")

# %%
d = diagnose_export(sizes.ValidRows(), (tokens, five))
print(d.stage, "·", d.message.splitlines()[0])

# %% [markdown]
# ## 2. Why: the lowering asks a question about the symbol
#
# ExecuTorch's lowering (`to_edge`) replaces views by copies the runtime has kernels for (`slice` → `slice_copy`);
# working out the copy's size runs torch's decomposition `slice_forward`, which, like Python, counts a negative end
# from the back:

# %%
import inspect

import torch._decomp.decompositions as decompositions

source = inspect.getsource(decompositions.slice_forward).splitlines()
print("\n".join(line for line in source if "end_val" in line and ("if" in line or "elif" in line)))

# %% [markdown]
# `if end_val < 0` is a **guard**: a Python `if` on the symbol (the error's `u…` has a new number because lowering
# traces the graph again: the same value, named anew). With an example value export could answer it; for a value
# read from data it cannot, and lowering stops. The offending line is torch's, not yours: the fix is in your
# `forward()` all the same.
#
# ## 3. The fix: promise what the value can be
#
# `torch._check(cond)` states a fact about the symbol. In eager it is checked (and raises if false); in export it
# answers guards. (Lesson 02 promised a fact about a value that picks a branch; here the value is a size.)
# `ValidRowsChecked` promises `0 <= n <= 16`: the end is never negative, never past the table. Both are needed: with
# `n >= 0` alone the lowering stops at the next `if` printed above, `end_val > sizes[dim]`.

# %%
show_source(sizes.ValidRowsChecked)

# %%
checked = sizes.lower_valid_rows_checked()
print("output planned for", checked.runtime_output_shapes()[0], "·", checked.delegation().summary())

# %% [markdown]
# The `.pte` plans its output for the largest size the promises allow, 16 rows, and each call fills part of it.
# Every prompt length the app sends, on the device and in eager:

# %%
reference = sizes.ValidRows()
for k in (0, 1, 5, 15, 16):
    row = helpers.check_one(reference, checked, (sizes.token_table(1), sizes.n(k)), label=f"n = {k}")
    print(f"n = {k:2d}: {row.status}, output {tuple(row.pte_output[0].shape)}")

# %% [markdown]
# ## 4. A promise the device does not check
#
# In eager, `ValidRowsChecked` with `n = -1` raises: the promise is checked. Predict what its `.pte` does when the
# app sends `n = -1` (a bug in the app's count):

# %%
questions.ask("14.broken_promise")

# %%
try:
    sizes.ValidRowsChecked()(sizes.token_table(1), sizes.n(-1))
except RuntimeError as exc:
    print("eager:", str(exc).split(". (")[0])
(out,) = checked.run_raw(sizes.token_table(1), sizes.n(-1))
print(".pte: ", tuple(out.shape))

# %% [markdown]
# Why: when ExecuTorch writes the program (`to_executorch`), a pass removes every assert from the graph. Its own
# docstring:

# %%
from executorch.exir.passes.remove_graph_asserts_pass import RemoveGraphAssertsPass

print(RemoveGraphAssertsPass.__doc__.strip())

# %% [markdown]
# So a broken promise is not refused on the device. A value whose output fits the plan runs silently (here
# `tokens[:-1]`: 15 rows). The app checks the range itself before the call.
#
# ## 5. A size nothing bounds
#
# A slice is bounded by the tensor it slices. A new tensor made from the value is not:

# %%
show_source(sizes.Repeat)

# %%
unbounded = diagnose_export(sizes.Repeat(), (torch.randn(1, 8), sizes.n(3)))
print(unbounded.stage, "·", unbounded.message.splitlines()[0])

# %% [markdown]
# To plan memory, ExecuTorch gives every tensor the largest size it can take (`exir/sym_util.py`, whose message this
# is); `u…` can be anything (`int_oo`: unbounded). An upper bound is a promise too:

# %%
show_source(sizes.RepeatAtMost12)

# %%
features = torch.randn(1, 8)
at_most_12 = helpers.lower(sizes.RepeatAtMost12(), (features, sizes.n(3)))
print("output planned for", at_most_12.runtime_output_shapes()[0])
refusal = ""
for k in (12, 13):
    try:
        print(f"n = {k}:", tuple(at_most_12.run_raw(features, sizes.n(k))[0].shape))
    except helpers.RuntimeRejectedError as exc:
        refusal = str(exc)
        print(f"n = {k}: refused:", refusal.split(": ", 1)[1].split(". Check")[0])

# %% [markdown]
# Above the plan the runtime refuses the call: its kernel cannot resize a planned buffer past its capacity (error
# `0x12`, `InvalidArgument`). Loud, but only because the value overflowed a planned buffer: a broken promise whose
# output fits the plan (section 4) is silent.
#
# ## 6. Masks: the size comes from data, the plan holds the worst case

# %%
show_source(sizes.Positives)

# %%
x = torch.randn(10, generator=torch.Generator().manual_seed(3))
positives = helpers.lower(sizes.Positives(), (x,))
print("output planned for", positives.runtime_output_shapes()[0])
for label, values in (("mixed", x), ("all positive", x.abs() + 0.1), ("none positive", -x.abs())):
    row = helpers.check_one(sizes.Positives(), positives, (values,), label=label)
    print(f"{label:13s}: {row.status}, output {tuple(row.pte_output[0].shape)}")

# %% [markdown]
# No promise needed: a boolean mask keeps at most every element, so export bounds the size by the input's 10 elements
# itself, and the plan reserves all 10.
#
# ## 7. A branch on the value
#
# A promise answers a question the same way for every input it covers. A branch that really goes both ways has no
# such answer: promising one side would bake it in (lesson 02's trap). `ShortOrLong` picks a path by the prompt's
# length:

# %%
show_source(sizes.ShortOrLong)

# %%
branch = diagnose_export(sizes.ShortOrLong(), (tokens, five))
print(branch.stage, "·", branch.kind, "·", branch.source_line)

# %% [markdown]
# This one stops at export, at your `if`: lesson 02's data-dependent error. A branch that really goes both ways
# becomes `torch.cond` (lesson 03), `torch.where` (lesson 04), or a decision the app takes before the call
# (lesson 05): the app knows the prompt's length.
#
# ## 8. What `draft_export` reports
#
# Lesson 02's `draft_export` keeps going where export would stop and lists every issue in one report. Predict its
# report on `ValidRows`, the model whose lowering failed in §1:

# %%
questions.ask("14.draft_report")

# %%
from helpers.lessons import control_flow as cf

draft = cf.draft_export_decisions(sizes.ValidRows(), (tokens, five))
print(f"draft_export: {len(draft.issues)} issue(s)")

# %% [markdown]
# `draft_export` checks export, and export was fine: the question that stopped `ValidRows` is asked later, by the
# lowering. A clean report is not a program that builds: lower it.
#
# ## ✏️ Exercise 14.bound_positions
#
# `Positions` adds a position code to each of the prompt's rows. The app sends prompts of **1 to 12 tokens** in the
# 16-row table.

# %%
Positions = sizes.Positions
show_source(Positions)

# %% [markdown]
# Make it export, lower for XNNPACK and run on the device for every prompt the app sends. The check lowers your
# model, runs prompts of 1 to 12 tokens against `Positions` in eager mode, and reads how many rows the `.pte`
# plans for its output: the longest prompt's, no more.

# %%
# ✏️ Exercise 14.bound_positions — edit this cell, then run the check below.
class Bounded(Positions):
    pass  # Positions' own forward(): n.item() used as a size, with no promise


answer = Bounded()

# %%
from helpers import exercises

grade = exercises.check("14.bound_positions", answer)

# %% [markdown]
# ## Takeaways
#
# - `.item()` and masks give *unbacked* symbols: sizes export has no example for. A program can export and still
#   fail to lower, when the lowering asks a question about one.
# - `torch._check` is a promise: checked in eager, used by export to answer guards, and the memory plan reserves
#   the largest size it allows.
# - On the device the promise is gone: a value above the plan is refused, a value inside it that breaks the promise
#   runs silently. The app validates the value before the call.
# - A branch on the value stops at export (lesson 02); a guard asked while lowering does not show in export's
#   reports, `draft_export`'s included: lower the program to know it builds.
#
# ## Interview question
#
# Answer it aloud first (about 30 seconds), then reveal a model answer.

# %%
interview.ask("14.size_promise")

# %% [markdown] jp-MarkdownHeadingCollapsed=true
# ## Checked for CI: the statements above, from the runs

# %% tags=["ci-check"] jupyter={"source_hidden": true}
assert "aten.item" in exported.graph_module.code and "_assert_scalar" in exported.graph_module.code
assert "<= 16" in exported.graph_module.code  # "at most 16 rows"
assert d.stage == "lower" and "< 0" in d.message.splitlines()[0]  # "lowering stops", at `if end_val < 0`
assert checked.runtime_output_shapes()[0] == (16, 8)
assert out.shape == (15, 8) and torch.allclose(out, reference(sizes.token_table(1)[:15], sizes.n(15)), atol=1e-5)
assert "int_oo" in unbounded.message and at_most_12.runtime_output_shapes()[0] == (12, 8)
assert "0x12" in refusal and "maximum capacity of 96 elements" in refusal  # 12 rows × 8
assert positives.runtime_output_shapes()[0] == (10,)
assert (branch.stage, branch.kind, branch.source_line) == ("export", "data_dependent", "forward(): if k > 8:")
assert not draft.issues
print("checked: the guard, the planned sizes, the silent n = -1, the refusal above the plan")
