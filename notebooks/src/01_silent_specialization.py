# %% [markdown]
# # 01 · Silent specialization: the `.pte` that is fast and wrong
#
# **What you will learn**
# - why `torch.export` keeps only the branch your example took when an `if` reads a shape, a
#   configuration attribute or a Python scalar;
# - how that reaches the device: a program that runs, fully delegated and fast, and gives a
#   *different answer* from eager PyTorch, or refuses inputs your example did not cover;
# - the same trap in loops: `for i in range(x.shape[0])` unrolled, a Python int passed alongside,
#   and a `while` on a tensor that does not export at all;
# - why parity must be checked on **varied** inputs, never one sample.
#
# Every cell below runs the real exporter, XNNPACK lowering and the ExecuTorch runtime.

# %%
import ipywidgets as w
import torch
from torch.export import Dim

import helpers
from helpers import models
from helpers.display import check_prediction
from helpers.lessons import control_flow as cf
from helpers.widgets import PredictThenReveal

_ = torch.manual_seed(0)

# %% [markdown]
# ## The trap, live
#
# ### 1. A configuration attribute
#
# `ConfigBranch` reads a plain attribute, `use_residual`, in an `if`. We export it the way it was
# configured in the training repo (`True`).

# %%
model = models.ConfigBranch(use_residual=True)
x = torch.randn(2, 4)
art_flag = helpers.lower(model, (x,))
cf.source_and_graph(model, art_flag, "ConfigBranch(use_residual=True)")

# %% [markdown]
# The `if` is gone. While tracing, `self.use_residual` was the Python value `True`, so the `add`
# was recorded and the question was never asked again. The program is straight-line and XNNPACK
# takes all of it: on the device it is as fast as it gets.

# %%
print(art_flag.delegation().summary())

# %% [markdown]
# Now the app's config says `use_residual=False` (a product decision, made after export). Eager PyTorch
# follows the flag; the `.pte` cannot. We compare the model *as the app configures it* with the program
# we shipped, on a varied set of inputs:

# %%
app_model = models.ConfigBranch(use_residual=False)  # same seed, so the same weights
flag_report = helpers.compare(app_model, art_flag, helpers.probe_inputs((x,)))
print(flag_report)

# %% [markdown]
# Nothing was rejected and nothing crashed: the `.pte` simply computes the other branch. Notice the
# `values: zeros` row: with `x = 0` the residual adds nothing, so that one sample *matches*. Had the
# export check used only that input, it would have passed.
#
# ### 2. A shape
#
# `ShapeBranch` normalises over time only when there is more than one frame. We declare the frame axis
# dynamic, `Dim("frames", min=1, max=8)`, so one-frame clips are explicitly allowed.

# %%
shape_model = models.ShapeBranch()
frames = Dim("frames", min=1, max=8)
clip = torch.randn(1, 4, 4)
art_shape = helpers.lower(shape_model, (clip,), dynamic_shapes={"x": {1: frames}})
cf.source_and_graph(shape_model, art_shape, "ShapeBranch with frames ∈ [1, 8]")

# %% [markdown]
# Again only one branch. Export traced with 4 frames, and `x.shape[1] > 1` was answered `True`
# *without a guard*: the range it recorded still starts at 1.

# %%
art_shape.input_contract()

# %%
shape_probes = helpers.probe_inputs((clip,), {"x": {1: frames}})
shape_report = helpers.compare(shape_model, art_shape, shape_probes)
print(shape_report)

# %% [markdown]
# `frames = 1 (min)` is **inside** the contract and diverges: the `.pte` normalises a single frame, whose
# standard deviation is NaN. Eager skips the normalisation. Without a dynamic axis the same model is
# merely rejected for one frame, because export made 4 frames a constant:

# %%
art_shape_static = helpers.lower(shape_model, (clip,))
print(cf.verdict_line(helpers.check_one(shape_model, art_shape_static, (torch.randn(1, 1, 4),))))

# %% [markdown]
# ### 3. A Python scalar input
#
# `ScalarRepeat.forward(x, steps)` takes an `int`. Export does not make it an input you can vary: it
# runs the loop `steps` times and records the result.

# %%
scalar_model = models.ScalarRepeat()
one = torch.randn(1, 4)
art_scalar = cf.quiet_lower(scalar_model, (one, 2))
cf.source_and_graph(scalar_model, art_scalar, "ScalarRepeat exported with steps=2")

# %%
art_scalar.input_contract()

# %% [markdown]
# Two `linear`s, two `tanh`s: the loop is unrolled for `steps=2`. The runtime compares the scalar you pass
# with the baked-in value and refuses any other:

# %%
for steps in (2, 3):
    print(f"steps={steps}:", cf.verdict_line(helpers.check_one(scalar_model, art_scalar, (one, steps))))

# %% [markdown]
# ### 4. Loops over a shape
#
# `for i in range(x.shape[0])` asks for a Python int. With a static batch, export unrolls the loop once
# per example row and the batch becomes a constant.

# %%
loop_model = models.BatchLoop()
rows = torch.randn(3, 4)
art_loop = helpers.lower(loop_model, (rows,))
print("linear ops in the graph:", art_loop.graph().count("aten.linear"))
for batch in (3, 4, 2):
    print(f"batch {batch}:", cf.verdict_line(helpers.check_one(loop_model, art_loop, (torch.randn(batch, 4),))))

# %% [markdown]
# Declaring the batch dynamic does not rescue the loop: `range()` needs a concrete number, so export
# specialises the `Dim` and says so.

# %%
err = cf.show_export_error(torch.export.export, loop_model, (rows,),
                           dynamic_shapes={"x": {0: Dim("batch", min=1, max=8)}})

# %% [markdown]
# ### 5. The loop over a Python int you also pass in
#
# `CountedMean.forward(x, n)` averages the first `n` items. In eager PyTorch the caller passes
# `n = len(x)`. We export with 3 items and `n=3` and let the item axis vary. Export itself objects
# first: reading `x[2]` needs at least 3 items.

# %%
counted = cf.CountedMean()
items3 = torch.randn(3, 4)
err = cf.show_export_error(torch.export.export, counted, (items3, 3),
                           dynamic_shapes={"x": {0: Dim("items", min=1, max=8)}, "n": None})

# %% [markdown]
# Take torch's suggested fix, `min=3`, and it exports. Now the program holds a loop unrolled exactly
# three times, over an axis that may hold up to 8 items:

# %%
items = Dim("items", min=3, max=8)
art_counted = cf.quiet_lower(counted, (items3, 3), dynamic_shapes={"x": {0: items}, "n": None})
art_counted.input_contract()

# %% [markdown]
# A batch of 6 items arrives. Passing `n=6` is refused (the scalar is baked in). Passing the only value the
# program accepts, `n=3`, runs without complaint, and reads 3 of the 6 items:

# %%
_ = torch.manual_seed(6)  # a fixed batch, whatever ran before
six = torch.randn(6, 4)
err = helpers.show_error(art_counted.run_raw, six, 6)
(device_mean,) = art_counted.run_raw(six, 3)
print("eager, all 6 items: ", helpers.fmt(counted(six, 6)))
print(".pte, n=3 accepted: ", helpers.fmt(device_mean))
print("equal to eager over the first 3 items only:", torch.allclose(device_mean, counted(six[:3], 3), atol=1e-5))

# %% [markdown]
# Two items are below the `Dim`'s min. The device runtime does not check `min`; here the indexing kernel
# happens to catch `x[2]`, so this one fails loudly:

# %%
err = helpers.show_error(art_counted.run_raw, torch.randn(2, 4), 3)

# %% [markdown]
# ### 6. A `while` on a tensor fails outright
#
# `WhileDouble` doubles `x` while `x.sum() < 10`. The trip count depends on the *values*, which do not
# exist while tracing, and there is no branch to pick: export stops. This is the loud failure mode,
# the subject of the next lesson.

# %%
err = cf.show_export_error(torch.export.export, models.WhileDouble(), (torch.rand(3),))

# %% [markdown]
# ## Why it happens
#
# `torch.export` runs `forward()` once, with *symbolic* tensors shaped like your example. Every Python
# decision along the way needs a concrete answer right then:
#
# | the condition reads… | at trace time it is… | what the graph gets |
# |---|---|---|
# | a config attribute (`self.use_residual`) | a plain Python `bool` | the taken branch; no trace of the `if` |
# | a Python scalar input (`steps`, `n`) | a constant | the loop unrolled that many times; the runtime refuses other values |
# | a static shape (`x.shape[0]` of a non-dynamic axis) | an `int` | one branch / the loop unrolled; the size is fixed |
# | a dynamic shape (`x.shape[1] > 1`, `Dim` min 1) | decided by export's assumption that dynamic sizes are ≥ 2, with no guard | one branch, wrong for size 1 |
# | a tensor's values (`x.sum() > 0`, `while`) | unknown | **nothing: export fails** (lesson 02) |
#
# On the device there is no Python left to re-ask the question: the runtime walks the recorded
# instructions. The eager model in your notebook and the `.pte` on the phone disagree only on inputs
# the example did not cover, which is exactly why the bug ships.
#
# ## The fixes
#
# Each trap has a fix that keeps *every* case in the graph, or moves the decision where it belongs:
#
# - **config flag** → export one program per setting and let the app pick (lesson 05); treat the flag
#   as part of the artifact's identity;
# - **Python scalar** → make it a tensor, or one method per value (lesson 05);
# - **loop over a batch** → one batched operation;
# - **a count passed alongside** → compute from the tensor you have;
# - **shape branch** → state the range the code really supports (`min=2`) so a one-frame clip is
#   *outside* the contract and the host check refuses it (or handle one frame on the host);
# - **data-dependent branch** → `torch.cond` (03), `torch.where` (04), or hoisting (05).
#
# The loop, vectorised. Same weights, one `linear` for any batch:

# %%
loop_fixed = cf.BatchLoopVectorized()
batch = Dim("batch", min=1, max=8)
art_loop_fixed = helpers.lower(loop_fixed, (rows,), dynamic_shapes={"x": {0: batch}})
loop_report = helpers.compare(loop_model, art_loop_fixed, helpers.probe_inputs((rows,), {"x": {0: batch}}))
print(loop_report.summary())
print("linear ops in the graph:", art_loop_fixed.graph().count("aten.linear"))

# %% [markdown]
# Note the eager reference is the **original** `BatchLoop`: the fix must compute what the loop computed.
# The count, taken from the tensor (compared with the original called the way it was meant, `n = len(x)`):

# %%
counted_fixed = cf.CountedMeanVectorized()
any_items = Dim("items", min=1, max=8)
art_counted_fixed = helpers.lower(counted_fixed, (items3,), dynamic_shapes={"x": {0: any_items}})
for n in (1, 3, 6, 8):
    sample = torch.randn(n, 4)
    (out,) = art_counted_fixed.run(sample)
    print(f"{n} items: matches eager CountedMean(x, n={n}):", torch.allclose(out, counted(sample, n), atol=1e-5))

# %% [markdown]
# The shape branch with its honest range. One frame is now *outside* the contract, and `run` says so
# before the device computes anything:

# %%
frames2 = Dim("frames", min=2, max=8)
art_shape_fixed = helpers.lower(shape_model, (clip,), dynamic_shapes={"x": {1: frames2}})
err = helpers.show_error(art_shape_fixed.run, torch.randn(1, 1, 4))

# %% [markdown]
# ## Exercises
#
# ### ✏️ Exercise 01.vectorize_loop: one `.pte` for every batch
#
# `BatchLoop` (its source is above) loops over the rows of `x`. Rewrite its `forward()` so that it exports
# with `dynamic_shapes={"x": {0: Dim("batch", min=1, max=8)}}` and the `.pte` computes what the loop
# computes, for every batch from 1 to 8. Edit the cell, run it, then run the check: it exports, lowers and
# runs your model in the ExecuTorch runtime and compares it with `BatchLoop` in eager mode.

# %%
# ✏️ Exercise 01.vectorize_loop — edit this cell, then run the check below.
from helpers.models import BatchLoop


class MyBatchLoop(BatchLoop):
    def forward(self, x):
        rows = []
        for i in range(x.shape[0]):  # export needs a Python number here
            rows.append(torch.tanh(self.item(x[i])) * (i + 1))
        return torch.stack(rows)


answer = MyBatchLoop()

# %%
from helpers import exercises

grade = exercises.check("01.vectorize_loop", answer)

# %% [markdown]
# ### Explore: four traps, one widget
#
# Pick a trap; change the values, the batch/frames size, the app's `use_residual`, the scalar `steps`.
# Each change runs eager PyTorch and the **already-lowered** `.pte` (nothing is re-exported) and shows the
# verdict: match, diverge, rejected, or outside contract. Try to find a `diverge` in every trap that has one,
# and an input where a wrong program still *matches*.

# %%
explorer = cf.DivergenceExplorer()
explorer

# %% [markdown]
# The widget is plain Python underneath; the same verdicts from code:

# %%
for values in ({"trap": "shape if", "size": 1}, {"trap": "config flag", "size": 2, "flag": False},
               {"trap": "config flag", "values": "zeros"}, {"trap": "Python scalar", "steps": 3},
               {"trap": "loop over batch", "size": 4, "values": "positive", "flag": True}):
    print(f"{values}: {explorer.set(**values).verdict}")

# %% [markdown]
# ### Predict, then reveal
#
# `ConfigBranch(use_residual=False)` is exported at batch 2. The app's config later switches the flag **on**
# and sends a batch of 2 **negative** inputs. What does the device do? Pick an answer, then press *Reveal*
# (it runs the real thing).

# %%
art_no_res = helpers.lower(models.ConfigBranch(use_residual=False), (x,))


def reveal_flag_on():
    row = helpers.check_one(models.ConfigBranch(use_residual=True), art_no_res, (-x.abs() - 0.1,))
    return row.status, "the `+ x` was never recorded: the .pte computes relu(proj(x)) whatever the app's flag says."


quiz = PredictThenReveal("flag switched on after export, batch 2, negative inputs: the device…",
                         ["match", "diverge", "rejected"], reveal_flag_on)
quiz

# %% [markdown]
# And one to answer in code. `CountedMean` above was exported with `n=3` and `items ∈ [3, 8]`. The app sends
# **4** items and, as the program demands, `n=3`. Compared with eager run as intended (`n=4`), is the device's
# answer a match, a divergence, or a rejection? Write your answer, then run the next cell.

# %%
my_prediction = "match"  # change me: "match", "diverge" or "rejected"

# %%
four = torch.randn(4, 4)
try:
    (device_out,) = art_counted.run_raw(four, 3)
    actual = "match" if torch.allclose(device_out, counted(four, 4), atol=1e-4) else "diverge"
except helpers.RuntimeRejectedError:
    actual = "rejected"
_ = check_prediction(my_prediction, actual, "4 items are within the contract and n=3 is the baked value, so the "
                     "runtime runs it, averaging 3 of the 4 items.")

# %% [markdown]
# ## Takeaways
#
# - Export records the *outcome* of every Python decision it meets; the other branch does not exist in
#   the `.pte`.
# - Shapes, config attributes and Python scalars all collapse to Python values while tracing: that is
#   silent specialization. Loops over them are unrolled and baked in.
# - On the device the program is fast (here fully delegated) and wrong, or it refuses the input. A wrong
#   answer makes no noise: only a comparison with eager on **varied** inputs finds it, including every
#   bound's edge (`frames = 1`) and both settings of every flag.
# - Tensor-valued conditions (`x.sum() > 0`, `while`) fail loudly instead: next lesson.
#
# ## Interview answer
#
# *"Why does the exported model disagree with eager on the phone?"* Export traces `forward()` once; any
# condition that is a plain Python value at that moment (a shape, a config attribute, a constant or scalar
# input) is decided then, and only the taken branch is recorded, so the program runs, fast, and is wrong
# for the inputs the example did not cover. Loops over such values are unrolled and baked in; a loop on
# tensor values fails loudly instead. I catch it with an export CI job that diffs the `.pte` against
# eager on varied inputs covering both sides of every branch and every bound, and I fix it by keeping the
# branch in the graph (`torch.cond`, `torch.where`), vectorising the loop, or hoisting the decision into
# the app.

# %% [markdown]
# ### Check: the fixed models match eager on their probe sets

# %%
assert loop_report.ok_within_contract, loop_report
fixed_shape_report = helpers.compare(shape_model, art_shape_fixed,
                                     helpers.probe_inputs((clip,), {"x": {1: frames2}}))
assert fixed_shape_report.ok_within_contract, fixed_shape_report
counted_probes = helpers.probe_inputs((items3,), {"x": {0: any_items}})
assert all(torch.allclose(art_counted_fixed.run(*p.args)[0], counted(p.args[0], len(p.args[0])), atol=1e-4)
           for p in counted_probes if not art_counted_fixed.input_contract().violations(p.args))
print("fixed models: parity with eager inside the contract on", len(loop_report) + len(fixed_shape_report)
      + len(counted_probes), "probes")
